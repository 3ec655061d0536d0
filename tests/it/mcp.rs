//! Tools from real MCP servers that no one here wrote (`@modelcontextprotocol/server-everything`
//! and `server-filesystem`, installed from npm into tests/mcp by the test set-up, never at run
//! time) over stdio: each test drives a turn through the fake provider and checks what the
//! model was offered and what it got back in its next request, not only what was stored.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};
use crate::harness::{Server, TIMEOUT, process_alive};
use crate::support::until;

/// The entry script of an installed fixture server. Missing, it fails the test and says how
/// to install it: a skipped MCP test would hide that nothing was tested.
pub fn fixture(package: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        path.is_file(),
        "{} is missing: the MCP test servers are not installed. Run `npm ci --prefix tests/mcp` \
         (scripts/test and .ci/run do it).",
        path.display()
    );
    path.display().to_string()
}

/// `[mcp.everything]` over stdio.
pub fn everything() -> String {
    format!(
        "[mcp.everything]\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n",
        fixture("server-everything")
    )
}

/// The fake provider's config with the default agent using `servers` (MCP calls allowed
/// unless `agent_lines` says otherwise), and the `[mcp.*]` tables.
pub fn config(fake: &FakeProvider, servers: &[&str], agent_lines: &str, tables: &str) -> String {
    // A turn waits for its servers to start as long as a loaded machine may need: the tests
    // check what the first model call is offered. (A slow start has its own test.)
    let wait = if tables.contains("[tools]") {
        ""
    } else {
        "[tools]\nmcp_start_wait_ms = 60000\n"
    };
    format!(
        "{}mcp = {}\n{agent_lines}\n{tables}\n{wait}",
        fake.config(),
        json!(servers),
    )
}

pub fn config_for(fake: &FakeProvider, tables: &str) -> String {
    config(fake, &["everything"], ALLOW, tables)
}

pub const ALLOW: &str = "[agents.default.permissions]\nmcp = \"allow\"\n";

/// [`ALLOW`], and clients may name command servers (`client_mcp`).
pub const CLIENT_ALLOW: &str = "client_mcp = true\n[agents.default.permissions]\nmcp = \"allow\"\n";

async fn start(wire: Wire) -> Setup {
    let fake = FakeProvider::start(wire).await;
    let config = config(&fake, &["everything"], ALLOW, &everything());
    Setup::start_with(fake, config, Vec::new()).await
}

/// The named tool as a request offered it: its description and parameter schema.
pub fn offered(wire: Wire, body: &Value, name: &str) -> Option<(String, Value)> {
    let tool = body["tools"].as_array()?.iter().find_map(|tool| {
        let tool = if wire == Wire::OpenaiChat {
            &tool["function"]
        } else {
            tool
        };
        (tool["name"] == name).then_some(tool)
    })?;
    let schema = match wire {
        Wire::AnthropicMessages => &tool["input_schema"],
        _ => &tool["parameters"],
    };
    Some((tool["description"].as_str()?.to_owned(), schema.clone()))
}

/// The one tool call of a turn, and the result the model got for it in the next request.
pub fn the_call(wire: Wire, turn: &crate::fake_provider::TurnRun) -> (Value, String) {
    let calls = turn.completed("tool_call");
    assert_eq!(calls.len(), 1, "{:?}", turn.events);
    let call = calls[0].clone();
    let call_id = call["call_id"].as_str().unwrap();
    let next = &turn.requests.last().expect("a request after the call").body;
    let result = wire
        .tool_result(next, call_id)
        .unwrap_or_else(|| panic!("no result for {call_id} in {next}"));
    (call, result)
}

