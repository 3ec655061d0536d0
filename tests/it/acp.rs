//! `openvaala acp` driven by a client no one here wrote: the `@agentclientprotocol/sdk` npm
//! package's `client()` (installed into `tests/acp` by `npm ci --prefix tests/acp`), through
//! a small line-protocol driver (`tests/acp/driver.mjs`) that spawns the bridge against a test
//! service and the fake provider.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT, binary};

fn driver_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp");
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk").is_dir(),
        "{} is missing the ACP client: run `npm ci --prefix tests/acp` (scripts/test does)",
        dir.display()
    );
    dir
}

/// The SDK's client connected to `openvaala acp --url <base>`.
pub struct Editor {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Every line the driver wrote, in order.
    pub seen: Vec<Value>,
}

impl Editor {
    pub async fn start(base: &str) -> Editor {
        Editor::start_with(base, json!({})).await
    }

    /// Started with the given client capabilities in `initialize`.
    pub async fn start_with(base: &str, capabilities: Value) -> Editor {
        let mut command = Command::new("node");
        crate::harness::with_token(&mut command, base);
        let mut child = command
            .arg(driver_dir().join("driver.mjs"))
            .arg(binary())
            .args(["acp", "--url", base])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs the ACP driver");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut editor = Editor {
            child,
            stdin,
            lines,
            next_id: 0,
            seen: Vec::new(),
        };
        let init = editor
            .call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        editor
    }

    async fn write(&mut self, line: Value) {
        let mut text = line.to_string();
        text.push('\n');
        self.stdin.write_all(text.as_bytes()).await.unwrap();
    }

    /// Sends a request; its answer is a later line with this id.
    async fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.write(json!({"id": id, "request": method, "params": params}))
            .await;
        id
    }

    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.until(|line| line["id"] == id).await
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.write(json!({"notify": method, "params": params}))
            .await;
    }

    pub async fn answer(&mut self, ask: &Value, option: &str) {
        self.write(json!({"answer": ask, "outcome": {"outcome": "selected", "optionId": option}}))
            .await;
    }

    /// Answers the form request `ask` with the protocol's `response`.
    pub async fn fill_in(&mut self, ask: &Value, response: Value) {
        self.write(json!({"answer": ask, "response": response}))
            .await;
    }

    /// The next line the driver writes that `found` picks (the others are kept in `seen`).
    pub async fn until(&mut self, found: impl Fn(&Value) -> bool) -> Value {
        tokio::time::timeout(TIMEOUT, async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("the driver ended");
                let value: Value = serde_json::from_str(&line).unwrap();
                self.seen.push(value.clone());
                if found(&value) {
                    return value;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("timed out; the driver wrote: {:#?}", self.seen))
    }

    /// The `session/update`s of `kind` seen so far for `session`.
    pub fn updates(&self, session: &str, kind: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|line| line["update"]["sessionId"] == session)
            .map(|line| line["update"]["update"].clone())
            .filter(|update| update["sessionUpdate"] == kind)
            .collect()
    }

    pub fn text_of(&self, session: &str, kind: &str) -> String {
        self.updates(session, kind)
            .iter()
            .map(|update| update["content"]["text"].as_str().unwrap_or_default())
            .collect()
    }

    pub async fn new_session(&mut self, cwd: &Path) -> String {
        let answer = self
            .call(
                "session/new",
                json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
            )
            .await;
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session: {answer}"))
            .to_owned()
    }

    pub async fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

pub fn workspace() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

async fn start(extra_config: &str) -> (FakeProvider, Server) {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(format!("{}\n{extra_config}", fake.config())),
        ..ServerOptions::default()
    })
    .await;
    (fake, server)
}

const ANSWER: &str = "The quick brown fox jumps over the lazy dog, twice over.";

