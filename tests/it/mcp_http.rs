//! MCP over streamable HTTP: server-everything in its `streamableHttp` mode on a loopback port,
//! reached by URL. The same calls as over stdio (echo, progress, an image, an error, an
//! interrupted long call), and a server that goes away mid-call and comes back.

use serde_json::json;

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};
use crate::harness::TIMEOUT;
use crate::mcp::{
    a_tool_error_is_a_failed_call, an_image_result_reaches_the_model_as_an_image, config_for,
    fixture, interrupting_a_long_call, last_call, offered, start_a_long_call, the_call,
    wait_for_mcp,
};
use crate::support::until;

/// server-everything over streamable HTTP on a free loopback port; killed when dropped.
struct HttpEverything {
    url: String,
    port: u16,
    child: tokio::process::Child,
}

impl HttpEverything {
    async fn start() -> HttpEverything {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        HttpEverything::start_on(port).await
    }

    async fn start_on(port: u16) -> HttpEverything {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let mut child = tokio::process::Command::new("node")
            .arg(fixture("server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start node");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::time::timeout(TIMEOUT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("listening on port") {
                    return;
                }
            }
            panic!("server-everything exited before listening");
        })
        .await
        .expect("server-everything listens in time");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        HttpEverything {
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
            child,
        }
    }
}

#[tokio::test]
async fn echo_and_progress_over_streamable_http() {
    let wire = Wire::AnthropicMessages;
    let http = HttpEverything::start().await;
    let fake = FakeProvider::start(wire).await;
    let tables = format!(
        "[mcp.everything]\nurl = \"{}\"\nheaders = {{ X-Test = \"${{MCP_TEST_HEADER}}\" }}\n",
        http.url
    );
    let config = config_for(&fake, &tables);
    let env = vec![("MCP_TEST_HEADER".to_owned(), "present".to_owned())];
    let setup = Setup::start_with(fake, config, env).await;
    setup.fake.push(Reply::tool_call(
        "mcp__everything__echo",
        json!({"message": "over HTTP"}),
        1,
    ));
    setup.fake.push(Reply::tool_call(
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 0.2, "steps": 2}),
        1,
    ));
    setup.fake.push(Reply::text("Both worked."));
    let turn = setup.turn("Echo, then run the long one").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    assert!(offered(wire, &turn.requests[0].body, "mcp__everything__echo").is_some());
    let (_, listed) = setup.server.get("/api/mcp").await;
    assert_eq!(listed["servers"][0]["transport"], "http", "{listed}");
    assert_eq!(listed["servers"][0]["state"], "running", "{listed}");
    let calls = turn.completed("tool_call");
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["output"], "Echo: over HTTP");
    let second = calls[1];
    assert_eq!(second["status"], "completed", "{second}");
    let live: String = turn
        .all("item.delta")
        .into_iter()
        .filter(|delta| delta["item_id"] == second["id"])
        .map(|delta| delta["delta"].as_str().unwrap())
        .collect();
    // The last progress line may come after the result (see the stdio test above).
    assert!(
        ["[progress 1/2]\n", "[progress 1/2]\n[progress 2/2]\n"].contains(&live.as_str()),
        "{live:?}"
    );
    let last = &turn.requests.last().unwrap().body;
    for call in calls {
        let result = wire
            .tool_result(last, call["call_id"].as_str().unwrap())
            .unwrap();
        assert_eq!(result, call["output"].as_str().unwrap());
    }
}

#[tokio::test]
async fn an_http_server_gone_mid_call_fails_the_call_and_is_reached_again_once_back() {
    let wire = Wire::OpenaiResponses;
    let mut http = HttpEverything::start().await;
    let fake = FakeProvider::start(wire).await;
    let tables = format!("[mcp.everything]\nurl = \"{}\"\n", http.url);
    let config = config_for(&fake, &tables);
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    let mut events = start_a_long_call(&setup, "It went away.").await;
    // The server goes away mid-call: the call fails, and the turn goes on.
    http.child.kill().await.unwrap();
    let seen = until(&mut events, |kind, _| kind == "turn.ended").await;
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");
    let items = setup.items().await;
    let call = last_call(&items);
    assert_eq!(call["status"], "failed", "{call}");
    let output = call["output"].as_str().unwrap();
    assert!(output.contains("the MCP server `everything`"), "{output}");

    // Back on the same address, it is reached again at the next use (a new session).
    let port = http.port;
    drop(http);
    let _http = HttpEverything::start_on(port).await;
    setup.fake.push(Reply::tool_call(
        "mcp__everything__echo",
        json!({"message": "back again"}),
        1,
    ));
    setup.fake.push(Reply::text("Echoed."));
    let turn = setup.turn("Echo").await;
    assert_eq!(the_call(wire, &turn).1, "Echo: back again");
    let listed = wait_for_mcp(&setup.server, |server| server["state"] == "running").await;
    assert!(
        listed["servers"][0]["restarts"].as_u64().unwrap() >= 1,
        "{listed}"
    );
}

/// A conversation whose agent uses server-everything over HTTP (kept running while it lives).
async fn start(wire: Wire) -> (Setup, HttpEverything) {
    let http = HttpEverything::start().await;
    let fake = FakeProvider::start(wire).await;
    let tables = format!("[mcp.everything]\nurl = \"{}\"\n", http.url);
    let config = config_for(&fake, &tables);
    (Setup::start_with(fake, config, Vec::new()).await, http)
}

#[tokio::test]
async fn an_image_result_over_streamable_http() {
    let wire = Wire::AnthropicMessages;
    let (setup, _http) = start(wire).await;
    an_image_result_reaches_the_model_as_an_image(&setup, wire).await;
}

#[tokio::test]
async fn a_tool_error_over_streamable_http() {
    let wire = Wire::OpenaiResponses;
    let (setup, _http) = start(wire).await;
    a_tool_error_is_a_failed_call(&setup, wire).await;
}

#[tokio::test]
async fn interrupting_a_long_call_over_streamable_http() {
    let wire = Wire::OpenaiChat;
    let (setup, _http) = start(wire).await;
    interrupting_a_long_call(&setup, wire).await;
}
