//! Tool hooks, driven like a client against the fake provider: `pre_tool_use` as a real shell
//! script (exit code 2 denies with its standard error; a JSON answer allows or asks), a hook
//! that does not answer in time (denied by its `on_error`), and a real HTTP receiver in the
//! test whose POSTs carry a Standard Webhooks signature; `post_tool_use` adding a note the model
//! reads; `GET /api/hooks` listing them with the last failure.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::{items, until};

const SECRET: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// What the receiver got: each POST's headers and body.
type Received = Arc<Mutex<Vec<(HeaderMap, String)>>>;

/// A receiver on 127.0.0.1 that denies every call it is asked about.
async fn receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let app = Router::new()
        .route(
            "/hook",
            post(
                |State(received): State<Received>, headers: HeaderMap, body: String| async move {
                    received.lock().unwrap().push((headers, body));
                    axum::Json(json!({"decision": "deny", "reason": "the receiver says no"}))
                },
            ),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/hook"), received)
}

/// The Standard Webhooks check: `v1,` base64 HMAC-SHA256 of `id.timestamp.body`.
fn signed_right(headers: &HeaderMap, body: &str) -> bool {
    let header = |name: &str| headers[name].to_str().unwrap().to_owned();
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET)
        .unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(
        format!(
            "{}.{}.{body}",
            header("webhook-id"),
            header("webhook-timestamp")
        )
        .as_bytes(),
    );
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    header("webhook-signature") == expected
}

/// The hook script: writes each payload beside itself, then answers by the command.
const SCRIPT: &str = r#"#!/bin/sh
input=$(cat)
printf '%s\n' "$input" >> "$(dirname "$0")/payloads.jsonl"
case "$input" in
  *'"command":"rm '*) echo "no deleting here" >&2; exit 2 ;;
  *'"command":"git push'*) echo '{"decision": "ask", "reason": "pushes need a person"}' ;;
  *'"command":"echo allowed'*) echo '{"decision": "allow"}' ;;
esac
"#;

/// A `post_tool_use` script: writes each payload beside itself, and has a note for the model
/// after a file was written.
const AFTER: &str = r#"#!/bin/sh
input=$(cat)
printf '%s\n' "$input" >> "$(dirname "$0")/after.jsonl"
case "$input" in
  *'"command":"echo allowed >'*) echo '{"note": "lint failed: out.txt has no heading"}' ;;
esac
"#;

async fn start(fake: &FakeProvider) -> (tempfile::TempDir, Server, Received) {
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().join("work");
    let hooks = temp.path().join("hooks");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(hooks.join("vet.sh"), SCRIPT).unwrap();
    std::fs::write(hooks.join("after.sh"), AFTER).unwrap();
    let (url, received) = receiver().await;
    let config = format!(
        "{}\n[agents.default.permissions]\nshell = \"ask\"\n\
         [agents.default.permissions.shell_rules]\n\"echo allowed-but-denied*\" = \"deny\"\n\n\
         [[hooks.pre_tool_use]]\nmatcher = \"shell\"\ncommand = \"sh {}\"\n\n\
         [[hooks.pre_tool_use]]\nmatcher = \"shell(sleep-hook*)\"\ncommand = \"sleep 20\"\ntimeout_s = 1\n\n\
         [[hooks.pre_tool_use]]\nmatcher = \"shell(curl-hook*)\"\nurl = \"{url}\"\nsecret = \"whsec_{SECRET}\"\n\n\
         [[hooks.post_tool_use]]\nmatcher = \"shell\"\ncommand = \"sh {}\"\n",
        fake.config(),
        hooks.join("vet.sh").display(),
        hooks.join("after.sh").display()
    );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(work),
        ..ServerOptions::default()
    })
    .await;
    (temp, server, received)
}

/// The conversation's last shell call.
async fn last_shell(server: &Server, id: &str) -> Value {
    items(server, id)
        .await
        .into_iter()
        .rev()
        .find(|item| item["kind"] == "tool_call" && item["name"] == "shell")
        .expect("a shell call")
}

