//! The three provider protocols end to end: the real server streams from the fake provider
//! (which speaks each protocol's real SSE format), runs the tools the model asks for, hands the
//! results back, reports usage and retries a malformed chunk. Every scenario runs per protocol.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_provider::{
    FakeProvider, INPUT_TOKENS, MODEL_NAME, OUTPUT_TOKENS, REASONING_TOKENS, Recorded, Reply,
    Setup, Wire,
};
use crate::harness::{Server, ServerOptions};
use crate::support::events_until;

/// Runs each scenario once per protocol, as `<scenario>::<protocol>`.
macro_rules! per_protocol {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use crate::fake_provider::Wire;

            #[tokio::test]
            async fn openai_chat() {
                super::$scenario(Wire::OpenaiChat).await
            }

            #[tokio::test]
            async fn openai_responses() {
                super::$scenario(Wire::OpenaiResponses).await
            }

            #[tokio::test]
            async fn anthropic_messages() {
                super::$scenario(Wire::AnthropicMessages).await
            }
        }
    )*};
}

per_protocol!(
    text_streams_and_is_stored,
    a_tool_call_runs_and_its_result_goes_back,
    usage_is_reported,
    a_report_of_zero_tokens_leaves_the_meter_estimated,
    a_malformed_chunk_is_retried,
    the_api_key_comes_from_the_environment,
    base_urls_with_or_without_the_version_reach_the_api,
    a_wrong_base_url_fails_naming_the_url_and_the_status,
);

async fn text_streams_and_is_stored(wire: Wire) {
    let setup = Setup::start(wire).await;
    let text = "Streaming works: this answer arrives in many small pieces.";
    // Slow enough that the pieces cannot arrive as one read.
    setup.fake.set_pace(Duration::from_millis(15));
    setup.fake.push(Reply::text(text));
    let turn = setup.turn("Tell me something").await;

    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let answers = turn.completed("agent_message");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["text"], text);
    assert_eq!(answers[0]["status"], "completed");
    let item_id = answers[0]["id"].as_str().unwrap();
    assert_eq!(turn.streamed_text(item_id), text);
    assert!(
        turn.all("item.delta").len() > 1,
        "the text streamed in pieces"
    );

    let request = &turn.requests[0];
    assert_eq!(turn.requests.len(), 1);
    assert_eq!(request.path, wire.path());
    assert_eq!(request.body["model"], MODEL_NAME);
    assert_eq!(request.body["stream"], true);
    let sent = request.body.to_string();
    assert!(sent.contains("Tell me something"), "{sent}");
    // The first turn's answer is part of the history now.
    assert!(sent.contains("Ready."), "{sent}");

    let items = setup.items().await;
    let stored = items.last().unwrap();
    assert_eq!(stored["kind"], "agent_message");
    assert_eq!(stored["text"], text);
    assert_eq!(stored["status"], "completed");
}

async fn a_tool_call_runs_and_its_result_goes_back(wire: Wire) {
    let setup = Setup::start(wire).await;
    setup.fake.push(Reply::tool_call(
        "shell",
        json!({ "command": "echo hello" }),
        4,
    ));
    setup.fake.push(Reply::text("The command printed hello."));
    let turn = setup.turn("Run echo hello").await;

    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let calls = turn.completed("tool_call");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let call = calls[0];
    assert_eq!(call["name"], "shell");
    assert_eq!(call["arguments"], json!({ "command": "echo hello" }));
    assert_eq!(call["status"], "completed");
    assert_eq!(call["exit_code"], 0);
    assert_eq!(call["output"].as_str().unwrap().trim(), "hello");

    assert_eq!(turn.requests.len(), 2);
    let call_id = call["call_id"].as_str().unwrap();
    let second = &turn.requests[1].body;
    assert!(wire.has_tool_call(second, call_id), "{second}");
    let result = wire
        .tool_result(second, call_id)
        .unwrap_or_else(|| panic!("no result for {call_id} in {second}"));
    assert_eq!(result.trim(), "hello");
    let answers = turn.completed("agent_message");
    assert_eq!(
        answers.last().unwrap()["text"],
        "The command printed hello."
    );
}

async fn usage_is_reported(wire: Wire) {
    let setup = Setup::start(wire).await;
    setup.fake.push(Reply::text("Counting tokens."));
    let turn = setup.turn("How many tokens?").await;

    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let reported: Vec<_> = turn
        .all("usage.updated")
        .into_iter()
        .filter(|data| data["usage"]["source"] == "reported")
        .collect();
    assert!(!reported.is_empty(), "{:?}", turn.events);
    // Reasoning the model will not get back takes no room in the next request: Chat
    // Completions cannot take it back; the Responses API takes the running turn's back by
    // default; Anthropic does not report it apart.
    let reasoning = match wire {
        Wire::AnthropicMessages | Wire::OpenaiResponses => 0,
        Wire::OpenaiChat => REASONING_TOKENS,
    };
    assert_eq!(
        reported[0]["usage"]["reported_tokens"],
        INPUT_TOKENS + OUTPUT_TOKENS - reasoning
    );
}