async fn echo_is_offered_called_and_answered(wire: Wire) {
    let setup = start(wire).await;
    setup.fake.push(Reply::tool_call(
        "mcp__everything__echo",
        json!({"message": "hello over MCP"}),
        3,
    ));
    setup.fake.push(Reply::text("It echoed."));
    let turn = setup.turn("Echo something").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);

    let (description, schema) = offered(wire, &turn.requests[0].body, "mcp__everything__echo")
        .unwrap_or_else(|| panic!("echo not offered: {}", turn.requests[0].body));
    assert_eq!(description, "Echoes back the input string");
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["message"]["type"], "string");
    assert!(offered(wire, &turn.requests[0].body, "shell").is_some());

    let (call, result) = the_call(wire, &turn);
    assert_eq!(call["name"], "mcp__everything__echo");
    assert_eq!(call["status"], "completed");
    assert_eq!(call["output"], "Echo: hello over MCP");
    assert_eq!(result, "Echo: hello over MCP");
    let stored = setup.items().await;
    assert!(
        stored
            .iter()
            .any(|item| item["kind"] == "tool_call" && item["output"] == "Echo: hello over MCP"),
        "{stored:?}"
    );
}

#[tokio::test]
async fn echo_over_stdio_openai_chat() {
    echo_is_offered_called_and_answered(Wire::OpenaiChat).await;
}

#[tokio::test]
async fn echo_over_stdio_anthropic_messages() {
    echo_is_offered_called_and_answered(Wire::AnthropicMessages).await;
}

#[tokio::test]
async fn echo_over_stdio_openai_responses() {
    echo_is_offered_called_and_answered(Wire::OpenaiResponses).await;
}

#[tokio::test]
async fn progress_notifications_stream_as_output_deltas() {
    let wire = Wire::OpenaiChat;
    let setup = start(wire).await;
    setup.fake.push(Reply::tool_call(
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 0.4, "steps": 4}),
        1,
    ));
    setup.fake.push(Reply::text("Done."));
    let turn = setup.turn("Run the long operation").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let (call, result) = the_call(wire, &turn);
    let live: String = turn
        .all("item.delta")
        .into_iter()
        .filter(|delta| delta["item_id"] == call["id"] && delta["field"] == "output")
        .map(|delta| delta["delta"].as_str().unwrap())
        .collect();
    // The SDK hands each notification to a task of its own, so the last one, sent just
    // before the result, may be handled after the call has ended: it is then not shown.
    let rest = live
        .strip_prefix("[progress 1/4]\n[progress 2/4]\n[progress 3/4]\n")
        .unwrap_or_else(|| panic!("{live:?}"));
    assert!(["", "[progress 4/4]\n"].contains(&rest), "{live:?}");
    assert_eq!(call["status"], "completed");
    assert_eq!(
        result,
        "Long running operation completed. Duration: 0.4 seconds, Steps: 4."
    );
}

/// The image a request carries with a call's result, as (media type, base64 data).
fn image_sent(wire: Wire, body: &Value, call_id: &str) -> Option<(String, String)> {
    let parts: Vec<&Value> = match wire {
        // A tool message holds text only: the images follow in a user message naming the call.
        Wire::OpenaiChat => body["messages"]
            .as_array()?
            .iter()
            .filter(|message| {
                message["role"] == "user"
                    && message["content"][0]["text"]
                        .as_str()
                        .is_some_and(|text| text.contains(call_id))
            })
            .flat_map(|message| message["content"].as_array().into_iter().flatten())
            .collect(),
        Wire::OpenaiResponses => body["input"]
            .as_array()?
            .iter()
            .filter(|item| item["type"] == "function_call_output" && item["call_id"] == call_id)
            .flat_map(|item| item["output"].as_array().into_iter().flatten())
            .collect(),
        Wire::AnthropicMessages => body["messages"]
            .as_array()?
            .iter()
            .flat_map(|message| message["content"].as_array().into_iter().flatten())
            .filter(|block| block["type"] == "tool_result" && block["tool_use_id"] == call_id)
            .flat_map(|block| block["content"].as_array().into_iter().flatten())
            .collect(),
    };
    parts.into_iter().find_map(|part| {
        let url = part["image_url"]["url"]
            .as_str()
            .or(part["image_url"].as_str());
        if let Some(url) = url {
            let (media_type, data) = url.strip_prefix("data:")?.split_once(";base64,")?;
            return Some((media_type.to_owned(), data.to_owned()));
        }
        let source = &part["source"];
        (part["type"] == "image").then(|| {
            (
                source["media_type"].as_str().unwrap_or("").to_owned(),
                source["data"].as_str().unwrap_or("").to_owned(),
            )
        })
    })
}