#[tokio::test]
async fn tool_hooks_deny_allow_ask_fail_closed_and_leave_notes() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (temp, server, received) = start(&fake).await;
    let work = temp.path().join("work");
    std::fs::write(work.join("keep.txt"), "kept").unwrap();

    // Exit code 2 denies, with the script's standard error as the reason.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "rm keep.txt"}),
        1,
    ));
    fake.push(Reply::text("Could not."));
    let created = server.create_and_wait("Clean up").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let call = last_shell(&server, &id).await;
    assert_eq!(call["denied"], true, "{call}");
    let output = call["output"].as_str().unwrap();
    assert!(
        output.contains("hooks.pre_tool_use[0]: no deleting here"),
        "{output}"
    );
    assert_eq!(call["hooks"][0]["outcome"], "deny", "{call}");
    assert_eq!(call["hooks"][0]["detail"], "no deleting here", "{call}");
    assert!(work.join("keep.txt").exists());
    let payload: Value = serde_json::from_str(
        std::fs::read_to_string(temp.path().join("hooks/payloads.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(payload["event"], "pre_tool_use");
    assert_eq!(payload["conversation_id"], id.as_str());
    assert_eq!(payload["agent"], "default");
    assert_eq!(payload["tool"], "shell");
    assert_eq!(payload["tool_call_id"], call["id"]);
    assert_eq!(payload["arguments"]["command"], "rm keep.txt");
    assert_eq!(payload["cwd"], work.to_str().unwrap());

    // `allow` answers what the agent's permissions would ask a user.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo allowed > out.txt"}),
        1,
    ));
    fake.push(Reply::text("Done."));
    server.send_and_wait(&id, "Write it").await;
    let call = last_shell(&server, &id).await;
    assert_eq!(call["status"], "completed");
    assert!(work.join("out.txt").exists());
    // A post_tool_use hook's note follows the output, and the model reads it.
    let note = "[hook hooks.post_tool_use[0]: lint failed: out.txt has no heading]";
    assert!(call["output"].as_str().unwrap().ends_with(note), "{call}");
    let sent = fake.requests().last().unwrap().body.to_string();
    assert!(
        sent.contains("lint failed: out.txt has no heading"),
        "{sent}"
    );
    let after: Vec<Value> = std::fs::read_to_string(temp.path().join("hooks/after.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(after.len(), 1, "only calls that ran are told: {after:?}");
    assert_eq!(after[0]["event"], "post_tool_use");
    assert_eq!(after[0]["status"], "completed");
    assert_eq!(after[0]["tool_call_id"], call["id"]);
    assert_eq!(
        after[0]["files_changed"]["added"],
        json!(["out.txt"]),
        "{}",
        after[0]
    );

    // ... but never past a configured deny.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo allowed-but-denied > no.txt"}),
        1,
    ));
    fake.push(Reply::text("Refused."));
    server.send_and_wait(&id, "Try it").await;
    let call = last_shell(&server, &id).await;
    assert_eq!(call["denied"], true, "{call}");
    assert!(!work.join("no.txt").exists());

    // A hook that does not answer in time decides by its on_error: deny by default.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "sleep-hook now"}),
        1,
    ));
    fake.push(Reply::text("Denied."));
    server.send_and_wait(&id, "Wait").await;
    let call = last_shell(&server, &id).await;
    assert_eq!(call["denied"], true, "{call}");
    let output = call["output"].as_str().unwrap();
    assert!(output.contains("hooks.pre_tool_use[1]"), "{output}");
    assert!(output.contains("did not answer within 1 s"), "{output}");
    // Each hook that ran shows on the call; the one that failed leaves a notice on the turn.
    let runs: Vec<(&str, &str)> = call["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| {
            (
                run["hook"].as_str().unwrap(),
                run["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            ("hooks.pre_tool_use[0]", "ran"),
            ("hooks.pre_tool_use[1]", "failed")
        ],
        "{call}"
    );
    assert!(call["hooks"][1]["ms"].as_u64().unwrap() >= 1000, "{call}");
    let notice = items(&server, &id)
        .await
        .into_iter()
        .find(|item| item["kind"] == "notice" && item["turn_id"] == call["turn_id"])
        .expect("a notice of the failed hook");
    assert_eq!(
        notice["text"],
        "Hook hooks.pre_tool_use[1] failed: it did not answer within 1 s; its on_error is deny.",
        "{notice}"
    );

    // An HTTP hook, signed the Standard Webhooks way.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "curl-hook example.org"}),
        1,
    ));
    fake.push(Reply::text("Denied."));
    server.send_and_wait(&id, "Fetch").await;
    let call = last_shell(&server, &id).await;
    assert!(
        call["output"]
            .as_str()
            .unwrap()
            .contains("hooks.pre_tool_use[2]: the receiver says no"),
        "{call}"
    );
    let posts = received.lock().unwrap().clone();
    assert_eq!(posts.len(), 1);
    let (headers, body) = &posts[0];
    assert!(signed_right(headers, body), "{headers:?}");
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap()["arguments"]["command"],
        "curl-hook example.org"
    );

    // `ask` makes a user answer.
    let mut events = server.events(&id).await;
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "git push origin main"}),
        1,
    ));
    fake.push(Reply::text("Not pushed."));
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({"text": "Push it"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let seen = until(&mut events, |kind, _| kind == "approval.requested").await;
    let approval = seen.last().unwrap().1["approval"].clone();
    assert!(
        approval["reason"]
            .as_str()
            .unwrap()
            .contains("pushes need a person"),
        "{approval}"
    );
    let (status, body) = server
        .post(
            &format!("/api/approvals/{}", approval["id"].as_str().unwrap()),
            json!({"decision": "deny"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.wait_idle(&id).await;
    assert_eq!(last_shell(&server, &id).await["denied"], true);

    // The hooks as configured (by event, then in the file's order), with the last failure of
    // the one that timed out.
    let (status, list) = server.get("/api/hooks").await;
    assert_eq!(status, 200, "{list}");
    let hooks = list["hooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 4, "{list}");
    assert_eq!(hooks[0]["key"], "hooks.post_tool_use[0]");
    assert_eq!(hooks[0]["on_error"], "allow");
    assert_eq!(hooks[1]["key"], "hooks.pre_tool_use[0]");
    assert_eq!(hooks[1]["matcher"], "shell");
    assert!(hooks[1].get("last_error").is_none(), "{list}");
    assert!(
        hooks[2]["last_error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer within 1 s"),
        "{list}"
    );
    assert_eq!(hooks[3]["signed"], true);
    assert!(
        !list.to_string().contains(SECRET),
        "the secret is never shown"
    );
}

/// A receiver on 127.0.0.1 that answers nothing and hands each POST's body to the test.
async fn listener() -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (sender, bodies) = tokio::sync::mpsc::unbounded_channel();
    let app =
        Router::new()
            .route(
                "/ended",
                post(
                    |State(sender): State<tokio::sync::mpsc::UnboundedSender<String>>,
                     body: String| async move {
                        let _ = sender.send(body);
                    },
                ),
            )
            .with_state(sender);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/ended"), bodies)
}

#[tokio::test]
async fn a_turn_ended_hook_is_told_how_each_root_turn_ended() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (url, mut bodies) = listener().await;
    let server = Server::start_with(ServerOptions {
        config: Some(format!(
            "{}\n[[hooks.turn_ended]]\nurl = \"{url}\"\n",
            fake.config()
        )),
        ..ServerOptions::default()
    })
    .await;
    fake.push(Reply::tool_call("shell", json!({"command": "true"}), 1));
    fake.push(Reply::text("Done."));
    let created = server.create_and_wait("Run it").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let body = tokio::time::timeout(crate::harness::TIMEOUT, bodies.recv())
        .await
        .expect("the hook is told within the timeout")
        .unwrap();
    let told: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(told["event"], "turn_ended");
    assert_eq!(told["conversation_id"], id);
    assert_eq!(told["turn_id"], created["turn_id"]);
    assert_eq!(told["status"], "completed");
    assert_eq!(told["usage"]["model_calls"], 2, "{told}");

    // A failed turn says why.
    fake.push(Reply::status(400));
    server.send_and_wait(id, "Again").await;
    let body = tokio::time::timeout(crate::harness::TIMEOUT, bodies.recv())
        .await
        .expect("the hook is told within the timeout")
        .unwrap();
    let told: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(told["status"], "failed");
    assert!(!told["error"].as_str().unwrap().is_empty(), "{told}");
}

#[tokio::test]
async fn a_subagent_ended_hook_is_told_of_each_sub_agents_turn() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (url, mut bodies) = listener().await;
    let config = fake.config().replace(
        "tools = [\"shell\"]",
        "tools = [\"shell\", \"spawn_agent\"]",
    );
    let server = Server::start_with(ServerOptions {
        config: Some(format!(
            "{config}\n[[hooks.subagent_ended]]\nurl = \"{url}\"\n"
        )),
        ..ServerOptions::default()
    })
    .await;
    fake.script(|body| {
        let users: Vec<String> = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|message| message["role"] == "user")
            .map(|message| message["content"].to_string())
            .collect();
        let answered = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|message| message["role"] == "tool");
        Some(if users.iter().any(|text| text.contains("CHILD TASK")) {
            Reply::text("child done")
        } else if !answered {
            Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "CHILD TASK"}),
                1,
            )
        } else {
            Reply::text("fine")
        })
    });
    let created = server.create_and_wait("Delegate it").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let root = created["conversation"]["root_session_id"].as_str().unwrap();
    let body = tokio::time::timeout(crate::harness::TIMEOUT, bodies.recv())
        .await
        .expect("the hook is told within the timeout")
        .unwrap();
    let told: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(told["event"], "subagent_ended");
    assert_eq!(told["conversation_id"], id);
    assert_eq!(told["parent_session_id"], root);
    assert_ne!(told["session_id"], root);
    assert_eq!(told["agent"], "default");
    assert_eq!(told["status"], "completed", "{told}");
    // The root's own turn is no sub-agent's.
    assert!(bodies.try_recv().is_err(), "only the sub-agent's turn");
}