#[tokio::test]
async fn a_prompt_streams_the_providers_text_and_ends_the_turn() {
    let (fake, server) = start("").await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let init = editor.seen[0]["result"].clone();
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );

    let new = editor
        .call("session/new", json!({"cwd": cwd.path(), "mcpServers": []}))
        .await;
    let session = new["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(new["result"]["modes"]["currentModeId"], "default", "{new}");
    assert_eq!(
        new["result"]["configOptions"][0]["currentValue"], "m",
        "{new}"
    );
    let commands = editor
        .until(|line| line["update"]["update"]["sessionUpdate"] == "available_commands_update")
        .await;
    let names: Vec<&str> = commands["update"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|command| command["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["compact", "fork", "rewind", "context", "agents", "retry"]
    );

    fake.push(Reply::text(ANSWER));
    let prompt = editor.prompt(&session, "Hello").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(editor.text_of(&session, "agent_message_chunk"), ANSWER);
    // The editor's own prompt is not echoed back to it.
    assert!(editor.updates(&session, "user_message_chunk").is_empty());

    // The same conversation, seen through the HTTP API.
    let (_, list) = server.get("/api/conversations").await;
    let conversation = &list["conversations"][0];
    assert_eq!(conversation["cwd"], cwd.path().to_str().unwrap());
    let items = crate::support::items(&server, conversation["id"].as_str().unwrap()).await;
    assert_eq!(items.last().unwrap()["text"], ANSWER);

    // A command runs through the API and answers as the agent.
    let context = editor.prompt(&session, "/context").await;
    let done = editor.until(|line| line["id"] == context).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(
        editor
            .text_of(&session, "agent_message_chunk")
            .contains("tokens"),
        "{:#?}",
        editor.seen
    );
}

#[tokio::test]
async fn a_tool_call_shows_with_its_live_output_and_its_end() {
    let (fake, server) = start("").await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo tool-output-here"}),
        2,
    ));
    fake.push(Reply::text("Done."));
    let prompt = editor.prompt(&session, "run it").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let calls = editor.updates(&session, "tool_call");
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["title"], "echo tool-output-here");
    assert_eq!(calls[0]["kind"], "execute");
    let id = &calls[0]["toolCallId"];
    let updates: Vec<Value> = editor
        .updates(&session, "tool_call_update")
        .into_iter()
        .filter(|update| update["toolCallId"] == *id)
        .collect();
    let last = updates.last().expect("an end");
    assert_eq!(last["status"], "completed", "{updates:#?}");
    assert!(
        last["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("tool-output-here"),
        "{last}"
    );
    assert_eq!(last["rawOutput"]["exit_code"], 0);
    assert_eq!(editor.text_of(&session, "agent_message_chunk"), "Done.");
}

