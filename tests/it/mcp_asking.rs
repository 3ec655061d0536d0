//! MCP servers that talk back while a call runs, with a server built on the official
//! TypeScript SDK (tests/mcp/asking-server.mjs): a question for the user (elicitation) waits
//! as an approval any client answers with the form's values, or declines, or lets run out; a
//! request for the model (sampling) is written by the agent's own model as the agent's
//! `mcp_sampling` says, and counted among the turn's model calls; progress keeps its message.

use std::path::Path;

use futures::Stream;
use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};
use crate::mcp::{ALLOW, config, offered, wait_for_mcp};
use crate::support::{events_until, until};

/// `[mcp.asker]`: the asking server over stdio, with `env` (an inline table's insides).
pub fn asker(env: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/asking-server.mjs");
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/mcp/node_modules/@modelcontextprotocol/sdk")
            .is_dir(),
        "the MCP SDK is not installed: run `npm ci --prefix tests/mcp` (scripts/test does it)"
    );
    format!(
        "[mcp.asker]\ncommand = \"node\"\nargs = [\"{}\"]\nenv = {{ {env} }}\n",
        script.display()
    )
}

async fn start(agent_lines: &str) -> Setup {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = config(
        &fake,
        &["asker"],
        &format!("{agent_lines}\n{ALLOW}"),
        &asker(""),
    );
    Setup::start_with(fake, config, Vec::new()).await
}