pub async fn an_image_result_reaches_the_model_as_an_image(setup: &Setup, wire: Wire) {
    setup.fake.push(Reply::tool_call(
        "mcp__everything__get-tiny-image",
        json!({}),
        1,
    ));
    setup.fake.push(Reply::text("A logo."));
    let turn = setup.turn("Show me the image").await;
    let (call, result) = the_call(wire, &turn);
    assert_eq!(call["status"], "completed");
    let output = call["output"].as_str().unwrap();
    assert!(
        output.starts_with("Here's the image you requested:\n[image: image/png, "),
        "{output}"
    );
    assert!(
        result.starts_with("Here's the image you requested:"),
        "{result}"
    );
    // The image itself is stored with the call, and the model gets it with the result.
    let images = call["images"].as_array().expect("the call's images");
    assert_eq!(images.len(), 1, "{call}");
    assert_eq!(images[0]["media_type"], "image/png");
    let data = images[0]["data"].as_str().unwrap();
    assert!(data.len() > 100, "{data}");
    let next = &turn.requests.last().unwrap().body;
    let sent = image_sent(wire, next, call["call_id"].as_str().unwrap())
        .unwrap_or_else(|| panic!("no image with the result in {next}"));
    assert_eq!(sent, ("image/png".to_owned(), data.to_owned()));
}

#[tokio::test]
async fn an_image_result_reaches_the_model_as_an_image_openai_chat() {
    let setup = start(Wire::OpenaiChat).await;
    an_image_result_reaches_the_model_as_an_image(&setup, Wire::OpenaiChat).await;
}

#[tokio::test]
async fn an_image_result_reaches_the_model_as_an_image_openai_responses() {
    let setup = start(Wire::OpenaiResponses).await;
    an_image_result_reaches_the_model_as_an_image(&setup, Wire::OpenaiResponses).await;
}

#[tokio::test]
async fn an_image_result_reaches_the_model_as_an_image_anthropic_messages() {
    let setup = start(Wire::AnthropicMessages).await;
    an_image_result_reaches_the_model_as_an_image(&setup, Wire::AnthropicMessages).await;
}

#[tokio::test]
async fn a_tool_error_is_a_failed_call_the_model_reads() {
    let wire = Wire::OpenaiChat;
    a_tool_error_is_a_failed_call(&start(wire).await, wire).await;
}

pub async fn a_tool_error_is_a_failed_call(setup: &Setup, wire: Wire) {
    setup.fake.push(Reply::tool_call(
        "mcp__everything__get-sum",
        json!({"a": "one", "b": 2}),
        1,
    ));
    setup.fake.push(Reply::text("It refused."));
    let turn = setup.turn("Add these").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let (call, result) = the_call(wire, &turn);
    assert_eq!(call["status"], "failed", "{call}");
    let output = call["output"].as_str().unwrap();
    assert!(
        output.to_lowercase().contains("expected number"),
        "{output}"
    );
    assert_eq!(result, output);
}

#[tokio::test]
async fn interrupting_a_long_call_ends_it_and_the_model_hears_of_it() {
    let wire = Wire::OpenaiChat;
    interrupting_a_long_call(&start(wire).await, wire).await;
}

/// The latest tool call among stored items.
pub fn last_call(items: &[Value]) -> &Value {
    items
        .iter()
        .rev()
        .find(|item| item["kind"] == "tool_call")
        .expect("a tool call")
}

/// Starts a turn whose call to server-everything's long operation runs for a minute, and
/// returns the conversation's events once the call has reported progress (it is running at
/// the server). The model's next answer is `then`.
pub async fn start_a_long_call(
    setup: &Setup,
    then: &str,
) -> impl futures::Stream<Item = (String, Value)> + Unpin + use<> {
    setup.fake.push(Reply::tool_call(
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 60, "steps": 600}),
        1,
    ));
    if !then.is_empty() {
        setup.fake.push(Reply::text(then));
    }
    let mut events = setup.server.events(&setup.id).await;
    let (status, _) = setup
        .server
        .post(
            &format!("/api/conversations/{}/messages", setup.id),
            json!({"text": "Start the long one"}),
        )
        .await;
    assert_eq!(status, 202);
    until(&mut events, |kind, data| {
        kind == "item.delta" && data["field"] == "output"
    })
    .await;
    events
}