#[tokio::test]
async fn the_agents_plan_reaches_the_editor_as_a_plan_update() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config();
    assert!(config.contains(r#"tools = ["shell"]"#));
    let server = Server::start_with(ServerOptions {
        config: Some(config.replace(
            r#"tools = ["shell"]"#,
            r#"tools = ["shell", "update_plan"]"#,
        )),
        ..ServerOptions::default()
    })
    .await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    let steps = |second: &str| {
        json!({"explanation": "Read first.", "steps": [
            {"step": "Read the code", "status": "completed"},
            {"step": "Fix the bug", "status": second},
        ]})
    };
    fake.push(Reply::tool_call("update_plan", steps("in_progress"), 2));
    fake.push(Reply::tool_call("update_plan", steps("completed"), 1));
    fake.push(Reply::text("Fixed."));
    let prompt = editor.prompt(&session, "fix it").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");

    // Each plan whole, in order: the editor replaces the one it shows.
    let plans = editor.updates(&session, "plan");
    let entries = |second: &str| {
        json!([
            {"content": "Read the code", "priority": "medium", "status": "completed"},
            {"content": "Fix the bug", "priority": "medium", "status": second},
        ])
    };
    assert_eq!(plans.len(), 2, "{:#?}", editor.seen);
    assert_eq!(plans[0]["entries"], entries("in_progress"));
    assert_eq!(plans[1]["entries"], entries("completed"));
    // The calls show as what they are.
    let calls = editor.updates(&session, "tool_call");
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert_eq!(calls[0]["title"], "Update the plan");
    assert_eq!(calls[0]["kind"], "think");
    assert_eq!(editor.text_of(&session, "agent_message_chunk"), "Fixed.");
}

#[tokio::test]
async fn cancel_interrupts_the_running_turn() {
    let (fake, server) = start("").await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    fake.set_pace(std::time::Duration::from_millis(40));
    fake.push(Reply::text(&ANSWER.repeat(20)));
    let prompt = editor.prompt(&session, "talk slowly").await;
    editor
        .until(|line| line["update"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    editor
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    // The list is the index's, updated a moment later: the conversation itself is current.
    let (_, list) = server.get("/api/conversations").await;
    let id = list["conversations"][0]["id"].as_str().unwrap();
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        conversation["last_turn"]["status"], "interrupted",
        "{conversation}"
    );
}

#[tokio::test]
async fn a_conversation_started_over_http_loads_lists_and_goes_on() {
    let (fake, server) = start("").await;
    let cwd = workspace();
    fake.push(Reply::text("Ready."));
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({"text": "Hello from the browser", "cwd": cwd.path()}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;

    let mut editor = Editor::start(&server.base).await;
    let list = editor
        .call("session/list", json!({"cwd": cwd.path()}))
        .await;
    let sessions = list["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{list}");
    assert_eq!(sessions[0]["sessionId"], id.as_str());
    let elsewhere = editor
        .call("session/list", json!({"cwd": "/nowhere"}))
        .await;
    assert_eq!(elsewhere["result"]["sessions"], json!([]), "{elsewhere}");

    let load = editor
        .call(
            "session/load",
            json!({"sessionId": id, "cwd": cwd.path(), "mcpServers": []}),
        )
        .await;
    assert!(load.get("result").is_some(), "{load}");
    // The history came before the answer.
    assert_eq!(
        editor.text_of(&id, "user_message_chunk"),
        "Hello from the browser"
    );
    assert_eq!(editor.text_of(&id, "agent_message_chunk"), "Ready.");

    fake.push(Reply::text("And again."));
    let prompt = editor.prompt(&id, "Once more").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        editor.text_of(&id, "agent_message_chunk"),
        "Ready.And again."
    );
    let items = crate::support::items(&server, &id).await;
    let texts: Vec<&str> = items
        .iter()
        .filter_map(|item| item["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "Hello from the browser",
            "Ready.",
            "Once more",
            "And again."
        ]
    );
}

const ASK: &str = "[agents.default.permissions]\nshell = \"ask\"\n";

#[tokio::test]
async fn approvals_are_asked_in_the_editor_and_answered_there_or_elsewhere() {
    let (fake, server) = start(ASK).await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;

    // Allowed once: the command runs.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo allowed"}),
        1,
    ));
    fake.push(Reply::text("Ran it."));
    let prompt = editor.prompt(&session, "run").await;
    let ask = editor.until(|line| line.get("permission").is_some()).await;
    let options: Vec<&str> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|option| option["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        options,
        ["allow_once", "allow_conversation", "allow_always", "deny"]
    );
    assert_eq!(ask["params"]["toolCall"]["title"], "echo allowed");
    editor.answer(&ask["permission"], "allow_once").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let (_, approvals) = server.get("/api/approvals?status=all").await;
    assert_eq!(
        approvals["approvals"][0]["resolution"]["decision"],
        "allow_once"
    );
    assert_eq!(approvals["approvals"][0]["resolution"]["decided_by"], "acp");

    // Rejected: the command never runs and the model is told.
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": "echo rejected"}),
        1,
    ));
    fake.push(Reply::text("Did not run it."));
    let prompt = editor.prompt(&session, "run another").await;
    let ask = editor.until(|line| line.get("permission").is_some()).await;
    editor.answer(&ask["permission"], "deny").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let calls = editor.updates(&session, "tool_call_update");
    let last = calls.last().unwrap();
    assert_eq!(last["status"], "failed", "{calls:#?}");

    // Answered in the browser first: the editor's question is withdrawn.
    fake.push(Reply::tool_call("shell", json!({"command": "echo web"}), 1));
    fake.push(Reply::text("The browser said yes."));
    let prompt = editor.prompt(&session, "and a third").await;
    let ask = editor.until(|line| line.get("permission").is_some()).await;
    let (_, pending) = server.get("/api/approvals").await;
    let id = pending["approvals"][0]["id"].as_str().unwrap().to_owned();
    let (status, body) = server
        .post(
            &format!("/api/approvals/{id}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let withdrawn = editor.until(|line| line.get("withdrawn").is_some()).await;
    assert_eq!(withdrawn["withdrawn"], ask["permission"]);
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
}

#[tokio::test]
async fn the_service_restarting_mid_turn_ends_the_prompt_naming_it_and_the_session_goes_on() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(fake.config()),
        ..ServerOptions::default()
    })
    .await;
    let base = server.base.clone();
    let addr = base.trim_start_matches("http://").to_owned();
    let cwd = workspace();
    let mut editor = Editor::start(&base).await;
    let session = editor.new_session(cwd.path()).await;
    fake.set_pace(std::time::Duration::from_millis(40));
    fake.push(Reply::text(&ANSWER.repeat(20)));
    let prompt = editor.prompt(&session, "talk slowly").await;
    editor
        .until(|line| line["update"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;

    let data_dir = server.kill9().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        config: Some(fake.config()),
        addr: Some(addr),
        ..ServerOptions::default()
    })
    .await;
    let done = editor.until(|line| line["id"] == prompt).await;
    let message = done["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&base), "{done}");

    // The bridge follows the conversation again: the next prompt is answered.
    fake.set_pace(std::time::Duration::from_millis(1));
    fake.push(Reply::text("Back."));
    let prompt = editor.prompt(&session, "still there?").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(
        editor
            .text_of(&session, "agent_message_chunk")
            .ends_with("Back.")
    );
    drop(server);
}

