//! `openvaala acp` beyond the basics, with the same client no one here wrote: sub-agents as
//! sessions of their own (the protocol's sub-agent extension, for an editor that says it
//! follows them), file changes (writes, edits, commands) as diffs with the text they replaced,
//! and `/retry`.

use serde_json::{Value, json};

use crate::acp::{Editor, workspace};
use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};

/// A service whose default agent has `tools`.
async fn start(tools: &str) -> (FakeProvider, Server) {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake
        .config()
        .replace(r#"tools = ["shell"]"#, &format!("tools = {tools}"));
    let server = Server::start_with(ServerOptions {
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    (fake, server)
}

fn messages<'a>(body: &'a Value, role: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |message| message["role"] == role)
}

/// The session ids the `spawn_agent` results in a request name.
fn spawned(body: &Value) -> Vec<String> {
    messages(body, "tool")
        .filter_map(|m| serde_json::from_str::<Value>(m["content"].as_str()?).ok())
        .filter_map(|result| result["session_id"].as_str().map(str::to_owned))
        .collect()
}

const TASK: &str = "task: list the files";

/// Answers every model call of a service whose root agent spawns one sub-agent for `TASK`,
/// waits for it and then answers `last`; the sub-agent's `n`th call is answered by `child(n)`.
/// Sessions call the model at the same time: each is answered by what its request holds.
fn script_one_sub_agent(
    fake: &FakeProvider,
    child: impl Fn(usize) -> Reply + Send + Sync + 'static,
    last: &'static str,
) {
    fake.script(move |body| {
        let first = messages(body, "user").next()?["content"]
            .as_str()?
            .to_owned();
        let calls = messages(body, "tool").count();
        Some(match calls {
            _ if first == TASK => child(calls),
            0 => Reply::tool_call("spawn_agent", json!({"agent": "default", "task": TASK}), 1),
            1 => Reply::tool_call(
                "wait_agents",
                json!({"session_ids": spawned(body), "timeout_s": 60}),
                1,
            ),
            _ => Reply::text(last),
        })
    });
}

#[tokio::test]
async fn sub_agents_are_sessions_of_their_own_for_an_editor_that_follows_them() {
    let (fake, server) = start(r#"["shell", "spawn_agent", "wait_agents"]"#).await;
    script_one_sub_agent(
        &fake,
        |calls| match calls {
            0 => Reply::tool_call("shell", json!({"command": "echo child-was-here"}), 1),
            _ => Reply::text("Child report."),
        },
        "All done.",
    );
    let cwd = workspace();
    let mut editor = Editor::start_with(&server.base, json!({"subagents": {}})).await;
    let session = editor.new_session(cwd.path()).await;
    let prompt = editor.prompt(&session, "Split the work").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");

    // The child was announced in the editor's session, with its agent, task and state.
    let announced = editor.updates(&session, "subagent_update");
    let first = announced.first().expect("the sub-agent announced");
    let child = first["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(first["title"], "default", "{first}");
    assert_eq!(first["description"], TASK, "{first}");
    assert_eq!(first["capabilities"]["cancel"], json!({}), "{first}");
    let states: Vec<&Value> = announced
        .iter()
        .filter(|update| update["sessionId"] == child.as_str())
        .map(|update| &update["state"])
        .collect();
    assert_eq!(
        states.last().unwrap(),
        &&json!({"state": "idle", "stopReason": "end_turn"}),
        "{announced:#?}"
    );
    // Its work is in its own session, not the editor's.
    let calls = editor.updates(&child, "tool_call");
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["title"], "echo child-was-here");
    assert_eq!(
        editor.text_of(&child, "agent_message_chunk"),
        "Child report."
    );
    let root_calls: Vec<String> = editor
        .updates(&session, "tool_call")
        .iter()
        .map(|call| call["title"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(root_calls.len(), 2, "{root_calls:?}");
    assert!(
        root_calls[0].starts_with("Sub-agent default") && root_calls[1] == "wait_agents",
        "{root_calls:?}"
    );
    // Its task arrived in its session, and its report in the editor's, as session messages.
    let task = editor.updates(&child, "session_message");
    assert_eq!(task[0]["content"][0]["text"], TASK, "{task:#?}");
    let reports = editor.updates(&session, "session_message");
    assert_eq!(reports.len(), 1, "{reports:#?}");
    assert_eq!(reports[0]["senderSessionId"], child.as_str());
    assert!(
        reports[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Child report."),
        "{reports:#?}"
    );
    assert_eq!(editor.text_of(&session, "agent_message_chunk"), "All done.");
}

#[tokio::test]
async fn file_changes_show_as_diffs_with_the_text_they_replaced() {
    let (fake, server) = start(r#"["shell", "write_file"]"#).await;
    let cwd = workspace();
    std::fs::write(cwd.path().join("notes.txt"), "line one\n").unwrap();
    fake.push(Reply::tool_call(
        "write_file",
        json!({"path": "notes.txt", "content": "line one\nline two\n"}),
        1,
    ));
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "printf 'made\\n' > made.txt && rm notes.txt"}),
        1,
    ));
    fake.push(Reply::text("Done."));
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    let prompt = editor.prompt(&session, "change the files").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");

    let calls = editor.updates(&session, "tool_call");
    assert_eq!(calls.len(), 2, "{calls:#?}");
    // The last update of each call: the diffs the service's checkpoints recorded.
    let last_diffs = |call: &Value| -> Vec<Value> {
        let updates = editor.updates(&session, "tool_call_update");
        let last = updates
            .iter()
            .rev()
            .find(|update| update["toolCallId"] == call["toolCallId"])
            .expect("an update of the call");
        last["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|block| block["type"] == "diff")
            .cloned()
            .collect()
    };
    let notes = cwd.path().join("notes.txt");
    let write = last_diffs(&calls[0]);
    assert_eq!(write.len(), 1, "{write:#?}");
    assert_eq!(write[0]["path"], notes.to_str().unwrap());
    assert_eq!(write[0]["oldText"], "line one\n");
    assert_eq!(write[0]["newText"], "line one\nline two\n");

    let shell = last_diffs(&calls[1]);
    let by_path = |path: &std::path::Path| {
        shell
            .iter()
            .find(|diff| diff["path"] == path.to_str().unwrap())
            .unwrap_or_else(|| panic!("{} in {shell:#?}", path.display()))
            .clone()
    };
    let made = by_path(&cwd.path().join("made.txt"));
    assert!(made["oldText"].is_null(), "{made}");
    assert_eq!(made["newText"], "made\n");
    let removed = by_path(&notes);
    assert_eq!(removed["oldText"], "line one\nline two\n");
    assert_eq!(removed["newText"], "");
}

#[tokio::test]
async fn retry_runs_a_failed_turn_again_without_sending_the_message_twice() {
    let (fake, server) = start(r#"["shell"]"#).await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    fake.push(Reply::rejected(400, "the model refuses this request"));
    let prompt = editor.prompt(&session, "try this").await;
    let failed = editor.until(|line| line["id"] == prompt).await;
    assert!(failed.get("error").is_some(), "{failed}");

    fake.push(Reply::text("Second time lucky."));
    let retry = editor.prompt(&session, "/retry").await;
    let done = editor.until(|line| line["id"] == retry).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        editor.text_of(&session, "agent_message_chunk"),
        "Second time lucky."
    );
    // The model saw the message once, and the conversation holds it once.
    let last = fake.requests().pop().expect("a request").body;
    let asked: Vec<&Value> = messages(&last, "user")
        .filter(|m| m["content"] == "try this")
        .collect();
    assert_eq!(asked.len(), 1, "{last}");
    let conversations = server.get("/api/conversations").await.1;
    let id = conversations["conversations"][0]["id"].as_str().unwrap();
    let items = crate::support::items(&server, id).await;
    let sent = items
        .iter()
        .filter(|item| item["kind"] == "user_message" && item["text"] == "try this")
        .count();
    assert_eq!(sent, 1, "{items:#?}");
}

#[tokio::test]
async fn cancelling_a_sub_agents_session_interrupts_only_its_work() {
    let (fake, server) = start(r#"["shell", "spawn_agent", "wait_agents"]"#).await;
    script_one_sub_agent(
        &fake,
        |_| Reply::tool_call("shell", json!({"command": "sleep 30"}), 1),
        "Went on without it.",
    );
    let cwd = workspace();
    let mut editor = Editor::start_with(&server.base, json!({"subagents": {}})).await;
    let session = editor.new_session(cwd.path()).await;
    let prompt = editor.prompt(&session, "Split the work").await;
    // The child's long command started in its own session.
    let started = editor
        .until(|line| {
            line["update"]["update"]["sessionUpdate"] == "tool_call"
                && line["update"]["update"]["title"] == "sleep 30"
        })
        .await;
    let child = started["update"]["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(child, session);
    editor
        .notify("session/cancel", json!({"sessionId": child}))
        .await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let last_state = editor
        .updates(&session, "subagent_update")
        .into_iter()
        .rfind(|update| update["sessionId"] == child.as_str())
        .unwrap();
    assert_eq!(
        last_state["state"],
        json!({"state": "idle", "stopReason": "cancelled"})
    );
    assert_eq!(
        editor.text_of(&session, "agent_message_chunk"),
        "Went on without it."
    );
}

#[tokio::test]
async fn the_editor_switches_the_agent_of_a_running_conversation_between_turns() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = format!(
        "{}\n[agents.reader]\ndescription = \"reads only\"\nmodel = \"m\"\ntools = [\"read_file\"]\n",
        fake.config()
    );
    let server = Server::start_with(ServerOptions {
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    let tools = |body: &Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    fake.push(Reply::tool_call("shell", json!({"command": "sleep 30"}), 1));
    let prompt = editor.prompt(&session, "first").await;
    editor
        .until(|line| line["update"]["update"]["sessionUpdate"] == "tool_call")
        .await;
    assert_eq!(
        tools(&fake.requests()[0].body),
        ["shell", "process_output", "process_list", "process_kill"]
    );
    let id = server.get("/api/conversations").await.1["conversations"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Not while the agent works: its turn has the old agent's tools and rules.
    let busy = editor
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "reader"}),
        )
        .await;
    assert!(
        busy["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("running")),
        "{busy}"
    );
    let (status, body) = server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({"agent": "nobody"}),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("agent_unavailable"))
    );
    editor
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    editor.until(|line| line["id"] == prompt).await;

    let switched = editor
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "reader"}),
        )
        .await;
    assert!(switched.get("result").is_some(), "{switched}");
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["agent"], "reader", "{conversation}");
    fake.push(Reply::text("Reading now."));
    let next = editor.prompt(&session, "second").await;
    let done = editor.until(|line| line["id"] == next).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let last = fake.requests().pop().unwrap().body;
    assert_eq!(tools(&last), ["read_file"], "{last}");
}

