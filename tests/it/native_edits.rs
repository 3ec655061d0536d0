//! The edit operation in each protocol's own shape: OpenAI Responses' built-in `apply_patch`
//! (its `apply_patch_call` items stored and sent back as they came, with
//! `apply_patch_call_output`), Anthropic's text editor tool, the `edit_file` function on Chat
//! Completions; and every edit gated like `write_file`: its setting and remembered rules, the
//! sandbox, and the checkpoint record of what it changed.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::{items, until, until_turn_end};

struct Started {
    _temp: tempfile::TempDir,
    work: PathBuf,
    fake: FakeProvider,
    server: Server,
}

/// A server whose agent has the shell, `read_file` and the edit operation, with `agent_lines`
/// added to its table and `model_lines` to its model's; its conversations work in `work`,
/// which holds `a.txt`.
async fn start(wire: Wire, model_lines: &str, agent_lines: &str) -> Started {
    let temp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let work = temp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let fake = FakeProvider::start(wire).await;
    let config = fake
        .config()
        .replace(
            "tools = [\"shell\"]",
            &format!("tools = [\"shell\", \"read_file\", \"edit_file\"]\n{agent_lines}"),
        )
        .replace(
            "max_output_tokens = 1000",
            &format!("max_output_tokens = 1000\n{model_lines}"),
        );
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(work.clone()),
        ..ServerOptions::default()
    })
    .await;
    Started {
        _temp: temp,
        work,
        fake,
        server,
    }
}

impl Started {
    /// Creates a conversation whose first turn makes `replies` and then answers; waits for its
    /// end and returns its id.
    async fn converse(&self, replies: Vec<Reply>) -> String {
        for reply in replies {
            self.fake.push(reply);
        }
        self.fake.push(Reply::text("Done."));
        let created = self.server.create_and_wait("Edit a.txt").await;
        created["conversation"]["id"].as_str().unwrap().to_owned()
    }

    async fn tool_calls(&self, id: &str) -> Vec<Value> {
        items(&self.server, id)
            .await
            .into_iter()
            .filter(|item| item["kind"] == "tool_call")
            .collect()
    }

    fn file(&self, path: &str) -> String {
        std::fs::read_to_string(self.work.join(path)).unwrap()
    }
}

fn tool_names(wire: Wire, body: &Value) -> Vec<Value> {
    body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{wire:?}: no tools in {body}"))
        .clone()
}

#[tokio::test]
async fn each_protocol_is_offered_the_edit_tool_its_models_know() {
    for wire in [
        Wire::OpenaiChat,
        Wire::OpenaiResponses,
        Wire::AnthropicMessages,
    ] {
        let started = start(wire, "", "").await;
        started.converse(Vec::new()).await;
        let tools = tool_names(wire, &started.fake.requests()[0].body);
        let edit = tools.last().unwrap();
        match wire {
            Wire::OpenaiResponses => assert_eq!(edit, &json!({"type": "apply_patch"})),
            Wire::AnthropicMessages => assert_eq!(
                edit,
                &json!({"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"})
            ),
            Wire::OpenaiChat => {
                assert_eq!(edit["type"], "function");
                assert_eq!(edit["function"]["name"], "edit_file");
                let required = &edit["function"]["parameters"]["required"];
                assert_eq!(required, &json!(["path", "old_string", "new_string"]));
            }
        }
    }
    // A model of any protocol can be given the functions instead; on Chat, the patch too.
    let started = start(Wire::OpenaiResponses, "edit_tool = \"edit_file\"", "").await;
    started.converse(Vec::new()).await;
    let tools = tool_names(Wire::OpenaiResponses, &started.fake.requests()[0].body);
    assert_eq!(tools.last().unwrap()["name"], "edit_file");
    let started = start(Wire::OpenaiChat, "edit_tool = \"apply_patch\"", "").await;
    started.converse(Vec::new()).await;
    let tools = tool_names(Wire::OpenaiChat, &started.fake.requests()[0].body);
    let names: Vec<&Value> = tools.iter().map(|tool| &tool["function"]["name"]).collect();
    assert_eq!(
        names[names.len() - 2..],
        [&json!("edit_file"), &json!("apply_patch")]
    );
}

#[tokio::test]
async fn the_builtin_apply_patch_edits_and_goes_back_as_its_own_items() {
    let started = start(Wire::OpenaiResponses, "", "").await;
    let id = started
        .converse(vec![
            Reply::ApplyPatch(vec![
                json!({"type": "update_file", "path": "a.txt", "diff": "@@\n one\n-two\n+2\n"}),
                json!({"type": "create_file", "path": "new/b.txt", "diff": "+fresh\n+file\n"}),
            ]),
            Reply::ApplyPatch(vec![
                json!({"type": "update_file", "path": "missing.txt", "diff": "@@\n-x\n+y\n"}),
            ]),
        ])
        .await;
    assert_eq!(started.file("a.txt"), "one\n2\nthree\n");
    assert_eq!(started.file("new/b.txt"), "fresh\nfile\n");
    let calls = started.tool_calls(&id).await;
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0]["name"], "apply_patch");
    assert_eq!(calls[0]["status"], "completed", "{}", calls[0]);
    assert_eq!(calls[0]["arguments"]["operation"]["path"], "a.txt");
    assert_eq!(
        calls[0]["files"]["modified"],
        json!(["a.txt"]),
        "{}",
        calls[0]
    );
    assert_eq!(calls[2]["status"], "failed", "{}", calls[2]);

    // The next requests carry the calls as they came, and their outcomes.
    let requests = started.fake.requests();
    let input = requests[2].body["input"].as_array().unwrap().clone();
    let of_type =
        |kind: &str| -> Vec<&Value> { input.iter().filter(|item| item["type"] == kind).collect() };
    let sent_calls = of_type("apply_patch_call");
    assert_eq!(sent_calls.len(), 3, "{input:?}");
    assert_eq!(
        sent_calls[0]["operation"],
        json!({"type": "update_file", "path": "a.txt", "diff": "@@\n one\n-two\n+2\n"})
    );
    assert_eq!(sent_calls[0]["call_id"], calls[0]["call_id"]);
    let outputs = of_type("apply_patch_call_output");
    let statuses: Vec<&Value> = outputs.iter().map(|output| &output["status"]).collect();
    assert_eq!(
        statuses,
        [&json!("completed"), &json!("completed"), &json!("failed")]
    );
    assert!(of_type("function_call").is_empty(), "{input:?}");
}