#[tokio::test]
async fn a_failed_turn_answers_the_prompt_with_its_error() {
    let (fake, server) = start("").await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    fake.push(Reply::rejected(400, "the model refuses this request"));
    let prompt = editor.prompt(&session, "fail please").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    let message = done["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("the model refuses this request"), "{done}");
}

#[tokio::test]
async fn the_editors_mcp_servers_go_with_the_new_conversation() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(format!("{}\n{}", fake.config(), crate::mcp::CLIENT_ALLOW)),
        ..ServerOptions::default()
    })
    .await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let new = editor
        .call(
            "session/new",
            json!({"cwd": cwd.path(), "mcpServers": [{
                "name": "everything",
                "command": "node",
                "args": [crate::mcp::fixture("server-everything"), "stdio"],
                "env": [{"name": "EDITOR_SECRET", "value": "s3cr3t-value"}],
            }]}),
        )
        .await;
    let session = new["result"]["sessionId"].as_str().unwrap().to_owned();
    fake.push(Reply::tool_call(
        "mcp__everything__echo",
        json!({"message": "hi from the editor"}),
        1,
    ));
    fake.push(Reply::text("Echoed."));
    let prompt = editor.prompt(&session, "echo it").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let ends = editor.updates(&session, "tool_call_update");
    let end = ends.last().expect("the call's end");
    assert_eq!(end["status"], "completed", "{ends:#?}");
    assert!(
        end["rawOutput"]["output"]
            .as_str()
            .unwrap()
            .contains("hi from the editor"),
        "{end}"
    );
    let (_, list) = server.get("/api/conversations").await;
    let mcp = &list["conversations"][0]["mcp"]["everything"];
    assert_eq!(mcp["command"], "node", "{list}");
    assert_eq!(mcp["env"]["EDITOR_SECRET"], "[hidden]", "{list}");
}