/// A provider that reports 0 tokens for a non-empty request does not count: the meter keeps
/// its estimate of the whole request (the instructions and tool schemas included) and says so,
/// until an answer reports real counts.
async fn a_report_of_zero_tokens_leaves_the_meter_estimated(wire: Wire) {
    let fake = FakeProvider::start(wire).await;
    let server = Server::start_with(ServerOptions {
        config: Some(fake.config()),
        ..ServerOptions::default()
    })
    .await;
    fake.push(Reply::Unmetered("Nothing counted.".into()));
    let created = server.create_and_wait("How many tokens?").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let path = format!("/api/conversations/{id}/usage");
    let (_, estimated) = server.get(&path).await;
    assert_eq!(estimated["source"], "estimated", "{estimated}");
    assert_eq!(estimated["reported_tokens"], Value::Null, "{estimated}");
    // The base prompt and the environment block are several hundred tokens, the shell tool's
    // schema about a hundred, the two messages a few each.
    let used = estimated["used_tokens"].as_u64().unwrap();
    assert!((500..3_000).contains(&used), "{estimated}");
    assert_eq!(estimated["estimated_since_report"], used, "{estimated}");

    fake.push(Reply::text("Counted."));
    let (status, sent) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "And now?" }),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    server.wait_idle(id).await;
    let (_, reported) = server.get(&path).await;
    assert_eq!(reported["source"], "reported", "{reported}");
}

async fn a_malformed_chunk_is_retried(wire: Wire) {
    let setup = Setup::start(wire).await;
    setup.fake.push(Reply::MalformedChunk);
    setup.fake.push(Reply::text("Recovered after a bad chunk."));
    let turn = setup.turn("Try again").await;

    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let retries = turn.all("model.retry");
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0]["attempt"], 1);
    assert_eq!(retries[0]["max_attempts"], 10);
    let error = retries[0]["error"].as_str().unwrap();
    assert!(error.contains("malformed chunk from provider"), "{error}");
    assert_eq!(turn.requests.len(), 2);
    let answers = turn.completed("agent_message");
    assert_eq!(
        answers.last().unwrap()["text"],
        "Recovered after a bad chunk."
    );
}

