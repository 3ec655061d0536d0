//! Hooks that change what happens, driven like a client against the fake provider: a
//! `pre_tool_use` script that rewrites a call (what runs and what is stored is the rewritten
//! call, with the model's own arguments kept on the hook's run), `user_message` scripts that
//! block a message (422, nothing stored) or add context the model reads, every run kept on
//! its item with a notice for a failed one, and the lifecycle notifications: a conversation
//! created, forked, compacted and deleted.

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT};
use crate::support::items;

/// Rewrites `echo raw …` into a write of `changed.txt`; says nothing of anything else.
const REWRITE: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"command":"echo raw'*) echo '{"arguments": {"command": "echo rewritten > changed.txt"}, "reason": "writes go to changed.txt"}' ;;
esac
"#;

/// Blocks a message that speaks of the launch codes (exit code 2, standard error the reason),
/// fails on one that says "break the hook", and otherwise adds the open ticket as context
/// (plain text on standard output).
const MESSAGES: &str = r#"#!/bin/sh
input=$(cat)
printf '%s\n' "$input" >> "$(dirname "$0")/messages.jsonl"
case "$input" in
  *'launch codes'*) echo "no talk of launch codes" >&2; exit 2 ;;
  *'break the hook'*) echo "the hook broke" >&2; exit 3 ;;
esac
echo "Ticket ABC-1 is open."
"#;

async fn start(fake: &FakeProvider) -> (tempfile::TempDir, Server) {
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().join("work");
    let hooks = temp.path().join("hooks");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(hooks.join("rewrite.sh"), REWRITE).unwrap();
    std::fs::write(hooks.join("messages.sh"), MESSAGES).unwrap();
    let config = format!(
        "{}\n[[hooks.pre_tool_use]]\nmatcher = \"shell\"\ncommand = \"sh {}\"\n\n\
         [[hooks.user_message]]\ncommand = \"sh {}\"\n",
        fake.config(),
        hooks.join("rewrite.sh").display(),
        hooks.join("messages.sh").display(),
    );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(work),
        ..ServerOptions::default()
    })
    .await;
    (temp, server)
}

/// The text of every user message of a Chat Completions request, in order.
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "user")
        .map(|message| match &message["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[tokio::test]
async fn a_pre_tool_use_hook_rewrites_a_call_and_the_stored_call_is_what_ran() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (temp, server) = start(&fake).await;
    let work = temp.path().join("work");
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo raw > raw.txt"}),
        1,
    ));
    fake.push(Reply::text("Written."));
    let created = server.create_and_wait("Write it").await;
    let id = created["conversation"]["id"].as_str().unwrap();

    // What ran is the hook's call, not the model's.
    assert!(!work.join("raw.txt").exists());
    assert_eq!(
        std::fs::read_to_string(work.join("changed.txt")).unwrap(),
        "rewritten\n"
    );
    let stored = items(&server, id).await;
    let call = stored
        .iter()
        .find(|item| item["kind"] == "tool_call")
        .unwrap();
    assert_eq!(call["status"], "completed", "{call}");
    assert_eq!(
        call["arguments"]["command"], "echo rewritten > changed.txt",
        "{call}"
    );
    let run = &call["hooks"][0];
    assert_eq!(run["hook"], "hooks.pre_tool_use[0]", "{call}");
    assert_eq!(run["outcome"], "changed", "{call}");
    assert_eq!(run["detail"], "writes go to changed.txt");
    assert_eq!(run["arguments_before"]["command"], "echo raw > raw.txt");
    assert!(run["ms"].is_u64(), "{run}");

    // The model's next request carries the call as it ran.
    let sent = fake.requests().last().unwrap().body.to_string();
    assert!(sent.contains("echo rewritten > changed.txt"), "{sent}");
}

#[tokio::test]
async fn user_message_hooks_block_a_message_or_add_context_the_model_reads() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (temp, server) = start(&fake).await;

    // A new conversation whose first message is blocked is never stored.
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({"text": "What are the launch codes?"}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "message_blocked", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("hooks.user_message[0]") && message.contains("no talk of launch codes"),
        "{message}"
    );
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 0, "{list}");
    assert!(fake.requests().is_empty());

    // Context a hook adds follows the user's words to the model, and stays with the message.
    fake.push(Reply::text("Noted."));
    let created = server.create_and_wait("How are things?").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let users = user_texts(&fake.requests()[0].body);
    assert_eq!(
        users.last().unwrap(),
        "How are things?\n\n[hook hooks.user_message[0]: Ticket ABC-1 is open.]"
    );
    let stored = items(&server, &id).await;
    let message = &stored[0];
    assert_eq!(message["text"], "How are things?", "{message}");
    assert_eq!(message["hooks"][0]["outcome"], "context", "{message}");
    assert_eq!(message["hooks"][0]["detail"], "Ticket ABC-1 is open.");
    let payload: Value = serde_json::from_str(
        std::fs::read_to_string(temp.path().join("hooks/messages.jsonl"))
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(payload["event"], "user_message");
    assert_eq!(payload["text"], "How are things?");
    assert_eq!(payload["conversation_id"], id.as_str());
    assert_eq!(payload["turn_id"], created["turn_id"]);

    // A later message that is blocked changes nothing.
    let path = format!("/api/conversations/{id}/messages");
    let (status, body) = server
        .post(&path, json!({"text": "And the launch codes?"}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "message_blocked");
    assert_eq!(items(&server, &id).await.len(), stored.len());

    // A hook that fails lets the message through (its on_error is allow by default), and
    // its run says how it failed.
    fake.push(Reply::text("Fine."));
    server.send_and_wait(&id, "Please break the hook").await;
    let message = items(&server, &id)
        .await
        .into_iter()
        .rfind(|item| item["kind"] == "user_message")
        .unwrap();
    assert_eq!(message["text"], "Please break the hook");
    let run = &message["hooks"][0];
    assert_eq!(run["outcome"], "failed", "{message}");
    assert!(
        run["detail"].as_str().unwrap().contains("the hook broke"),
        "{run}"
    );

    // A message sent again with its Idempotency-Key gets its first answer, and the hook is
    // not asked again.
    let asked = || {
        std::fs::read_to_string(temp.path().join("hooks/messages.jsonl"))
            .unwrap()
            .lines()
            .count()
    };
    let before = asked();
    fake.push(Reply::text("Once."));
    let message = json!({"text": "Only once, please"});
    let (status, first) = server.post_with_key(&path, message.clone(), "once-1").await;
    assert_eq!(status, 202, "{first}");
    let (status, again) = server.post_with_key(&path, message, "once-1").await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again, first);
    assert_eq!(asked(), before + 1);
}