#[tokio::test]
async fn a_prompts_answer_counts_its_cached_tokens_and_the_meter_carries_the_cost() {
    use crate::fake_provider::{CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS};
    use crate::support::{answer_cost, priced_server};
    let (fake, server) = priced_server().await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    let costed = |line: &Value| {
        let update = &line["update"]["update"];
        update["sessionUpdate"] == "usage_update" && update["cost"].is_object()
    };
    for answers in [1.0, 2.0] {
        fake.push(Reply::text(ANSWER));
        let prompt = editor.prompt(&session, "Hello").await;
        let done = editor.until(|line| line["id"] == prompt).await;
        let usage = &done["result"]["usage"];
        assert_eq!(usage["inputTokens"], INPUT_TOKENS, "{done}");
        assert_eq!(usage["outputTokens"], OUTPUT_TOKENS, "{done}");
        assert_eq!(usage["totalTokens"], INPUT_TOKENS + OUTPUT_TOKENS, "{done}");
        assert_eq!(usage["cachedReadTokens"], CACHED_TOKENS, "{done}");
        assert_eq!(usage["cachedWriteTokens"], 0, "{done}");

        // The meter's cost is the conversation's so far, in no named currency.
        let expected = answers * answer_cost();
        let total = |line: &Value| line["update"]["update"]["cost"]["amount"].as_f64();
        let reached = |line: &Value| costed(line) && total(line) > Some(expected - 1e-12);
        if !editor.seen.iter().any(reached) {
            editor.until(reached).await;
        }
        let last = editor.seen.iter().rfind(|line| costed(line)).unwrap();
        let cost = &last["update"]["update"]["cost"];
        assert!(
            (cost["amount"].as_f64().unwrap() - expected).abs() < 1e-12,
            "{cost}"
        );
        assert_eq!(cost["currency"], "XXX", "{cost}");
    }
    // The context meter goes on with it.
    let meter = editor.updates(&session, "usage_update");
    assert!(
        meter.iter().all(|update| update["size"] == 100_000),
        "{meter:#?}"
    );
}