#[tokio::test]
async fn the_text_editor_views_and_edits_with_the_same_engine() {
    let started = start(Wire::AnthropicMessages, "", "").await;
    let editor = |arguments: Value| Reply::tool_call("str_replace_based_edit_tool", arguments, 2);
    let id = started
        .converse(vec![
            editor(json!({"command": "view", "path": "a.txt"})),
            editor(json!({"command": "str_replace", "path": "a.txt", "old_str": "two", "new_str": "2"})),
            editor(json!({"command": "insert", "path": "a.txt", "insert_line": 0, "insert_text": "zero\n"})),
            editor(json!({"command": "str_replace", "path": "a.txt", "old_str": "nowhere", "new_str": "x"})),
        ])
        .await;
    assert_eq!(started.file("a.txt"), "zero\none\n2\nthree\n");
    let calls = started.tool_calls(&id).await;
    let statuses: Vec<&Value> = calls.iter().map(|call| &call["status"]).collect();
    assert_eq!(
        statuses,
        [
            &json!("completed"),
            &json!("completed"),
            &json!("completed"),
            &json!("failed")
        ]
    );
    // `view` reads like read_file: numbered lines.
    assert!(
        calls[0]["output"].as_str().unwrap().contains("2\ttwo"),
        "{}",
        calls[0]
    );
    assert!(
        calls[0].get("files").is_none(),
        "a view changes nothing: {}",
        calls[0]
    );
    assert_eq!(
        calls[1]["files"]["modified"],
        json!(["a.txt"]),
        "{}",
        calls[1]
    );
}

#[tokio::test]
async fn an_edit_is_gated_like_write_file_by_its_setting_and_the_sandbox() {
    let started = start(
        Wire::OpenaiChat,
        "",
        "[agents.default.permissions]\nwrite_file = \"deny\"",
    )
    .await;
    let edit = |path: &str| {
        Reply::tool_call(
            "edit_file",
            json!({"path": path, "old_string": "two", "new_string": "2"}),
            1,
        )
    };
    let id = started.converse(vec![edit("a.txt")]).await;
    let call = &started.tool_calls(&id).await[0];
    assert_eq!(call["denied"], true, "{call}");
    assert!(
        call["output"].as_str().unwrap().contains("write_file"),
        "{call}"
    );
    assert_eq!(started.file("a.txt"), "one\ntwo\nthree\n");

    // Outside the working directory, the sandbox refuses it whatever the permissions say.
    let started = start(Wire::OpenaiChat, "", "").await;
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = outside.path().join("a.txt");
    std::fs::write(&target, "one\ntwo\n").unwrap();
    let id = started.converse(vec![edit(target.to_str().unwrap())]).await;
    let call = &started.tool_calls(&id).await[0];
    assert_eq!(call["status"], "failed", "{call}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "one\ntwo\n");
}

#[tokio::test]
async fn an_edit_asks_as_write_file_does_and_a_remembered_directory_answers_the_next() {
    let started = start(
        Wire::OpenaiChat,
        "",
        "[agents.default.permissions]\nwrite_file = \"ask\"",
    )
    .await;
    started.fake.push(Reply::tool_call(
        "edit_file",
        json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
        1,
    ));
    started.fake.push(Reply::text("First done."));
    let (status, created) = started
        .server
        .post("/api/conversations", json!({"text": "Edit"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = started.server.events(&id).await;
    let seen = until(&mut events, |kind, data| {
        kind == "approval.requested"
            || (kind == "snapshot" && !data["approvals"].as_array().unwrap().is_empty())
    })
    .await;
    let (kind, data) = seen.last().unwrap();
    let approval = if kind == "snapshot" {
        data["approvals"][0].clone()
    } else {
        data["approval"].clone()
    };
    assert_eq!(approval["tool"], "edit_file", "{approval}");
    let rule = format!("{}/*", started.work.display());
    assert_eq!(approval["suggested_rule"], rule.as_str(), "{approval}");
    let (status, body) = started
        .server
        .post(
            &format!("/api/approvals/{}", approval["id"].as_str().unwrap()),
            json!({"decision": "allow_conversation"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    until_turn_end(&mut events).await;
    assert_eq!(started.file("a.txt"), "1\ntwo\nthree\n");

    // The rule kept is a write_file rule for the directory: the next edit there runs unasked.
    started.fake.push(Reply::tool_call(
        "edit_file",
        json!({"path": "a.txt", "old_string": "two", "new_string": "2"}),
        1,
    ));
    started.fake.push(Reply::text("Second done."));
    let (status, _) = started
        .server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({"text": "Again"}),
        )
        .await;
    assert_eq!(status, 202);
    let seen = until_turn_end(&mut events).await;
    assert!(
        !seen.iter().any(|(kind, _)| kind == "approval.requested"),
        "{seen:?}"
    );
    assert_eq!(started.file("a.txt"), "1\n2\nthree\n");
}
