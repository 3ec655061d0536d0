//! The service-wide limit on running sub-agents (`[subagents] max_running_total`): past it,
//! `spawn_agent` in any conversation is a tool error the model reads (nothing crashes), and
//! `/api/health` shows the running count and the limit; the places come back as sub-agents end.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT};
use crate::support::{session_items, until};

fn config(fake: &FakeProvider) -> String {
    format!(
        r#"
[subagents]
max_live = 8
max_running_total = 2

[providers.fake]
protocol = "openai_chat"
base_url = "{base_url}"

[models.m]
provider = "fake"
name = "fake-model"
context_window = 100000
max_output_tokens = 1000

[agents.default]
description = "General agent"
model = "m"
tools = ["spawn_agent", "wait_agents"]
"#,
        base_url = fake.base_url
    )
}

/// The text of the first user message of a request: a session's task, or the message that
/// started the conversation.
fn first_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|message| message["role"] == "user")
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn answered_tools(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|message| message["role"] == "tool")
}

fn spawn(task: &str) -> (String, Value) {
    (
        "spawn_agent".to_owned(),
        json!({ "agent": "default", "task": task }),
    )
}

async fn health(server: &Server) -> (u64, u64) {
    let (status, health) = server.get("/api/health").await;
    assert_eq!(status, 200, "{health}");
    (
        health["running_subagents"].as_u64().unwrap(),
        health["max_running_subagents"].as_u64().unwrap(),
    )
}

/// Creates a conversation and waits for its root turn to end; its id and root session.
async fn create_and_wait_root(server: &Server, text: &str) -> (String, String) {
    let (status, body) = server
        .post("/api/conversations", json!({ "text": text }))
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["conversation"]["id"].as_str().unwrap().to_owned();
    let root = body["conversation"]["root_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut events = server.events(&id).await;
    until(&mut events, |kind, data| {
        kind == "turn.ended" && data["session_id"] == root.as_str()
    })
    .await;
    (id, root)
}

#[tokio::test]
async fn spawns_past_the_service_wide_limit_are_tool_errors_and_health_shows_the_count() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake)),
        ..ServerOptions::default()
    })
    .await;
    let gates = [Arc::new(Notify::new()), Arc::new(Notify::new())];
    let held = gates.clone();
    fake.script(move |body| {
        let first = first_user(body);
        Some(match (first.as_str(), answered_tools(body)) {
            ("hold two", false) => Reply::ToolCalls(vec![spawn("slow 0"), spawn("slow 1")]),
            ("one more", false) => Reply::ToolCalls(vec![spawn("refused")]),
            ("slow 0", _) => Reply::After(held[0].clone(), Box::new(Reply::text("done 0"))),
            ("slow 1", _) => Reply::After(held[1].clone(), Box::new(Reply::text("done 1"))),
            _ => Reply::text("ok"),
        })
    });
    assert_eq!(health(&server).await, (0, 2));

    // One conversation takes both places (its own limit, 8, is far off).
    let (holder, _) = create_and_wait_root(&server, "hold two").await;
    assert_eq!(health(&server).await, (2, 2));

    // Another conversation's spawn is refused with a tool error the model reads.
    let (other, root) = create_and_wait_root(&server, "one more").await;
    let history = session_items(&server, &other, &root).await;
    let call = history
        .iter()
        .find(|item| item["name"] == "spawn_agent")
        .expect("the spawn_agent call");
    assert_eq!(call["status"], "failed", "{call}");
    let output = call["output"].as_str().unwrap();
    assert!(output.contains("subagents.max_running_total"), "{output}");
    let (status, sessions) = server
        .get(&format!("/api/conversations/{other}/sessions"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        1,
        "{sessions}"
    );
    assert_eq!(health(&server).await, (2, 2));

    // The places come back as the sub-agents end.
    for gate in &gates {
        gate.notify_one();
    }
    server.wait_idle(&holder).await;
    tokio::time::timeout(TIMEOUT, async {
        while health(&server).await.0 != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the running count did not come back to 0");
}
