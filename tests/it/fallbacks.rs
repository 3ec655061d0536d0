//! Fallback models, driven like a client against two fake providers: once a model's retries are
//! used up on an overload or a server error, the call goes to the next model of its `fallback`
//! list for the rest of the turn, `model.fallback` says so, and the turn's usage says which
//! model answered each call; a refused request never falls back, and reasoning state one
//! provider signed never reaches the other.

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, MODEL_NAME, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::until;

/// A server whose default agent's model `m` (on `primary`) falls back to `b` (on `backup`),
/// each tried twice.
async fn start(primary: &FakeProvider, backup: &FakeProvider) -> Server {
    let config = format!(
        r#"
[retry]
max_attempts = 2
initial_delay_ms = 10
max_delay_ms = 20

[providers.main]
protocol = "{main_protocol}"
base_url = "{main_url}"

[providers.backup]
protocol = "{backup_protocol}"
base_url = "{backup_url}"

[models.m]
provider = "main"
name = "{MODEL_NAME}"
context_window = 100000
max_output_tokens = 1000
fallback = ["b"]
price = {{ input = 3.0, output = 15.0 }}

[models.b]
provider = "backup"
name = "backup-model"
context_window = 100000
max_output_tokens = 1000

[agents.default]
description = "test agent"
model = "m"
tools = ["shell"]
"#,
        main_protocol = primary.wire.protocol(),
        main_url = primary.base_url,
        backup_protocol = backup.wire.protocol(),
        backup_url = backup.base_url,
    );
    Server::start_with(ServerOptions {
        config: Some(config),
        ..ServerOptions::default()
    })
    .await
}

/// Creates a conversation and follows it to the end of its first turn: every event seen.
async fn converse(server: &Server, text: &str) -> (String, Vec<(String, Value)>) {
    let (status, created) = server
        .post("/api/conversations", json!({ "text": text }))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server.events(&id).await;
    let seen = until(&mut events, |kind, _| kind == "turn.ended").await;
    (id, seen)
}

fn instructions_of(body: &Value) -> String {
    match &body["system"] {
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect(),
        Value::String(text) => text.clone(),
        _ => body["instructions"].as_str().unwrap_or_default().to_owned(),
    }
}

#[tokio::test]
async fn an_overloaded_model_hands_the_rest_of_the_turn_to_its_fallback() {
    let primary = FakeProvider::start(Wire::OpenaiChat).await;
    let backup = FakeProvider::start(Wire::AnthropicMessages).await;
    let server = start(&primary, &backup).await;
    primary.push(Reply::tool_call("shell", json!({"command": "echo hi"}), 1));
    primary.push(Reply::status(529));
    primary.push(Reply::status(503));
    backup.push(Reply::tool_call(
        "shell",
        json!({"command": "echo again"}),
        1,
    ));
    backup.push(Reply::text("Done on the backup."));
    let (id, seen) = converse(&server, "Echo twice").await;

    let ended = &seen.last().unwrap().1;
    assert_eq!(ended["status"], "completed", "{ended}");
    let fallbacks: Vec<&Value> = seen
        .iter()
        .filter(|(kind, _)| kind == "model.fallback")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(fallbacks.len(), 1, "{seen:?}");
    assert_eq!(fallbacks[0]["from"], "m");
    assert_eq!(fallbacks[0]["to"], "b");
    assert_eq!(fallbacks[0]["turn_id"], ended["turn_id"]);
    let reason = fallbacks[0]["reason"].as_str().unwrap();
    assert!(reason.contains("503"), "{reason}");

    // The rest of the turn stayed on the backup: it answered the last two calls.
    assert_eq!(primary.requests().len(), 3);
    assert_eq!(backup.requests().len(), 2);
    let usage = &ended["usage"];
    assert_eq!(usage["model_calls"], 3, "{usage}");
    let models = usage["models"].as_array().unwrap();
    assert_eq!(models.len(), 2, "{usage}");
    assert_eq!(
        (&models[0]["model"], &models[0]["model_calls"]),
        (&json!("m"), &json!(1))
    );
    assert_eq!(
        (&models[1]["model"], &models[1]["model_calls"]),
        (&json!("b"), &json!(2))
    );
    // Only the priced model has a cost, and the turn's is its alone.
    assert!(models[1].get("cost").is_none(), "{usage}");
    assert_eq!(usage["cost"], models[0]["cost"], "{usage}");

    // The backup got the whole turn so far in its own protocol, and instructions naming it.
    let first = &backup.requests()[0].body;
    assert_eq!(first["model"], "backup-model");
    let tool_use = first["messages"][1]["content"][0].clone();
    assert_eq!(tool_use["type"], "tool_use", "{first}");
    assert_eq!(tool_use["input"], json!({"command": "echo hi"}));
    let result = Wire::AnthropicMessages.tool_result(first, tool_use["id"].as_str().unwrap());
    assert!(result.is_some_and(|text| text.contains("hi")), "{first}");
    let instructions = instructions_of(first);
    assert!(
        instructions.contains("- Model: backup-model"),
        "{instructions}"
    );
    assert!(!instructions.contains(MODEL_NAME), "{instructions}");

    // The next turn starts on the session's own model again.
    primary.push(Reply::text("Back on the main model."));
    server.send_and_wait(&id, "Hello again").await;
    assert_eq!(primary.requests().len(), 4);
    assert_eq!(backup.requests().len(), 2);
}