/// A receiver on 127.0.0.1 that hands each POST's body to the test.
async fn listener() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    use axum::extract::State;
    let (sender, bodies) = tokio::sync::mpsc::unbounded_channel();
    let app =
        axum::Router::new()
            .route(
                "/told",
                axum::routing::post(
                    |State(sender): State<tokio::sync::mpsc::UnboundedSender<Value>>,
                     body: String| async move {
                        let _ = sender.send(serde_json::from_str(&body).unwrap());
                    },
                ),
            )
            .with_state(sender);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/told"), bodies)
}

/// The next notification for which `wanted` holds (others are skipped).
async fn next_told(
    bodies: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let told = bodies.recv().await.expect("the receiver runs");
            if wanted(&told) {
                return told;
            }
        }
    })
    .await
    .expect("the hook is told within the timeout")
}

#[tokio::test]
async fn lifecycle_hooks_are_told_of_creates_forks_compactions_and_deletes() {
    let (url, mut bodies) = listener().await;
    let hook = |event: &str| format!("[[hooks.{event}]]\nurl = \"{url}\"\n");
    let server = Server::start_with(ServerOptions {
        config: Some(
            ["conversation_created", "compaction", "conversation_deleted"]
                .map(hook)
                .join("\n"),
        ),
        ..ServerOptions::default()
    })
    .await;
    let created = server.create_and_wait("First question for the demo").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let told = next_told(&mut bodies, |told| told["event"] == "conversation_created").await;
    assert_eq!(told["conversation_id"], id.as_str());
    assert_eq!(
        told["session_id"],
        created["conversation"]["root_session_id"]
    );
    assert_eq!(told["agent"], "default");
    assert!(told.get("turn_id").is_none(), "{told}");
    assert!(told["forked_from"].is_null(), "{told}");

    server.send_and_wait(&id, "A second question").await;
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let before = next_told(&mut bodies, |told| told["event"] == "compaction").await;
    assert_eq!(before["stage"], "before", "{before}");
    assert_eq!(before["reason"], "manual", "{before}");
    let after = next_told(&mut bodies, |told| told["event"] == "compaction").await;
    assert_eq!(after["stage"], "after", "{after}");
    assert_eq!(after["summary_item_id"], body["summary"]["id"], "{after}");

    let (status, fork) = server
        .post(&format!("/api/conversations/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{fork}");
    let told = next_told(&mut bodies, |told| told["event"] == "conversation_created").await;
    assert_eq!(
        told["conversation_id"], fork["conversation"]["id"],
        "{told}"
    );
    assert_eq!(
        told["forked_from"]["conversation_id"],
        id.as_str(),
        "{told}"
    );

    let (status, body) = server.delete(&format!("/api/conversations/{id}")).await;
    assert!(status == 200 || status == 204, "{status} {body}");
    let told = next_told(&mut bodies, |told| told["event"] == "conversation_deleted").await;
    assert_eq!(told["conversation_id"], id.as_str());
    assert_eq!(told["title"], created["conversation"]["title"]);
}

#[tokio::test]
async fn on_error_decides_what_a_failed_hook_means_for_a_call_and_a_message() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    // Both hooks fail (exit 3): the call's goes on by `allow`, the message's blocks by `deny`
    // unless the message says "let me through".
    let config = format!(
        "{}\n[[hooks.pre_tool_use]]\ncommand = \"echo broken >&2; exit 3\"\non_error = \"allow\"\n\n\
         [[hooks.user_message]]\ncommand = \"grep -q 'let me through' || {{ echo down >&2; exit 3; }}\"\n\
         on_error = \"deny\"\n",
        fake.config()
    );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(work.clone()),
        ..ServerOptions::default()
    })
    .await;

    let (status, body) = server
        .post("/api/conversations", json!({"text": "Hello"}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "message_blocked");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("hooks.user_message[0]") && message.contains("its on_error is deny"),
        "{message}"
    );

    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo ran > ran.txt"}),
        1,
    ));
    fake.push(Reply::text("Done."));
    let created = server.create_and_wait("Please let me through").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(work.join("ran.txt")).unwrap(),
        "ran\n"
    );
    let call = items(&server, id)
        .await
        .into_iter()
        .find(|item| item["kind"] == "tool_call")
        .unwrap();
    assert_eq!(call["status"], "completed", "{call}");
    assert_eq!(call["hooks"][0]["outcome"], "failed", "{call}");
    assert!(
        call["hooks"][0]["detail"]
            .as_str()
            .unwrap()
            .ends_with("its on_error is allow"),
        "{call}"
    );
}
