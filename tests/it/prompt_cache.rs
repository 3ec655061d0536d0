//! Prompt caching, asked of every provider by default: Anthropic's `cache_control` breakpoints
//! (at the end of the instructions and on the newest message, with the configured lifetime),
//! OpenAI's `prompt_cache_key` (the session's id) on both wires; `prompt_cache = "off"` asks
//! for nothing; the cached tokens each provider reports kept in the turn's usage, and what
//! they cost at the model's `price`.

use serde_json::{Value, json};

use crate::fake_provider::{CACHED_TOKENS, FakeProvider, Recorded, Reply, Wire};
use crate::harness::{Server, ServerOptions};

/// A server with `config` whose conversations work in a directory holding `notes.txt`.
async fn serve(config: String, notes: &str) -> (tempfile::TempDir, Server) {
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("notes.txt"), notes).unwrap();
    let server = Server::start_with(ServerOptions {
        data_dir: Some(temp.path().join("data")),
        config: Some(config),
        cwd: Some(work),
        ..ServerOptions::default()
    })
    .await;
    (temp, server)
}

/// A conversation whose agent has `read_file`, on a model with `model_lines`, through one turn
/// with a tool call: the requests of that turn, its usage, the session id, and the
/// conversation's cost as its view gives it.
async fn converse(wire: Wire, model_lines: &str) -> (Vec<Recorded>, Value, String, Value) {
    let fake = FakeProvider::start(wire).await;
    let config = fake
        .config()
        .replace("tools = [\"shell\"]", "tools = [\"shell\", \"read_file\"]")
        .replace(
            "max_output_tokens = 1000",
            &format!("max_output_tokens = 1000\n{model_lines}"),
        );
    let (_temp, server) = serve(config, "notes\n").await;
    fake.push(Reply::tool_call(
        "read_file",
        json!({"path": "notes.txt"}),
        1,
    ));
    fake.push(Reply::text("Read."));
    let created = server.create_and_wait("Read the notes").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let session = created["conversation"]["root_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, turns) = server.get(&format!("/api/conversations/{id}/turns")).await;
    assert_eq!(status, 200, "{turns}");
    let usage = turns["turns"][0]["usage"].clone();
    let (status, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200, "{view}");
    (fake.requests(), usage, session, view["cost"].clone())
}

fn breakpoints(body: &Value) -> usize {
    body.to_string().matches("\"cache_control\"").count()
}

#[tokio::test]
async fn anthropic_requests_carry_breakpoints_on_the_instructions_and_the_newest_message() {
    let (requests, usage, _, _) = converse(Wire::AnthropicMessages, "").await;
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let body = &request.body;
        let system = &body["system"][0];
        assert_eq!(
            system["cache_control"],
            json!({"type": "ephemeral"}),
            "{body}"
        );
        let last = body["messages"].as_array().unwrap().last().unwrap();
        let block = last["content"].as_array().unwrap().last().unwrap();
        assert_eq!(
            block["cache_control"],
            json!({"type": "ephemeral"}),
            "{body}"
        );
        assert_eq!(
            breakpoints(body),
            2,
            "never more than the API allows: {body}"
        );
        assert!(request.headers.get("anthropic-beta").is_none());
    }
    // The second call's prefix is the first's: the instructions and tools, byte for byte.
    assert_eq!(requests[0].body["system"], requests[1].body["system"]);
    assert_eq!(requests[0].body["tools"], requests[1].body["tools"]);
    // What the provider read from its cache is kept apart in the turn's usage.
    assert_eq!(usage["cached_input_tokens"], 2 * CACHED_TOKENS, "{usage}");

    let (requests, _, _, _) = converse(Wire::AnthropicMessages, "cache_ttl = \"1h\"").await;
    let body = &requests[0].body;
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    assert_eq!(
        requests[0].headers.get("anthropic-beta").unwrap(),
        "extended-cache-ttl-2025-04-11"
    );

    let (requests, _, _, _) = converse(Wire::AnthropicMessages, "prompt_cache = \"off\"").await;
    assert_eq!(breakpoints(&requests[0].body), 0, "{}", requests[0].body);
    assert!(requests[0].body["system"].is_string());
}

#[tokio::test]
async fn openai_requests_carry_the_sessions_cache_key_on_both_wires() {
    for wire in [Wire::OpenaiChat, Wire::OpenaiResponses] {
        let (requests, usage, session, _) = converse(wire, "").await;
        assert_eq!(requests.len(), 2, "{wire:?}");
        for request in &requests {
            assert_eq!(
                request.body["prompt_cache_key"],
                session.as_str(),
                "{wire:?}"
            );
            assert!(request.body.get("prompt_cache_retention").is_none());
        }
        assert_eq!(
            usage["cached_input_tokens"],
            2 * CACHED_TOKENS,
            "{wire:?}: {usage}"
        );

        let (requests, _, _, _) = converse(wire, "prompt_cache_retention = \"24h\"").await;
        assert_eq!(
            requests[0].body["prompt_cache_retention"], "24h",
            "{wire:?}"
        );

        // For compatible servers that refuse fields they do not know.
        let (requests, _, _, _) = converse(wire, "prompt_cache = \"off\"").await;
        assert!(
            requests[0].body.get("prompt_cache_key").is_none(),
            "{wire:?}"
        );
    }
}