#[tokio::test]
async fn an_edit_shows_as_the_diff_of_what_it_replaced_then_of_the_whole_file() {
    let (fake, server) = start(r#"["edit_file"]"#).await;
    let cwd = workspace();
    let notes = cwd.path().join("notes.txt");
    std::fs::write(&notes, "line one\nline two\n").unwrap();
    fake.push(Reply::tool_call(
        "edit_file",
        json!({"path": "notes.txt", "old_string": "line two", "new_string": "line 2"}),
        1,
    ));
    fake.push(Reply::text("Done."));
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    let prompt = editor.prompt(&session, "edit the notes").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    // The answer says what the turn's two model calls used, the cached input apart.
    use crate::fake_provider::{CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS};
    let usage = &done["result"]["usage"];
    assert_eq!(usage["inputTokens"], 2 * INPUT_TOKENS, "{done}");
    assert_eq!(usage["outputTokens"], 2 * OUTPUT_TOKENS, "{done}");
    assert_eq!(usage["cachedReadTokens"], 2 * CACHED_TOKENS, "{done}");

    let calls = editor.updates(&session, "tool_call");
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["kind"], "edit", "{}", calls[0]);
    assert_eq!(calls[0]["title"], "Edit notes.txt", "{}", calls[0]);
    let diffs: Vec<Value> = editor
        .updates(&session, "tool_call_update")
        .into_iter()
        .filter(|update| update["toolCallId"] == calls[0]["toolCallId"])
        .filter_map(|update| update["content"].as_array().cloned())
        .flatten()
        .filter(|block| block["type"] == "diff")
        .collect();
    // At its end, the text it replaced and what it wrote; then the whole file, from the
    // checkpoints.
    let path = notes.to_str().unwrap();
    let snippet = json!({"type": "diff", "path": path, "oldText": "line two", "newText": "line 2"});
    let whole = json!({"type": "diff", "path": path, "oldText": "line one\nline two\n", "newText": "line one\nline 2\n"});
    assert_eq!(diffs.first(), Some(&snippet), "{diffs:#?}");
    assert_eq!(diffs.last(), Some(&whole), "{diffs:#?}");
}

