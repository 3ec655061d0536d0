//! MCP servers a client names when it creates a conversation (what an editor does): their
//! tools reach the model, their credentials never come back, they are stored with the
//! conversation (a restart and a fork keep them), and bad ones are refused with nothing
//! stored. Also what the published servers cannot show: a tool list that changes while
//! connected, and a cancellation that reaches the server (a fixture built on the official SDK,
//! tests/mcp/changing-server.mjs).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT};
use crate::mcp::{CLIENT_ALLOW, config, fixture, last_call, offered, wait_for_listing};
use crate::support::{items, until, until_turn_end};

const SECRET: &str = "mine-token-6f1c2a9e44b7";

/// server-everything over stdio, as a create body names it, with a credential in its env.
fn everything_with_secret() -> Value {
    json!({"command": "node", "args": [fixture("server-everything"), "stdio"], "env": {"MINE_TOKEN": SECRET}})
}

fn changing_server(cancelled: &Path, timeout_s: Option<u64>) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/changing-server.mjs");
    let mut server = json!({
        "command": "node",
        "args": [script],
        "env": {"FIXTURE_CANCELLED": cancelled},
    });
    if let Some(timeout_s) = timeout_s {
        server["timeout_s"] = json!(timeout_s);
    }
    server
}

/// A service whose config names no MCP server (MCP calls allowed).
async fn start(wire: Wire) -> (FakeProvider, Server) {
    let fake = FakeProvider::start(wire).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake, &[], CLIENT_ALLOW, "")),
        ..ServerOptions::default()
    })
    .await;
    (fake, server)
}

/// Creates a conversation naming `mcp` and waits for its first turn to end.
async fn create(server: &Server, text: &str, mcp: Value) -> (String, Value) {
    let (status, created) = server
        .post("/api/conversations", json!({"text": text, "mcp": mcp}))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    (id, created)
}

/// Sends a message and follows its turn to the end.
async fn turn(server: &Server, id: &str, text: &str) -> Vec<(String, Value)> {
    let mut events = server.events(id).await;
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": text }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    until_turn_end(&mut events).await
}

/// A turn in which the model calls the `mine` server's `echo` with `message`, followed to its
/// end (it must complete); returns the stored call.
async fn echo(server: &Server, fake: &FakeProvider, id: &str, message: &str) -> Value {
    fake.push(Reply::tool_call(
        "mcp__mine__echo",
        json!({ "message": message }),
        1,
    ));
    fake.push(Reply::text("Echoed."));
    let events = turn(server, id, "Echo").await;
    assert_eq!(
        events.last().unwrap().1["status"],
        "completed",
        "{events:?}"
    );
    last_call(&items(server, id).await).clone()
}

#[tokio::test]
async fn servers_named_at_creation_offer_tools_and_never_show_their_secrets() {
    let wire = Wire::OpenaiChat;
    let (fake, server) = start(wire).await;
    fake.push(Reply::tool_call("mcp__mine__get-env", json!({}), 1));
    fake.push(Reply::text("I saw the environment."));
    let (id, created) = create(
        &server,
        "Show the environment",
        json!({"mine": everything_with_secret()}),
    )
    .await;
    assert!(!created.to_string().contains(SECRET), "{created}");
    let shown = &created["conversation"]["mcp"]["mine"];
    assert_eq!(shown["env"]["MINE_TOKEN"], "[hidden]", "{created}");
    assert_eq!(shown["command"], "node");

    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(offered(wire, &requests[0].body, "mcp__mine__echo").is_some());
    // The server got the credential (its environment lists the variable); what the model and
    // the clients see of it is redacted.
    let stored = items(&server, &id).await;
    let call = last_call(&stored);
    assert_eq!(call["status"], "completed", "{call}");
    let output = call["output"].as_str().unwrap();
    assert!(
        output.contains("\"MINE_TOKEN\": \"[redacted]\""),
        "{output}"
    );
    let sent = wire
        .tool_result(&requests[1].body, call["call_id"].as_str().unwrap())
        .unwrap();
    assert!(sent.contains("MINE_TOKEN"), "{sent}");
    for seen in [
        requests[1].body.to_string(),
        server
            .get(&format!("/api/conversations/{id}"))
            .await
            .1
            .to_string(),
        server.get("/api/conversations").await.1.to_string(),
        server.get("/api/mcp").await.1.to_string(),
        json!(stored).to_string(),
    ] {
        assert!(!seen.contains(SECRET), "the credential shows in {seen}");
    }
    let listed = server.get("/api/mcp").await.1;
    assert_eq!(listed["servers"][0]["name"], "mine", "{listed}");
    assert_eq!(listed["servers"][0]["source"], "conversation");
    assert_eq!(listed["servers"][0]["state"], "running");
}