#[tokio::test]
async fn a_refused_request_never_falls_back() {
    let primary = FakeProvider::start(Wire::OpenaiChat).await;
    let backup = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&primary, &backup).await;
    primary.push(Reply::rejected(400, "the request is malformed"));
    let (_, seen) = converse(&server, "Hi").await;
    let ended = &seen.last().unwrap().1;
    assert_eq!(ended["status"], "failed", "{ended}");
    assert!(
        ended["error"]
            .as_str()
            .unwrap()
            .contains("the request is malformed"),
        "{ended}"
    );
    assert!(!seen.iter().any(|(kind, _)| kind == "model.fallback"));
    assert!(backup.requests().is_empty());
}

#[tokio::test]
async fn reasoning_one_provider_signed_never_reaches_the_fallback() {
    let primary = FakeProvider::start(Wire::OpenaiResponses).await;
    let backup = FakeProvider::start(Wire::OpenaiResponses).await;
    let server = start(&primary, &backup).await;
    primary.push(Reply::ReasonedCall {
        encrypted: "main-provider-signed".to_owned(),
        name: "shell".to_owned(),
        arguments: json!({"command": "echo hi"}),
    });
    primary.push(Reply::status(500));
    primary.push(Reply::status(500));
    backup.push(Reply::ReasonedCall {
        encrypted: "backup-signed".to_owned(),
        name: "shell".to_owned(),
        arguments: json!({"command": "echo again"}),
    });
    backup.push(Reply::text("Done."));
    let (_, seen) = converse(&server, "Think and echo").await;
    assert_eq!(seen.last().unwrap().1["status"], "completed");

    // The main provider got its own state back while it answered.
    let retried = primary.requests()[1].body.to_string();
    assert!(retried.contains("main-provider-signed"), "{retried}");
    // The backup never got it, but gets back what it signed itself.
    let requests = backup.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let body = request.body.to_string();
        assert!(!body.contains("main-provider-signed"), "{body}");
    }
    assert!(requests[1].body.to_string().contains("backup-signed"));
}

#[tokio::test]
async fn a_fallback_that_is_not_configured_is_refused_naming_its_key() {
    for (fallback, says) in [
        ("[\"nope\"]", "unknown model `nope`"),
        ("[\"m\"]", "names `m` twice"),
    ] {
        let stderr = crate::harness::serve_refuses(&format!(
            "[providers.p]\nprotocol = \"openai_chat\"\nbase_url = \"http://127.0.0.1:9\"\n\
             [models.m]\nprovider = \"p\"\nname = \"x\"\ncontext_window = 1000\n\
             max_output_tokens = 100\nfallback = {fallback}\n"
        ))
        .await;
        assert!(stderr.contains("models.m.fallback"), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}