async fn the_api_key_comes_from_the_environment(wire: Wire) {
    let fake = FakeProvider::start(wire).await;
    let config = fake.config_with(r#"api_key_env = "FAKE_PROVIDER_KEY""#);
    let env = vec![("FAKE_PROVIDER_KEY".to_owned(), "sk-fake-123".to_owned())];
    let setup = Setup::start_with(fake, config, env).await;

    let request = &setup.fake.requests()[0];
    let header = |name: &str| {
        request
            .headers
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    match wire {
        Wire::OpenaiChat | Wire::OpenaiResponses => {
            assert_eq!(
                header("authorization").as_deref(),
                Some("Bearer sk-fake-123")
            );
        }
        Wire::AnthropicMessages => {
            assert_eq!(header("x-api-key").as_deref(), Some("sk-fake-123"));
            assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
            assert_eq!(header("authorization"), None);
        }
    }
}

/// The fake's config with `base_url` set to `base_url`.
fn config_with_base_url(fake: &FakeProvider, base_url: &str) -> String {
    fake.config().replace(
        &format!("base_url = \"{}\"", fake.base_url),
        &format!("base_url = \"{base_url}\""),
    )
}

/// Base URLs as each SDK writes them (Anthropic's without `/v1`, OpenAI's with it), and the
/// other way round, with or without a trailing slash: every form reaches the API's endpoint.
async fn base_urls_with_or_without_the_version_reach_the_api(wire: Wire) {
    for form in ["", "/", "/v1", "/v1/"] {
        let fake = FakeProvider::start(wire).await;
        let base_url = format!("{}{form}", fake.base_url.trim_end_matches("/v1"));
        let config = config_with_base_url(&fake, &base_url);
        let setup = Setup::start_with(fake, config, Vec::new()).await;
        let requests = setup.fake.requests();
        assert_eq!(requests.len(), 1, "{base_url}");
        assert_eq!(requests[0].path, wire.path(), "{base_url}");
        let items = setup.items().await;
        let answer = items.last().unwrap();
        assert_eq!(
            (answer["kind"].as_str(), answer["text"].as_str()),
            (Some("agent_message"), Some("Ready.")),
            "{base_url}: {items:?}"
        );
    }
}

/// A base URL under the wrong path gets a 404: the turn fails at once, and its error names
/// the URL that was called and the status, so the mistake is plain.
async fn a_wrong_base_url_fails_naming_the_url_and_the_status(wire: Wire) {
    let fake = FakeProvider::start(wire).await;
    let host = fake.base_url.trim_end_matches("/v1").to_owned();
    let base_url = format!("{host}/api/v2");
    let path = match wire {
        Wire::AnthropicMessages => "/api/v2/v1/messages",
        Wire::OpenaiChat => "/api/v2/chat/completions",
        Wire::OpenaiResponses => "/api/v2/responses",
    };
    let config = config_with_base_url(&fake, &base_url);
    let server = Server::start_with(ServerOptions {
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    let (status, created) = server
        .post("/api/conversations", json!({ "text": "Hello" }))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    server.wait_idle(id).await;
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let notice = items["items"].as_array().unwrap().last().unwrap().clone();
    let error = notice["text"].as_str().unwrap();
    assert!(error.contains(&format!("POST {host}{path}")), "{error}");
    assert!(error.contains("404 Not Found"), "{error}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "a 404 is not retried");
    assert_eq!(requests[0].path, path);
}

/// A provider whose key variable is not set fails the turn at once, naming the variable, and
/// never calls the provider.
#[tokio::test]
async fn a_missing_api_key_fails_the_turn_without_a_request() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config_with(r#"api_key_env = "FAKE_PROVIDER_KEY_NOT_SET""#);
    let server = Server::start_with(ServerOptions {
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    // The first turn runs on the built-in model, so the next one can be followed from its start.
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "Hello", "model": "demo" }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    server.wait_idle(id).await;
    let (status, patched) = server
        .patch(&format!("/api/conversations/{id}"), json!({ "model": "m" }))
        .await;
    assert_eq!(status, 200, "{patched}");

    let mut events = server.events(id).await;
    let (status, sent) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "Hi" }),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    let events = events_until(&mut events, "turn.ended").await;
    let ended = &events.last().unwrap().1;
    assert_eq!(ended["status"], "failed", "{events:?}");
    let error = ended["error"].as_str().unwrap();
    assert!(
        error.contains("environment variable FAKE_PROVIDER_KEY_NOT_SET is not set"),
        "{error}"
    );
    assert!(events.iter().all(|(kind, _)| kind != "model.retry"));
    assert!(fake.requests().is_empty());
}

/// The reasoning items a Responses request takes back, by their encrypted content.
fn reasoning_taken_back(request: &Recorded) -> Vec<String> {
    request.body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "reasoning")
        .map(|item| {
            item["encrypted_content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn reasoning_goes_back_to_the_model_as_its_reasoning_context_says() {
    for (context, expected) in [("all_turns", vec!["ENC-A"]), ("current_turn", vec![])] {
        // What the next request will hold: this turn's reasoning stays only with all_turns.
        let kept_reasoning = if context == "all_turns" {
            REASONING_TOKENS
        } else {
            0
        };
        let fake = FakeProvider::start(Wire::OpenaiResponses).await;
        let config = fake.config().replace(
            "max_output_tokens = 1000",
            &format!("max_output_tokens = 1000\nreasoning_context = \"{context}\""),
        );
        let setup = Setup::start_with(fake, config, Vec::new()).await;
        setup.fake.push(Reply::Reasoned {
            encrypted: "ENC-A".into(),
            text: "First answer.".into(),
        });
        let first = setup.turn("think about it").await;
        assert_eq!(first.ended()["status"], "completed", "{:?}", first.events);
        assert_eq!(
            first.requests[0].body["include"],
            json!(["reasoning.encrypted_content"])
        );
        // The reasoning is stored with what the provider needs to take it back.
        let stored = setup.items().await;
        let reasoning = stored
            .iter()
            .find(|item| item["kind"] == "reasoning")
            .expect("a reasoning item");
        assert_eq!(reasoning["text"], "Thinking.");
        assert_eq!(reasoning["state"]["encrypted_content"], "ENC-A");
        let (_, usage) = setup
            .server
            .get(&format!("/api/conversations/{}/usage", setup.id))
            .await;
        assert_eq!(
            usage["reported_tokens"],
            INPUT_TOKENS + OUTPUT_TOKENS - REASONING_TOKENS + kept_reasoning,
            "{context}: {usage}"
        );

        setup.fake.push(Reply::text("Second answer."));
        let second = setup.turn("and then?").await;
        assert_eq!(
            reasoning_taken_back(&second.requests[0]),
            expected,
            "{context}"
        );
    }
}

/// The meter estimates the whole request even before a session's first turn in this run: a
/// conversation loaded after a restart counts its agent's instructions and tool schemas.
#[tokio::test]
async fn after_a_restart_the_estimate_still_counts_the_instructions_and_tools() {
    let instructions = "Check every claim twice before you answer. ".repeat(200);
    let config = format!(
        "[agents.default]\ndescription = \"careful\"\nmodel = \"demo\"\ninstructions = \"{instructions}\"\n"
    );
    let server = Server::start_with(ServerOptions {
        config: Some(config.clone()),
        ..ServerOptions::default()
    })
    .await;
    let created = server.create_and_wait("Hello").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}/usage");
    let (_, before) = server.get(&path).await;
    let data_dir = server.stop().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    let (_, after) = server.get(&path).await;
    assert_eq!(after["source"], "estimated", "{after}");
    // 200 sentences of 8 words: well over a thousand tokens, whatever the encoding.
    let used = after["used_tokens"].as_u64().unwrap();
    assert!(used > 1_500, "the instructions are not counted: {after}");
    let reported = before["used_tokens"].as_u64().unwrap();
    assert!(
        used.abs_diff(reported) * 10 < reported,
        "the estimate ({used}) is far from the last count ({reported})"
    );
}