#[tokio::test]
async fn a_conversations_servers_survive_a_restart_go_with_a_fork_and_are_shared() {
    let wire = Wire::AnthropicMessages;
    let (fake, server) = start(wire).await;
    fake.push(Reply::text("Ready."));
    let (id, _) = create(&server, "Hello", json!({"mine": everything_with_secret()})).await;
    let data_dir = server.stop().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        config: Some(config(&fake, &[], CLIENT_ALLOW, "")),
        ..ServerOptions::default()
    })
    .await;

    // After the restart, the stored servers are started again for the next turn.
    let call = echo(&server, &fake, &id, "after the restart").await;
    assert_eq!(call["output"], "Echo: after the restart");

    // A fork names the same servers; the running one is shared, not started twice.
    let (status, forked) = server
        .post(&format!("/api/conversations/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{forked}");
    let fork = forked["conversation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        forked["conversation"]["mcp"]["mine"]["env"]["MINE_TOKEN"],
        "[hidden]"
    );
    let call = echo(&server, &fake, &fork, "in the fork").await;
    assert_eq!(call["output"], "Echo: in the fork");
    let result = wire
        .tool_result(
            &fake.requests().last().unwrap().body,
            call["call_id"].as_str().unwrap(),
        )
        .unwrap();
    assert_eq!(result, "Echo: in the fork");
    let listed = server.get("/api/mcp").await.1;
    assert_eq!(listed["servers"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["servers"][0]["restarts"], 0, "{listed}");
}

#[tokio::test]
async fn bad_servers_in_a_create_body_are_refused_with_nothing_stored() {
    let (fake, server) = start(Wire::OpenaiChat).await;
    let many: serde_json::Map<String, Value> = (0..17)
        .map(|n| (format!("s{n}"), json!({"url": "http://127.0.0.1:9/mcp"})))
        .collect();
    let cases = [
        (json!({"mine": {}}), "mcp.mine: give `command`"),
        (json!({"a__b": {"command": "x"}}), "mcp.a__b: a server name"),
        (
            json!({"mine": {"url": "ftp://example"}}),
            "mcp.mine.url: must start with http://",
        ),
        (
            json!({"mine": {"command": "x", "cwd": "relative"}}),
            "mcp.mine.cwd: must be an absolute path",
        ),
        (
            json!({"mine": {"command": "x", "timeout_s": 0}}),
            "mcp.mine.timeout_s: must be at least 1",
        ),
        (json!({"mine": {"command": "x", "environ": {}}}), "environ"),
        (json!({"mine": {"command": 7}}), "invalid type"),
        // A header name or value that could add headers of its own, and a bad variable name.
        (
            json!({"mine": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-A\r\nX-Injected": "1"}}}),
            "mcp.mine.headers.X-A\\r\\nX-Injected: is not a valid HTTP header name",
        ),
        (
            json!({"mine": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-A": "1\r\nX-Injected: 2"}}}),
            "mcp.mine.headers.X-A: is not a valid HTTP header value",
        ),
        (
            json!({"mine": {"command": "x", "env": {"A=B": "1"}}}),
            "mcp.mine.env.A=B: is not a variable name",
        ),
        (Value::Object(many), "mcp: at most 16 servers, got 17"),
    ];
    for (mcp, message) in cases {
        let (status, body) = server
            .post("/api/conversations", json!({"text": "Hello", "mcp": mcp}))
            .await;
        assert_eq!(
            status,
            if message.starts_with("mcp") { 422 } else { 400 },
            "{mcp}: {body}"
        );
        let error = body["error"]["message"].as_str().unwrap_or_default();
        assert!(error.contains(message), "{mcp}: {body}");
    }
    let listed = server.get("/api/conversations").await.1;
    assert_eq!(listed["conversations"], json!([]), "{listed}");
    assert!(fake.requests().is_empty());

    // An agent that does not let clients start commands refuses a server that is one.
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake, &[], "", "")),
        ..ServerOptions::default()
    })
    .await;
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({"text": "Hello", "mcp": {"mine": everything_with_secret()}}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_mcp_server");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("client_mcp = true"),
        "{body}"
    );
    assert!(!body.to_string().contains(SECRET), "{body}");
}

#[tokio::test]
async fn a_tool_added_while_connected_is_offered_from_the_next_turn() {
    let wire = Wire::OpenaiResponses;
    let (fake, server) = start(wire).await;
    let dir = tempfile::tempdir().unwrap();
    fake.push(Reply::tool_call("mcp__changing__add-tool", json!({}), 1));
    fake.push(Reply::text("Added."));
    let (id, _) = create(
        &server,
        "Add a tool",
        json!({"changing": changing_server(&dir.path().join("cancelled"), None)}),
    )
    .await;
    let first = fake.requests();
    assert!(offered(wire, &first[0].body, "mcp__changing__add-tool").is_some());
    assert!(offered(wire, &first[0].body, "mcp__changing__added").is_none());

    fake.push(Reply::tool_call("mcp__changing__added", json!({}), 1));
    fake.push(Reply::text("It ran."));
    turn(&server, &id, "Use the new tool").await;
    let requests = fake.requests().split_off(first.len());
    let (description, _) = offered(wire, &requests[0].body, "mcp__changing__added")
        .unwrap_or_else(|| panic!("`added` not offered: {}", requests[0].body));
    assert_eq!(description, "A tool added while the client was connected");
    let call = last_call(&items(&server, &id).await).clone();
    assert_eq!(call["output"], "the added tool ran", "{call}");
    let listed = wait_for_listing(&server, |listed| {
        listed["servers"][0]["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|tool| tool == "mcp__changing__added"))
    })
    .await;
    assert_eq!(listed["servers"][0]["restarts"], 0, "{listed}");
}

/// Waits until the fixture wrote why its call was cancelled.
async fn cancellation_reason(file: &Path) -> String {
    let read = tokio::time::timeout(TIMEOUT, async {
        loop {
            if let Ok(reason) = std::fs::read_to_string(file) {
                return reason;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    read.unwrap_or_else(|_| panic!("the server never saw a cancellation ({})", file.display()))
}

#[tokio::test]
async fn an_interrupt_and_a_timeout_reach_the_server_as_cancellations() {
    let wire = Wire::OpenaiChat;
    let (fake, server) = start(wire).await;
    let dir = tempfile::tempdir().unwrap();
    let cancelled = dir.path().join("cancelled");
    fake.push(Reply::text("Ready."));
    let (id, _) = create(
        &server,
        "Hello",
        json!({"changing": changing_server(&cancelled, None)}),
    )
    .await;
    fake.push(Reply::tool_call("mcp__changing__wait", json!({}), 1));
    let mut events = server.events(&id).await;
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({"text": "Wait"}),
        )
        .await;
    assert_eq!(status, 202);
    // The server reported progress: it runs the call.
    until(&mut events, |kind, data| {
        kind == "item.delta" && data["field"] == "output"
    })
    .await;
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert!(status < 300, "{status} {body}");
    let seen = until_turn_end(&mut events).await;
    assert_eq!(seen.last().unwrap().1["status"], "interrupted", "{seen:?}");
    assert_eq!(
        cancellation_reason(&cancelled).await,
        "interrupted by the user"
    );

    // With `timeout_s`, the call is cancelled at the server, and the turn goes on.
    let cancelled = dir.path().join("timed-out");
    fake.push(Reply::tool_call("mcp__changing__wait", json!({}), 1));
    fake.push(Reply::text("It timed out."));
    let (id, _) = create(
        &server,
        "Wait briefly",
        json!({"changing": changing_server(&cancelled, Some(1))}),
    )
    .await;
    let call = last_call(&items(&server, &id).await).clone();
    assert_eq!(call["status"], "failed", "{call}");
    let (_, result) = the_call_result(wire, &fake, &call);
    assert!(result.contains("did not answer within 1 s"), "{result}");
    assert_eq!(cancellation_reason(&cancelled).await, "timed out after 1 s");
    let ended = server.get(&format!("/api/conversations/{id}")).await.1;
    assert_eq!(ended["last_turn"]["status"], "completed", "{ended}");
}

/// The result the model got for `call` in the latest request.
fn the_call_result(wire: Wire, fake: &FakeProvider, call: &Value) -> (Value, String) {
    let body = fake.requests().last().unwrap().body.clone();
    let result = wire
        .tool_result(&body, call["call_id"].as_str().unwrap())
        .unwrap_or_else(|| panic!("no result in {body}"));
    (body, result)
}

/// The pids of the live processes whose environment holds `marker` (a value only one
/// test's servers get).
fn processes_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if !crate::harness::process_alive(pid) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        // The server itself, not the sandbox's launcher and init before it, which carry the
        // same environment.
        let is_server = std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|cmdline| cmdline.starts_with(b"node\0"));
        if is_server
            && environ
                .split(|byte| *byte == 0)
                .any(|variable| variable == marker.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Polls `check` until it holds, at most `TIMEOUT`; `what` says what was awaited.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let done = tokio::time::timeout(TIMEOUT, async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(done.is_ok(), "timed out waiting until {what}");
}

async fn live_conversations(server: &Server) -> u64 {
    server.get("/api/health").await.1["live_conversations"]
        .as_u64()
        .unwrap()
}

/// A server conversations named runs while one of them is live: it outlives the first that
/// leaves memory while another still uses it, stops with the last, and starts again for the
/// next turn that needs it. Without this, every conversation naming a server of its own would
/// leave a child process behind for the service's whole life.
#[tokio::test]
async fn a_conversations_server_stops_when_no_live_conversation_uses_it() {
    let wire = Wire::OpenaiChat;
    let fake = FakeProvider::start(wire).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(
            &fake,
            &[],
            CLIENT_ALLOW,
            "[server]\nidle_unload_s = 1\n",
        )),
        ..ServerOptions::default()
    })
    .await;
    let marker = format!("MINE_MARKER={}", uuid::Uuid::now_v7());
    let (variable, value) = marker.split_once('=').unwrap();
    let mine = json!({
        "mine": {"command": "node", "args": [fixture("server-everything"), "stdio"], "env": {variable: value}}
    });
    // Each conversation is followed from its first turn on (a followed conversation stays
    // live), so it leaves memory exactly when the test stops following it.
    let create_followed = async |text: &str| {
        fake.push(Reply::text("Ready."));
        let (status, created) = server
            .post("/api/conversations", json!({"text": text, "mcp": mine}))
            .await;
        assert_eq!(status, 201, "{created}");
        let id = created["conversation"]["id"].as_str().unwrap().to_owned();
        let followed = server.events(&id).await;
        server.wait_idle(&id).await;
        (id, followed)
    };
    let (first, following_first) = create_followed("First").await;
    let running = processes_with(&marker);
    assert_eq!(running.len(), 1, "one server process: {running:?}");
    // The second conversation names the same server: it shares the running one.
    let (second, following_second) = create_followed("Second").await;
    assert_eq!(processes_with(&marker), running);

    drop(following_first);
    eventually("the first conversation left memory", async || {
        live_conversations(&server).await == 1
    })
    .await;
    // The first actor leaves the registry just before it lets go of its servers: a call of
    // the second conversation now finds the same process, never a new one.
    let call = echo(&server, &fake, &second, "still here").await;
    assert_eq!(call["output"], "Echo: still here");
    assert_eq!(
        processes_with(&marker),
        running,
        "the server stopped while a live conversation uses it"
    );
    let listed = server.get("/api/mcp").await.1;
    assert_eq!(listed["servers"][0]["state"], "running", "{listed}");
    assert_eq!(listed["servers"][0]["restarts"], 0, "{listed}");

    drop(following_second);
    eventually("the second conversation left memory", async || {
        live_conversations(&server).await == 0
    })
    .await;
    eventually("the server's process ended", async || {
        processes_with(&marker).is_empty()
    })
    .await;
    let listed = server.get("/api/mcp").await.1;
    assert_eq!(listed["servers"], json!([]), "{listed}");

    // The next turn that names it starts it again, and its tools work (followed until the end,
    // so that the conversation stays live while the test looks).
    let _following_first = server.events(&first).await;
    let call = echo(&server, &fake, &first, "back again").await;
    assert_eq!(call["output"], "Echo: back again");
    let restarted = processes_with(&marker);
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    assert_ne!(restarted, running);
}