pub async fn interrupting_a_long_call(setup: &Setup, wire: Wire) {
    let mut events = start_a_long_call(setup, "").await;
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/interrupt", setup.id),
            json!({}),
        )
        .await;
    assert!(status < 300, "{status} {body}");
    let seen = until(&mut events, |kind, _| kind == "turn.ended").await;
    assert_eq!(seen.last().unwrap().1["status"], "interrupted", "{seen:?}");
    let items = setup.items().await;
    let call = last_call(&items);
    assert_eq!(call["status"], "interrupted", "{call}");

    // The model's next request carries the interrupted call with what it said.
    setup.fake.push(Reply::text("Understood."));
    let turn = setup.turn("Never mind").await;
    let call_id = call["call_id"].as_str().unwrap();
    let result = wire
        .tool_result(&turn.requests[0].body, call_id)
        .unwrap_or_else(|| panic!("no result in {}", turn.requests[0].body));
    assert!(result.contains("interrupted"), "{result}");
}

/// The process group a running MCP server was recorded under (its leader's pid).
fn recorded_server(data_dir: &Path) -> Option<libc::pid_t> {
    std::fs::read_dir(data_dir.join("processes"))
        .ok()?
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
        .filter_map(|text| serde_json::from_str::<Value>(&text).ok())
        .find(|record| {
            record["command"]
                .as_str()
                .is_some_and(|command| command.starts_with("mcp server"))
        })
        .and_then(|record| record["pgid"].as_i64())
        .map(|pgid| pgid as libc::pid_t)
}

/// `GET /api/mcp` once its first server satisfies `done` (polled, bounded by [`TIMEOUT`]).
pub async fn wait_for_mcp(server: &Server, done: impl Fn(&Value) -> bool) -> Value {
    wait_for_listing(server, |listed| done(&listed["servers"][0])).await
}