/// Sends `text` (the fake model calls `tool` of the asking server) and waits for the first
/// approval the call brings.
async fn call_until_asked(
    setup: &Setup,
    tool: &str,
    text: &str,
) -> (impl Stream<Item = (String, Value)> + Unpin + use<>, Value) {
    setup.fake.push(Reply::tool_call(
        &format!("mcp__asker__{tool}"),
        json!({}),
        1,
    ));
    let mut events = setup.server.events(&setup.id).await;
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/messages", setup.id),
            json!({ "text": text }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let seen = until(&mut events, |kind, _| kind == "approval.requested").await;
    let approval = seen.last().unwrap().1["approval"].clone();
    (events, approval)
}

/// What the asking server's last `ask` call said it was answered with (`answer: accept {…}`).
fn accepted(items: &[Value]) -> Value {
    let call = items
        .iter()
        .rev()
        .find(|item| item["kind"] == "tool_call")
        .expect("the call is stored");
    let output = call["output"].as_str().unwrap();
    let content = output
        .strip_prefix("answer: accept ")
        .unwrap_or_else(|| panic!("not accepted: {output}"));
    serde_json::from_str(content).unwrap()
}

async fn answer(setup: &Setup, approval: &Value, body: Value) -> (u16, Value) {
    let id = approval["id"].as_str().unwrap();
    setup
        .server
        .post(&format!("/api/approvals/{id}"), body)
        .await
}

/// The output of the turn's MCP call, once the turn ended.
async fn call_output(
    setup: &Setup,
    events: &mut (impl Stream<Item = (String, Value)> + Unpin),
) -> (Value, Value) {
    let ended = events_until(events, "turn.ended").await.pop().unwrap().1;
    let items = setup.items().await;
    let call = items
        .iter()
        .rev()
        .find(|item| item["kind"] == "tool_call")
        .expect("the call is stored")
        .clone();
    (ended, call)
}

#[tokio::test]
async fn a_servers_question_is_answered_with_the_forms_values_like_an_approval() {
    let setup = start("").await;
    let (mut events, approval) = call_until_asked(&setup, "ask", "Deploy it").await;
    assert_eq!(approval["tool"], "mcp_question", "{approval}");
    assert_eq!(approval["status"], "pending");
    let question = &approval["question"];
    assert_eq!(question["server"], "asker", "{approval}");
    assert_eq!(question["message"], "Where should the service be deployed?");
    let schema = &question["schema"];
    assert_eq!(
        schema["properties"]["environment"]["enum"],
        json!(["staging", "production"])
    );
    assert_eq!(schema["properties"]["replicas"]["type"], "integer");
    assert_eq!(schema["properties"]["replicas"]["maximum"], 10);
    assert_eq!(schema["properties"]["confirm"]["type"], "boolean");
    assert_eq!(schema["required"], json!(["environment"]));
    // Every client sees it where it sees approvals.
    let (_, pending) = setup.server.get("/api/approvals").await;
    assert_eq!(pending["approvals"][0]["id"], approval["id"], "{pending}");
    // The call waits for the user meanwhile, as a client that comes now sees it.
    let mut late = setup.server.events(&setup.id).await;
    let (_, snapshot) = events_until(&mut late, "snapshot").await.pop().unwrap();
    let waiting = snapshot["running"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["id"] == approval["item_id"])
        .expect("the call in the running turn")
        .clone();
    assert_eq!(waiting["status"], "waiting_approval", "{waiting}");

    // An answer that does not fit the form is refused, naming the field; nothing changes.
    let (status, body) = answer(
        &setup,
        &approval,
        json!({"decision": "allow_once", "content": {"environment": "production", "replicas": 50}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_request");
    assert_eq!(
        body["error"]["message"],
        "the answer does not fit the question: `replicas` must be at most 10"
    );
    let (status, body) = answer(
        &setup,
        &approval,
        json!({"decision": "allow_once", "content": {"replicas": 2}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`environment` is required"),
        "{body}"
    );
    // A question is never remembered as a rule.
    let (status, body) = answer(&setup, &approval, json!({"decision": "allow_always"})).await;
    assert_eq!(status, 400, "{body}");
    let (_, pending) = setup.server.get("/api/approvals").await;
    assert_eq!(pending["approvals"][0]["status"], "pending", "{pending}");

    setup.fake.push(Reply::text("Deployed to production."));
    let content = json!({"environment": "production", "replicas": 3, "confirm": true});
    let (status, settled) = answer(
        &setup,
        &approval,
        json!({"decision": "allow_once", "content": content}),
    )
    .await;
    assert_eq!(status, 200, "{settled}");
    assert_eq!(settled["status"], "allowed");
    assert_eq!(settled["question"]["answer"], content, "{settled}");
    let (ended, call) = call_output(&setup, &mut events).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(call["status"], "completed", "{call}");
    assert_eq!(accepted(&[call]), content);
    // The model read what the server returned.
    let requests = setup.fake.requests();
    let last = &requests.last().unwrap().body;
    assert!(last.to_string().contains("answer: accept"), "{last}");
}

#[tokio::test]
async fn a_declined_or_unanswered_question_is_declined_to_the_server() {
    let setup = start("approval_timeout_s = 2").await;
    let (mut events, approval) = call_until_asked(&setup, "ask", "Deploy it").await;
    assert!(approval["expires_at"].is_string(), "{approval}");
    setup.fake.push(Reply::text("Not deployed."));
    let (status, settled) = answer(&setup, &approval, json!({"decision": "deny"})).await;
    assert_eq!(status, 200, "{settled}");
    assert_eq!(settled["status"], "denied");
    let (ended, call) = call_output(&setup, &mut events).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(call["output"], "answer: decline", "{call}");

    // Nobody answers: declined when the agent's approval time runs out.
    let (mut events, approval) = call_until_asked(&setup, "ask", "Deploy it again").await;
    setup.fake.push(Reply::text("Still not deployed."));
    let seen = until(&mut events, |kind, _| kind == "approval.resolved").await;
    let resolved = &seen.last().unwrap().1["approval"];
    assert_eq!(resolved["id"], approval["id"]);
    assert_eq!(resolved["status"], "expired", "{resolved}");
    let (_, call) = call_output(&setup, &mut events).await;
    assert_eq!(call["output"], "answer: decline", "{call}");
}

#[tokio::test]
async fn a_servers_request_for_the_model_is_written_by_the_agents_model_and_counted() {
    let setup = start("mcp_sampling = \"allow\"").await;
    let before = setup.fake.requests().len();
    setup
        .fake
        .push(Reply::tool_call("mcp__asker__summarize", json!({}), 1));
    // The server's request for the model comes next, then the turn's own next call.
    setup.fake.push(Reply::text("The notes fix two bugs."));
    setup.fake.push(Reply::text("Summarized."));
    let turn = setup.turn("Summarize the notes").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let requests = setup.fake.requests().split_off(before);
    assert_eq!(requests.len(), 3);
    let sampling = requests[1].body.to_string();
    assert!(
        sampling.contains("You write one-line summaries."),
        "{sampling}"
    );
    assert!(
        sampling.contains("Summarize: the release notes"),
        "{sampling}"
    );
    // No tools, and nothing of the conversation: only what the server sent.
    assert!(requests[1].body.get("tools").is_none(), "{sampling}");
    assert!(!sampling.contains("Summarize the notes"), "{sampling}");
    let items = setup.items().await;
    let call = items
        .iter()
        .rev()
        .find(|i| i["kind"] == "tool_call")
        .unwrap();
    let output = call["output"].as_str().unwrap();
    assert!(output.starts_with("sampled by "), "{output}");
    assert!(output.ends_with(": The notes fix two bugs."), "{output}");
    // Counted among the turn's model calls.
    assert_eq!(turn.ended()["usage"]["model_calls"], 3, "{}", turn.ended());
}

#[tokio::test]
async fn sampling_asks_a_user_by_default_and_a_denying_agent_refuses_it() {
    let setup = start("").await;
    let (mut events, approval) = call_until_asked(&setup, "summarize", "Summarize").await;
    assert_eq!(approval["tool"], "mcp_sampling", "{approval}");
    let arguments = &approval["subject"]["arguments"];
    assert_eq!(arguments["server"], "asker", "{approval}");
    assert_eq!(arguments["system_prompt"], "You write one-line summaries.");
    assert_eq!(
        arguments["messages"],
        json!([{"role": "user", "text": "Summarize: the release notes"}])
    );
    assert_eq!(arguments["max_tokens"], 200);
    assert_eq!(approval["setting"], "mcp_sampling");
    setup.fake.push(Reply::text("Not summarized."));
    let (status, _) = answer(&setup, &approval, json!({"decision": "deny"})).await;
    assert_eq!(status, 200);
    let (ended, call) = call_output(&setup, &mut events).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["usage"]["model_calls"], 2, "{ended}");
    assert_eq!(call["status"], "failed", "{call}");
    assert!(
        call["output"]
            .as_str()
            .unwrap()
            .contains("a user declined the request for the model"),
        "{call}"
    );

    let setup = start("mcp_sampling = \"deny\"").await;
    setup
        .fake
        .push(Reply::tool_call("mcp__asker__summarize", json!({}), 1));
    setup.fake.push(Reply::text("Could not."));
    let turn = setup.turn("Summarize").await;
    assert!(
        turn.all("approval.requested").is_empty(),
        "{:?}",
        turn.events
    );
    let items = setup.items().await;
    let call = items
        .iter()
        .rev()
        .find(|i| i["kind"] == "tool_call")
        .unwrap();
    assert!(
        call["output"]
            .as_str()
            .unwrap()
            .contains("mcp_sampling = \"deny\""),
        "{call}"
    );
}

#[tokio::test]
async fn progress_lines_keep_the_servers_message() {
    let setup = start("").await;
    setup
        .fake
        .push(Reply::tool_call("mcp__asker__index", json!({}), 1));
    setup.fake.push(Reply::text("Indexed."));
    let turn = setup.turn("Index the files").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let call = turn.completed("tool_call")[0].clone();
    let live: String = turn
        .all("item.delta")
        .into_iter()
        .filter(|delta| delta["item_id"] == call["id"] && delta["field"] == "output")
        .map(|delta| delta["delta"].as_str().unwrap())
        .collect();
    // Each line keeps its message. The SDK hands each notification to a task of its own, so
    // the last may be handled after the result, or before an earlier one (which is then
    // dropped: progress only grows): the lines shown are in order, and at least one is.
    let lines: Vec<&str> = live.lines().collect();
    assert!(!lines.is_empty(), "{live:?}");
    let expected = [
        "[progress 1/2] reading files",
        "[progress 2/2] indexing files",
    ];
    let places: Vec<usize> = lines
        .iter()
        .map(|line| {
            expected
                .iter()
                .position(|wanted| wanted == line)
                .unwrap_or_else(|| panic!("{live:?}"))
        })
        .collect();
    assert!(places.windows(2).all(|pair| pair[0] < pair[1]), "{live:?}");
    assert_eq!(call["output"], "indexed 2 files");
}

#[tokio::test]
async fn the_plain_chat_asks_the_questions_fields_one_at_a_time() {
    let setup = start("").await;
    setup
        .fake
        .push(Reply::tool_call("mcp__asker__ask", json!({}), 1));
    setup.fake.push(Reply::text("Deployed."));
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let script = "Deploy it\ny\nmoon\n2\n3\ny\n";
    let (ok, out, err) = crate::terminal::chat(
        &[&setup.id, "--url", &setup.server.base],
        script,
        dir.path(),
    )
    .await;
    assert!(ok, "{out}\n{err}");
    let expected = [
        "] the MCP server `asker` asks: Where should the service be deployed?\n",
        "  Environment: one of staging, production; required\n",
        "  Replicas: a whole number from 1 to 10\n",
        "Answer? [y]es / [n]o, decline: y\n",
        "Environment [1 staging | 2 production]: moon\n",
        "[answer one of staging, production; required] Environment [1 staging | 2 production]: 2\n",
        "Replicas (How many copies run), Enter to leave it out: 3\n",
        "Run the migrations too [y/n], Enter to leave it out: y\n",
        ": answered: environment: production, replicas: 3, confirm: yes]\n",
    ];
    let mut from = 0;
    for wanted in expected {
        let at = out[from..]
            .find(wanted)
            .unwrap_or_else(|| panic!("`{wanted}` missing after byte {from} of:\n{out}"));
        from += at + wanted.len();
    }
    assert_eq!(
        accepted(&setup.items().await),
        json!({"environment": "production", "replicas": 3, "confirm": true})
    );
}

#[tokio::test]
async fn an_editor_fills_in_the_servers_form_or_can_only_decline_without_forms() {
    let setup = start("").await;
    let cwd = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut editor =
        crate::acp::Editor::start_with(&setup.server.base, json!({"elicitation": {"form": {}}}))
            .await;
    let session = editor.new_session(cwd.path()).await;
    setup
        .fake
        .push(Reply::tool_call("mcp__asker__ask", json!({}), 1));
    setup.fake.push(Reply::text("Deployed."));
    let prompt = editor.prompt(&session, "Deploy it").await;
    let form = editor.until(|line| line.get("form").is_some()).await;
    let params = &form["params"];
    assert_eq!(params["mode"], "form", "{form}");
    assert_eq!(params["sessionId"], session.as_str(), "{form}");
    assert!(params["toolCallId"].is_string(), "{form}");
    assert_eq!(
        params["message"],
        "The MCP server `asker` asks: Where should the service be deployed?"
    );
    assert_eq!(
        params["requestedSchema"]["properties"]["environment"]["enum"],
        json!(["staging", "production"]),
        "{form}"
    );
    editor
        .fill_in(
            &form["form"],
            json!({"action": "accept", "content": {"environment": "staging", "replicas": 2}}),
        )
        .await;
    let done = editor.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let (_, approvals) = setup.server.get("/api/approvals?status=all").await;
    let settled = &approvals["approvals"][0];
    assert_eq!(settled["resolution"]["decided_by"], "acp", "{settled}");
    assert_eq!(
        settled["question"]["answer"],
        json!({"environment": "staging", "replicas": 2})
    );
    let conversation = settled["conversation_id"].as_str().unwrap();
    let items = crate::support::items(&setup.server, conversation).await;
    assert_eq!(
        accepted(&items),
        json!({"environment": "staging", "replicas": 2})
    );

    // An editor that fills in no forms is asked to decline, and told where to answer.
    let mut plain = crate::acp::Editor::start(&setup.server.base).await;
    let session = plain.new_session(cwd.path()).await;
    setup
        .fake
        .push(Reply::tool_call("mcp__asker__ask", json!({}), 1));
    setup.fake.push(Reply::text("Not deployed."));
    let prompt = plain.prompt(&session, "Deploy it").await;
    let ask = plain.until(|line| line.get("permission").is_some()).await;
    let options: Vec<&str> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|option| option["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["deny"], "{ask}");
    let title = ask["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.contains("openvaala chat"), "{title}");
    plain.answer(&ask["permission"], "deny").await;
    let done = plain.until(|line| line["id"] == prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
}

#[tokio::test]
async fn a_server_still_starting_is_left_out_of_the_first_call_with_a_notice() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let gate = dir.path().join("gate");
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let env = format!("FIXTURE_START_GATE = \"{}\"", gate.display());
    let tables = format!("{}[tools]\nmcp_start_wait_ms = 1000\n", asker(&env));
    let config = config(&fake, &["asker"], ALLOW, &tables);
    // The set-up's first turn runs while the server cannot start: it does not wait for it.
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    let items = setup.items().await;
    let notice = items
        .iter()
        .find(|item| item["kind"] == "notice")
        .unwrap_or_else(|| panic!("{items:?}"));
    assert_eq!(
        notice["text"],
        "The MCP server `asker` is still starting: its tools are left out of this model call, \
         and offered once ready."
    );
    let first = &setup.fake.requests()[0].body;
    assert!(
        offered(Wire::OpenaiChat, first, "mcp__asker__index").is_none(),
        "{first}"
    );
    assert!(first.to_string().contains("is still starting"), "{first}");
    let (_, listed) = setup.server.get("/api/mcp").await;
    assert_eq!(listed["servers"][0]["state"], "starting", "{listed}");

    // Once it has started, the next turn is offered its tools, with no notice.
    std::fs::write(&gate, "").unwrap();
    wait_for_mcp(&setup.server, |server| server["state"] == "running").await;
    setup
        .fake
        .push(Reply::tool_call("mcp__asker__index", json!({}), 1));
    setup.fake.push(Reply::text("Indexed."));
    let turn = setup.turn("Index the files").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    assert!(
        offered(
            Wire::OpenaiChat,
            &turn.requests[0].body,
            "mcp__asker__index"
        )
        .is_some(),
        "{}",
        turn.requests[0].body
    );
    assert!(turn.completed("notice").is_empty(), "{:?}", turn.events);
    let call = turn.completed("tool_call")[0].clone();
    assert_eq!(call["output"], "indexed 2 files");
}