#[tokio::test]
async fn a_spending_limits_question_names_a_call_the_editor_was_shown() {
    let (fake, server) = start("max_turn_model_calls = 1\non_budget = \"ask\"").await;
    let cwd = workspace();
    let mut editor = Editor::start(&server.base).await;
    let session = editor.new_session(cwd.path()).await;
    for (option, status) in [("allow_once", "completed"), ("deny", "failed")] {
        fake.push(Reply::tool_call("shell", json!({"command": "echo hi"}), 1));
        fake.push(Reply::text("Done."));
        let prompt = editor.prompt(&session, "Echo once").await;
        let ask = editor.until(|line| line.get("permission").is_some()).await;
        let call = &ask["params"]["toolCall"];
        let id = call["toolCallId"].as_str().unwrap();
        assert!(
            call["title"]
                .as_str()
                .unwrap()
                .ends_with("continue past 1?"),
            "{ask}"
        );
        // The editor saw a call by that id before it was asked about it.
        let shown = editor.updates(&session, "tool_call");
        let card = shown
            .iter()
            .find(|update| update["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no call {id} shown before the question: {shown:#?}"));
        // Pending, which the protocol's default leaves unsaid.
        assert!(
            card["status"].is_null() || card["status"] == "pending",
            "{card}"
        );
        assert_eq!(card["title"], "Spending limit reached", "{card}");
        let options: Vec<&str> = ask["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|option| option["optionId"].as_str().unwrap())
            .collect();
        assert_eq!(options, ["allow_once", "deny"]);
        editor.answer(&ask["permission"], option).await;
        let done = editor.until(|line| line["id"] == prompt).await;
        if option == "deny" {
            let message = done["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("a user chose not to go on"), "{done}");
        } else {
            assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
        }
        let ended = |update: &&Value| update["toolCallId"] == id && update["status"] == status;
        if !editor
            .updates(&session, "tool_call_update")
            .iter()
            .any(|update| ended(&update))
        {
            editor.until(|line| ended(&&line["update"]["update"])).await;
        }
    }
}

/// The output a background process went on writing after its call returned, as the editor
/// was shown it: the terminal's chunks, with how it ended, or the call's last text.
async fn background_process_seen(terminals: bool) -> (Editor, String, Value) {
    let (fake, server) = start("[tools]\nbackground_wait_ms = 200\n").await;
    let cwd = workspace();
    let capabilities = if terminals {
        json!({"_meta": {"terminal_output": true}})
    } else {
        json!({})
    };
    let mut editor = Editor::start_with(&server.base, capabilities).await;
    let session = editor.new_session(cwd.path()).await;
    // It goes on well past the call's first look at it (200 ms).
    let command = "for i in 1 2 3 4; do echo bg-line-$i; sleep 0.3; done";
    fake.push(Reply::tool_call(
        "shell",
        json!({"command": command, "background": true}),
        2,
    ));
    fake.push(Reply::text("It runs."));
    let prompt = editor.prompt(&session, "start it").await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let call = editor.updates(&session, "tool_call")[0]["toolCallId"].clone();
    let last = editor
        .until(|line| {
            let update = &line["update"]["update"];
            update["toolCallId"] == call
                && if terminals {
                    update["_meta"]["terminal_exit"].is_object()
                } else {
                    update["content"][0]["content"]["text"]
                        .as_str()
                        .is_some_and(|text| text.contains("(exited 0)"))
                }
        })
        .await;
    (editor, session, last["update"]["update"].clone())
}

#[tokio::test]
async fn a_background_process_goes_on_in_the_editor_as_a_terminal_until_it_ends() {
    let (editor, session, exit) = background_process_seen(true).await;
    let updates = editor.updates(&session, "tool_call_update");
    let terminal = updates
        .iter()
        .find(|update| update["content"][0]["type"] == "terminal")
        .unwrap_or_else(|| panic!("no terminal shown: {updates:#?}"));
    let terminal_id = terminal["content"][0]["terminalId"].as_str().unwrap();
    assert!(terminal_id.starts_with("p_"), "{terminal}");
    assert_eq!(
        terminal["_meta"]["terminal_info"]["terminal_id"],
        terminal_id
    );
    // Every line, once and in order, through the terminal's chunks.
    let written: String = updates
        .iter()
        .filter_map(|update| update["_meta"]["terminal_output"]["data"].as_str())
        .collect();
    assert_eq!(
        written, "bg-line-1\nbg-line-2\nbg-line-3\nbg-line-4\n",
        "{updates:#?}"
    );
    assert_eq!(exit["_meta"]["terminal_exit"]["terminal_id"], terminal_id);
    assert_eq!(exit["_meta"]["terminal_exit"]["exit_code"], 0, "{exit}");
}

#[tokio::test]
async fn an_editor_without_terminals_sees_a_background_processs_output_as_the_calls_text() {
    let (editor, session, last) = background_process_seen(false).await;
    let text = last["content"][0]["content"]["text"].as_str().unwrap();
    assert!(text.starts_with("Background process p_"), "{text}");
    assert!(
        text.ends_with("bg-line-1\nbg-line-2\nbg-line-3\nbg-line-4\n"),
        "{text}"
    );
    // No terminal is named to an editor that cannot show one.
    assert!(
        editor
            .updates(&session, "tool_call_update")
            .iter()
            .all(|update| update["content"][0]["type"] != "terminal" && update["_meta"].is_null()),
        "{:#?}",
        editor.seen
    );
}