/// Polls `GET /api/mcp` until `done` holds of the whole answer (or fails after the timeout).
pub async fn wait_for_listing(server: &Server, done: impl Fn(&Value) -> bool) -> Value {
    let mut listed = Value::Null;
    let found = tokio::time::timeout(TIMEOUT, async {
        loop {
            listed = server.get("/api/mcp").await.1;
            if done(&listed) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(found.is_ok(), "the MCP servers never got there: {listed}");
    listed
}

async fn wait_until_gone(pid: libc::pid_t) {
    let gone = tokio::time::timeout(TIMEOUT, async {
        while process_alive(pid) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "MCP server process {pid} is still alive");
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_and_is_started_again() {
    let wire = Wire::OpenaiChat;
    let setup = start(wire).await;
    let first = recorded_server(&setup.server.data_dir).expect("the server's record");
    let mut events = start_a_long_call(&setup, "It died.").await;
    // SAFETY: kill(2) on the recorded group of a server this test's service started.
    unsafe {
        libc::kill(-first, libc::SIGKILL);
    }
    let seen = until(&mut events, |kind, _| kind == "turn.ended").await;
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");
    let requests = setup.fake.requests();
    let items = setup.items().await;
    let call = last_call(&items);
    assert_eq!(call["status"], "failed", "{call}");
    let result = wire
        .tool_result(
            &requests.last().unwrap().body,
            call["call_id"].as_str().unwrap(),
        )
        .unwrap();
    assert!(
        result.contains("MCP server `everything` exited or closed its connection"),
        "{result}"
    );

    // It is started again by itself: no call has to find it gone.
    let listed = wait_for_mcp(&setup.server, |server| {
        server["state"] == "running" && server["restarts"] == 1
    })
    .await;
    let server = &listed["servers"][0];
    assert_eq!(server["name"], "everything", "{listed}");
    assert_eq!(server["transport"], "stdio");
    assert!(
        server["last_error"]
            .as_str()
            .is_some_and(|error| error.contains("exited") || error.contains("connection closed")),
        "{server}"
    );
    let tools = server["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("mcp__everything__echo")), "{server}");
    setup.fake.push(Reply::tool_call(
        "mcp__everything__echo",
        json!({"message": "back"}),
        1,
    ));
    setup.fake.push(Reply::text("It is back."));
    let turn = setup.turn("Echo again").await;
    let (call, result) = the_call(wire, &turn);
    assert_eq!(call["status"], "completed", "{call}");
    assert_eq!(result, "Echo: back");
    let second = recorded_server(&setup.server.data_dir).expect("the new server's record");
    assert_ne!(first, second);
    let (_, listed) = setup.server.get("/api/mcp").await;
    assert_eq!(listed["servers"][0]["restarts"], 1, "{listed}");
}

#[tokio::test]
async fn the_filesystem_server_reads_a_file_in_its_directory() {
    let wire = Wire::OpenaiResponses;
    let dir = tempfile::tempdir().unwrap();
    let notes: PathBuf = dir.path().canonicalize().unwrap();
    std::fs::write(notes.join("notes.txt"), "Remember the milk.\n").unwrap();
    let fake = FakeProvider::start(wire).await;
    let tables = format!(
        "[mcp.files]\ncommand = \"node\"\nargs = [\"{}\", \"{}\"]\n",
        fixture("server-filesystem"),
        notes.display()
    );
    let config = config(&fake, &["files"], ALLOW, &tables);
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.push(Reply::tool_call(
        "mcp__files__read_text_file",
        json!({"path": notes.join("notes.txt")}),
        2,
    ));
    setup.fake.push(Reply::text("The note says to buy milk."));
    let turn = setup.turn("What do my notes say?").await;
    assert!(offered(wire, &turn.requests[0].body, "mcp__files__list_directory").is_some());
    let (call, result) = the_call(wire, &turn);
    assert_eq!(call["status"], "completed", "{call}");
    assert_eq!(result, "Remember the milk.\n");
}

#[tokio::test]
async fn a_server_that_cannot_start_offers_nothing_and_holds_up_no_turn() {
    let wire = Wire::OpenaiChat;
    let fake = FakeProvider::start(wire).await;
    let tables = format!(
        "{}[mcp.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        everything()
    );
    let config = config(&fake, &["broken", "everything"], ALLOW, &tables);
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup
        .fake
        .push(Reply::tool_call("mcp__broken__anything", json!({}), 1));
    setup.fake.push(Reply::text("That server is down."));
    let turn = setup.turn("Use the broken one").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let first = &turn.requests[0].body;
    assert!(offered(wire, first, "mcp__everything__echo").is_some());
    assert!(
        !first["tools"].to_string().contains("mcp__broken"),
        "{first}"
    );
    let (call, result) = the_call(wire, &turn);
    assert_eq!(call["status"], "failed");
    assert!(result.contains("MCP server `broken`"), "{result}");

    let (_, listed) = setup.server.get("/api/mcp").await;
    let states: Vec<(&str, &str)> = listed["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|server| {
            (
                server["name"].as_str().unwrap(),
                server["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(states, [("broken", "failed"), ("everything", "running")]);
    let error = listed["servers"][0]["last_error"].as_str().unwrap();
    assert!(error.contains("/nonexistent/mcp-server"), "{error}");
    let (_, health) = setup.server.get("/api/health").await;
    assert_eq!(health["mcp_servers"], 2);
    assert_eq!(health["mcp_servers_failed"], 1);
}

#[tokio::test]
async fn mcp_calls_follow_the_agents_permissions() {
    let wire = Wire::OpenaiChat;
    let fake = FakeProvider::start(wire).await;
    let permissions =
        "[agents.default.permissions]\nmcp = \"allow\"\n\"mcp__everything__get-*\" = \"deny\"\n";
    let config = config(&fake, &["everything"], permissions, &everything());
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.push(Reply::tool_call(
        "mcp__everything__get-sum",
        json!({"a": 1, "b": 2}),
        1,
    ));
    setup.fake.push(Reply::text("Denied."));
    let turn = setup.turn("Add").await;
    let (call, result) = the_call(wire, &turn);
    assert_eq!(call["status"], "failed");
    assert_eq!(call["denied"], true, "{call}");
    assert_eq!(
        result,
        "Not run: the agent's permissions deny it: this agent may not use \
         `mcp__everything__get-sum` (agents.default.permissions.mcp__everything__get-*)."
    );
}

#[tokio::test]
async fn serve_stop_ends_the_servers_and_a_restart_after_a_crash_kills_the_orphans() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = config_for(&fake, &everything());
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    let pgid = recorded_server(&setup.server.data_dir).expect("the server's record");
    assert!(process_alive(pgid));
    let data_dir = setup.server.stop().await;
    wait_until_gone(pgid).await;
    assert_eq!(recorded_server(&data_dir), None, "the record is removed");

    // A crash leaves running a server that outlives its stdin (here its launcher stays);
    // the next start kills it.
    let lingering = format!(
        "[mcp.everything]\ncommand = \"sh\"\nargs = [\"-c\", \"node {} stdio; exec sleep 300\"]\n",
        fixture("server-everything")
    );
    let config = config_for(&setup.fake, &lingering);
    let server = Server::start_with(crate::harness::ServerOptions {
        data_dir: Some(data_dir.clone()),
        config: Some(config.clone()),
        ..Default::default()
    })
    .await;
    setup.fake.push(Reply::text("Started."));
    server.create_and_wait("Hello again").await;
    let pgid = recorded_server(&data_dir).expect("the new server's record");
    let data_dir = server.kill9().await;
    assert!(process_alive(pgid), "the crash alone stops nothing");
    let _server = Server::start_with(crate::harness::ServerOptions {
        data_dir: Some(data_dir.clone()),
        config: Some(config),
        ..Default::default()
    })
    .await;
    wait_until_gone(pgid).await;
    assert_eq!(recorded_server(&data_dir), None);
}

#[tokio::test]
async fn a_call_past_timeout_s_fails_clearly_and_the_turn_goes_on() {
    let wire = Wire::OpenaiChat;
    let fake = FakeProvider::start(wire).await;
    let tables = format!("{}timeout_s = 1\n", everything());
    let config = config_for(&fake, &tables);
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.push(Reply::tool_call(
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
        1,
    ));
    setup.fake.push(Reply::text("It took too long."));
    let turn = setup.turn("Start the long one").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let (call, result) = the_call(wire, &turn);
    assert_eq!(call["status"], "failed");
    assert_eq!(
        result,
        "`trigger-long-running-operation` of the MCP server `everything` did not answer within \
         1 s (its timeout_s), so it was cancelled"
    );
    // The server is still there for the next call.
    setup.fake.push(Reply::tool_call(
        "mcp__everything__echo",
        json!({"message": "still here"}),
        1,
    ));
    setup.fake.push(Reply::text("Fine."));
    let turn = setup.turn("Echo").await;
    assert_eq!(the_call(wire, &turn).1, "Echo: still here");
}

#[tokio::test]
async fn an_interrupt_ends_a_turn_waiting_for_a_server_to_start_which_ends_with_it() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    // It never answers the handshake.
    let tables = "[mcp.silent]\ncommand = \"sh\"\nargs = [\"-c\", \"exec sleep 300\"]\n";
    let config = config(&fake, &["silent"], ALLOW, tables);
    let server = Server::start_with(crate::harness::ServerOptions {
        config: Some(config),
        ..Default::default()
    })
    .await;
    let (status, created) = server
        .post("/api/conversations", json!({"text": "Hello"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    let mut events = server.events(id).await;
    let pgid = tokio::time::timeout(TIMEOUT, async {
        loop {
            if let Some(pgid) = recorded_server(&server.data_dir) {
                return pgid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the server was started");
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert!(status < 300, "{status} {body}");
    let seen = until(&mut events, |kind, _| kind == "turn.ended").await;
    assert_eq!(seen.last().unwrap().1["status"], "interrupted", "{seen:?}");
    // The model was never called. The server goes on starting for the conversation's later
    // turns, and ends with it.
    assert!(fake.requests().is_empty());
    let (_, listed) = server.get("/api/mcp").await;
    assert_eq!(listed["servers"][0]["state"], "starting", "{listed}");
    let (status, body) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 204, "{body}");
    wait_until_gone(pgid).await;
}