/// A sub-agent whose report comes after the editor's prompt ended starts a turn of the parent
/// of its own: the editor is shown the report as the agent's message, and the answer after it.
#[tokio::test]
async fn a_report_after_the_prompt_ended_is_shown_as_the_agents_message() {
    let (fake, server) = start(r#"["shell", "spawn_agent"]"#).await;
    fake.script(move |body| {
        let first = messages(body, "user").next()?["content"]
            .as_str()?
            .to_owned();
        let last = messages(body, "user").last()?["content"]
            .as_str()?
            .to_owned();
        let calls = messages(body, "tool").count();
        Some(match calls {
            // The child takes a while, so the parent's prompt ends first.
            0 if first == TASK => Reply::tool_call("shell", json!({"command": "sleep 1"}), 1),
            _ if first == TASK => Reply::text("Child report."),
            _ if last.contains("Child report.") => Reply::text("Noted the report."),
            0 => Reply::tool_call("spawn_agent", json!({"agent": "default", "task": TASK}), 1),
            _ => Reply::text("Started it."),
        })
    });
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    let prompt = editor.prompt(&session, "Start the work").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        editor.text_of(&session, "agent_message_chunk"),
        "Started it."
    );
    // No prompt is running: the report's turn still reaches the editor.
    while !editor
        .text_of(&session, "agent_message_chunk")
        .ends_with("Noted the report.")
    {
        editor
            .until(|line| line["update"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .await;
    }
    let shown = editor.text_of(&session, "agent_message_chunk");
    assert!(
        shown.contains("[report from default]") && shown.contains("Child report."),
        "{shown}"
    );
    assert!(shown.ends_with("Noted the report."), "{shown}");
}

/// Prompts still waiting for a turn when the editor goes away are withdrawn: they never run.
#[tokio::test]
async fn prompts_waiting_when_the_editor_disconnects_are_withdrawn() {
    let server = Server::start().await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    editor.prompt(&session, "Take your time\n/sleep 300").await;
    editor
        .until(|line| line["update"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    editor.prompt(&session, "and this one afterwards").await;
    let (_, list) = server.get("/api/conversations").await;
    let id = list["conversations"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}");
    tokio::time::timeout(crate::harness::TIMEOUT, async {
        loop {
            let (_, conversation) = server.get(&path).await;
            if conversation["pending"]
                .as_array()
                .is_some_and(|p| p.len() == 1)
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the second prompt waits");
    drop(editor);
    // The bridge saw its editor go: the waiting prompt is withdrawn.
    tokio::time::timeout(crate::harness::TIMEOUT, async {
        loop {
            let (_, conversation) = server.get(&path).await;
            if conversation["pending"] == json!([]) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the waiting prompt was never withdrawn");
    // The running turn, stopped, starts nothing after it.
    let (status, _) = server.post(&format!("{path}/interrupt"), json!({})).await;
    assert_eq!(status, 200);
    let (_, conversation) = server.get(&path).await;
    assert_eq!(conversation["status"], "idle", "{conversation}");
    let (_, items) = server.get(&format!("{path}/items")).await;
    assert!(
        !items.to_string().contains("and this one afterwards"),
        "{items}"
    );
}