/// What `serve` says when it refuses to start with the fake's config and `model_lines` added
/// to its model.
async fn refused(model_lines: &str) -> String {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config().replace(
        "max_output_tokens = 1000",
        &format!("max_output_tokens = 1000\n{model_lines}"),
    );
    crate::harness::serve_refuses(&config).await
}

#[tokio::test]
async fn a_cache_setting_of_another_protocol_is_refused_naming_its_key() {
    let stderr = refused("cache_ttl = \"1h\"").await;
    assert!(stderr.contains("models.m.cache_ttl"), "{stderr}");
}

/// The parts of a Chat Completions request a provider caches as its prefix: the instructions
/// (the system message) and the tools, with the key the cache is looked up by.
fn prefix(body: &Value) -> (Value, Value, Value) {
    (
        body["messages"][0].clone(),
        body["tools"].clone(),
        body["prompt_cache_key"].clone(),
    )
}

#[tokio::test]
async fn the_prefix_stays_the_same_bytes_across_tool_calls_a_sub_agent_and_a_compaction() {
    const TASK: &str = "task: count the notes";
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config().replace(
        "tools = [\"shell\"]",
        "tools = [\"shell\", \"read_file\", \"spawn_agent\", \"wait_agents\"]",
    );
    let first_user = |body: &Value| -> String {
        body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|message| message["role"] == "user")
            .and_then(|message| message["content"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let compacting = |body: &Value| {
        body["messages"][0]["content"]
            .as_str()
            .is_some_and(|text| text.starts_with("You are compacting"))
    };
    fake.script(move |body| {
        let results: Vec<&Value> = body["messages"]
            .as_array()?
            .iter()
            .filter(|message| message["role"] == "tool")
            .collect();
        let spawned: Vec<String> = results
            .iter()
            .filter_map(|m| serde_json::from_str::<Value>(m["content"].as_str()?).ok())
            .filter_map(|result| result["session_id"].as_str().map(str::to_owned))
            .collect();
        Some(if compacting(body) {
            Reply::text("Summary: the notes were read and counted.")
        } else if first_user(body) == TASK {
            Reply::text("Three notes.")
        } else if body.to_string().contains("One more") {
            Reply::text("Still here.")
        } else {
            match results.len() {
                0 => Reply::tool_call("read_file", json!({"path": "notes.txt"}), 1),
                1 => Reply::tool_call("spawn_agent", json!({"agent": "default", "task": TASK}), 1),
                2 => Reply::tool_call(
                    "wait_agents",
                    json!({"session_ids": spawned, "timeout_s": 60}),
                    1,
                ),
                _ => Reply::text("Counted."),
            }
        })
    });
    let (_temp, server) = serve(config, "a\nb\nc\n").await;
    let created = server.create_and_wait("Count the notes").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let root = created["conversation"]["root_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A second turn, so that the first has something to be compacted into.
    server.send_and_wait(&id, "One more").await;
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    server.wait_idle(&id).await;
    server
        .send_and_wait(&id, "One more after the summary")
        .await;

    let requests = fake.requests();
    let (child, rest): (Vec<&Recorded>, Vec<&Recorded>) = requests
        .iter()
        .filter(|request| !compacting(&request.body))
        .partition(|request| first_user(&request.body) == TASK);
    let root_calls: Vec<&Recorded> = rest;
    assert!(root_calls.len() >= 5, "{}", root_calls.len());
    assert!(!child.is_empty());
    assert!(requests.iter().any(|request| compacting(&request.body)));
    let first = prefix(&root_calls[0].body);
    assert_eq!(first.2, root.as_str());
    for call in &root_calls {
        assert_eq!(prefix(&call.body), first, "the root's prefix changed");
    }
    let child_first = prefix(&child[0].body);
    assert_ne!(
        child_first.2, first.2,
        "a sub-agent has a cache key of its own"
    );
    for call in &child {
        assert_eq!(
            prefix(&call.body),
            child_first,
            "the sub-agent's prefix changed"
        );
    }
}

#[tokio::test]
async fn a_priced_model_gives_each_turn_its_cost_and_an_unpriced_one_none() {
    use crate::fake_provider::{INPUT_TOKENS, OUTPUT_TOKENS};
    let price = "price = { input = 3.0, cached_input = 0.3, output = 15.0 }";
    for wire in [Wire::OpenaiChat, Wire::AnthropicMessages] {
        let (_, usage, _, total) = converse(wire, price).await;
        // Per call: the fresh input, the cached input and the output, each at its price.
        let fresh = (INPUT_TOKENS - CACHED_TOKENS) as f64 * 3.0;
        let cached = CACHED_TOKENS as f64 * 0.3;
        let output = OUTPUT_TOKENS as f64 * 15.0;
        let expected = 2.0 * (fresh + cached + output) / 1_000_000.0;
        let cost = usage["cost"]
            .as_f64()
            .unwrap_or_else(|| panic!("{wire:?}: {usage}"));
        assert!(
            (cost - expected).abs() < 1e-12,
            "{wire:?}: {cost} != {expected}"
        );
        // The conversation's view sums its turns.
        assert_eq!(total.as_f64(), Some(cost), "{wire:?}");
    }
    let (_, usage, _, total) = converse(Wire::OpenaiChat, "").await;
    assert!(usage.get("cost").is_none(), "no price, no cost: {usage}");
    assert!(total.is_null(), "{total}");

    let stderr = refused("price = { input = -1.0, output = 2.0 }").await;
    assert!(stderr.contains("models.m.price"), "{stderr}");
}