#[tokio::test]
async fn approval_hooks_are_told_when_a_call_waits_and_when_it_is_answered() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let (url, mut bodies) = listener().await;
    let server = Server::start_with(ServerOptions {
        config: Some(format!(
            "{}\n[agents.default.permissions]\nshell = \"ask\"\n\n\
             [[hooks.approval_requested]]\nurl = \"{url}\"\n\n\
             [[hooks.approval_resolved]]\nurl = \"{url}\"\n",
            fake.config()
        )),
        ..ServerOptions::default()
    })
    .await;
    fake.push(Reply::tool_call("shell", json!({"command": "touch x"}), 1));
    fake.push(Reply::text("Not done."));
    let (status, created) = server
        .post("/api/conversations", json!({"text": "Touch it"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut next = async || -> Value {
        let body = tokio::time::timeout(crate::harness::TIMEOUT, bodies.recv())
            .await
            .expect("the hook is told within the timeout")
            .unwrap();
        serde_json::from_str(&body).unwrap()
    };
    let requested = next().await;
    assert_eq!(requested["event"], "approval_requested");
    assert_eq!(requested["conversation_id"], id.as_str());
    let approval = &requested["approval"];
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["subject"]["command"], "touch x");
    let (status, body) = server
        .post(
            &format!("/api/approvals/{}", approval["id"].as_str().unwrap()),
            json!({"decision": "deny"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let resolved = next().await;
    assert_eq!(resolved["event"], "approval_resolved");
    assert_eq!(resolved["approval"]["id"], approval["id"]);
    assert_eq!(resolved["approval"]["status"], "denied", "{resolved}");
    server.wait_idle(&id).await;
}

/// Attack: a hook's own children (setsid or not) end with it, and a call's hostile arguments
/// reach the hook only as JSON on its standard input, never as a command line.
#[tokio::test]
async fn a_hooks_children_end_with_it_and_arguments_never_become_its_command_line() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let config = format!(
        "{}\n[[hooks.pre_tool_use]]\ncommand = \"setsid sleep 31341 & (setsid sh -c 'sleep 31342' &); cat > seen.json; exit 2\"\n",
        fake.config()
    );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(work.clone()),
        ..ServerOptions::default()
    })
    .await;
    let hostile = "echo hi'; touch pwned; echo '$(touch pwned2)";
    fake.push(Reply::tool_call("shell", json!({"command": hostile}), 1));
    fake.push(Reply::text("Done."));
    server.create_and_wait("Say hi").await;
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("seen.json")).unwrap()).unwrap();
    assert_eq!(seen["arguments"]["command"], hostile);
    // The hook denied the call, and ran nothing of its text.
    assert!(!work.join("pwned").exists() && !work.join("pwned2").exists());
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("cmdline")).ok())
        .filter(|cmdline| cmdline.contains("3134"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "a hook's processes outlived it");
}
