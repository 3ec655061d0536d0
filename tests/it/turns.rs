//! The turn loop's rules: a step limit stops a runaway loop, a tool's error goes
//! back to the model instead of failing the turn, and AGENTS.md reaches every model call.

use serde_json::json;

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};

#[tokio::test]
async fn a_runaway_loop_stops_at_the_step_limit_with_a_clear_error() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = format!("{}\n[turn]\nmax_steps = 3\n", fake.config());
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    for _ in 0..5 {
        setup.fake.push(Reply::tool_call("list_dir", json!({}), 1));
    }
    let run = setup.turn("loop forever").await;
    assert_eq!(run.requests.len(), 3, "exactly max_steps model calls");
    let ended = run.ended();
    assert_eq!(ended["status"], "failed");
    assert!(
        ended["error"].as_str().unwrap().contains("turn.max_steps"),
        "{ended}"
    );
    let items = setup.items().await;
    assert_eq!(items.iter().filter(|i| i["kind"] == "tool_call").count(), 3);
}

#[tokio::test]
async fn a_tool_error_goes_back_to_the_model_and_the_turn_goes_on() {
    let fake = FakeProvider::start(Wire::AnthropicMessages).await;
    let config = fake
        .config()
        .replace("tools = [\"shell\"]", "tools = [\"shell\", \"read_file\"]");
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.push(Reply::tool_call(
        "read_file",
        json!({ "path": "no/such/file.txt" }),
        2,
    ));
    setup.fake.push(Reply::text("That file does not exist."));
    let run = setup.turn("read it").await;
    assert_eq!(run.ended()["status"], "completed");
    let tool = run.completed("tool_call")[0];
    assert_eq!(tool["status"], "failed");
    assert!(
        tool.get("denied").is_none(),
        "a failure is not a denial: {tool}"
    );
    assert!(
        tool["output"].as_str().unwrap().contains("no such file"),
        "{tool}"
    );
    let next = run.requests[1].body.to_string();
    assert!(
        next.contains("no such file"),
        "the error went back to the model: {next}"
    );
}

#[tokio::test]
async fn agents_md_from_the_working_directory_reaches_every_model_call() {
    let setup = Setup::start(Wire::OpenaiChat).await;
    let workdir = tempfile::tempdir().unwrap();
    std::fs::write(workdir.path().join("AGENTS.md"), "Always answer in haiku.").unwrap();
    setup.fake.push(Reply::tool_call("list_dir", json!({}), 1));
    setup.fake.push(Reply::text("Done."));
    let before = setup.fake.requests().len();
    let (status, created) = setup
        .server
        .post(
            "/api/conversations",
            json!({ "text": "look around", "cwd": workdir.path().to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201);
    setup
        .server
        .wait_idle(created["conversation"]["id"].as_str().unwrap())
        .await;
    let requests = &setup.fake.requests()[before..];
    assert_eq!(requests.len(), 2);
    for request in requests {
        let system = &request.body["messages"][0];
        assert_eq!(system["role"], "system");
        assert!(
            system["content"]
                .as_str()
                .unwrap()
                .contains("Always answer in haiku."),
            "{system}"
        );
    }
}

#[tokio::test]
async fn after_an_interrupt_the_next_request_tells_the_model() {
    let setup = Setup::start(Wire::OpenaiResponses).await;
    let (server, id) = (&setup.server, setup.id.as_str());
    setup.fake.set_pace(std::time::Duration::from_millis(30));
    setup.fake.push(Reply::text(
        "A long answer that the user will cut off before it is done.",
    ));
    let mut events = server.events(id).await;
    server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "talk" }),
        )
        .await;
    crate::support::events_until(&mut events, "item.delta").await;
    let (_, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(body["interrupted"], true);
    // The interrupt answers once the turn is closed: the conversation says how it ended.
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        conversation["last_turn"]["status"], "interrupted",
        "{conversation}"
    );

    setup.fake.set_pace(std::time::Duration::from_millis(1));
    setup.fake.push(Reply::text("Understood."));
    let run = setup.turn("go on").await;
    let request = run.requests[0].body.to_string();
    assert!(
        request.contains("interrupted"),
        "the model is told: {request}"
    );
    assert!(
        request.contains("\"text\":\"A lon"),
        "the partial text stays in the context: {request}"
    );
}

#[tokio::test]
async fn tool_calls_of_separate_answers_stay_separate_in_the_next_request() {
    let setup = Setup::start(Wire::OpenaiChat).await;
    setup.fake.push(Reply::tool_call("list_dir", json!({}), 1));
    setup
        .fake
        .push(Reply::tool_call("list_dir", json!({ "path": "." }), 1));
    setup.fake.push(Reply::text("Looked twice."));
    let run = setup.turn("look, then look again").await;
    assert_eq!(run.ended()["status"], "completed");
    let calls = run.completed("tool_call");
    assert_eq!(
        (calls[0]["step"].as_u64(), calls[1]["step"].as_u64()),
        (Some(1), Some(2))
    );
    // The third request shows two answers, each with its own call and result.
    let messages = run.requests[2].body["messages"].as_array().unwrap().clone();
    let with_calls: Vec<usize> = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| m["tool_calls"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(with_calls[with_calls.len() - 2..], [1, 1], "{messages:?}");
}

/// Each turn's tokens: summed over its model calls, on `turn.ended`, listed by
/// `GET …/turns` (so far, for a running turn), kept across a restart, and unknown (`null`) for
/// a turn a crash cut short. A failed attempt that was retried is not a call; a provider that
/// sends no figures is counted apart.
#[tokio::test]
async fn each_turn_keeps_the_tokens_its_model_calls_used() {
    use crate::fake_provider::{CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, REASONING_TOKENS};
    use crate::harness::{Server, ServerOptions};
    use crate::support::{events_until, until};

    let setup = Setup::start(Wire::OpenaiChat).await;
    let id = setup.id.clone();
    let list = format!("/api/conversations/{id}/turns");
    let one_call = json!({
        "model_calls": 1, "unreported_calls": 0, "input_tokens": INPUT_TOKENS,
        "output_tokens": OUTPUT_TOKENS, "reasoning_tokens": REASONING_TOKENS,
        "cached_input_tokens": CACHED_TOKENS, "cache_write_tokens": 0,
        "models": [{
            "model": "m", "model_calls": 1, "input_tokens": INPUT_TOKENS,
            "output_tokens": OUTPUT_TOKENS, "cached_input_tokens": CACHED_TOKENS,
            "cache_write_tokens": 0,
        }],
    });

    // A tool call, then the answer: two calls.
    setup.fake.push(Reply::tool_call("list_dir", json!({}), 2));
    setup.fake.push(Reply::text("Two calls."));
    let two = setup.turn("list it").await;
    assert_eq!(two.ended()["status"], "completed");
    let two_calls = json!({
        "model_calls": 2, "unreported_calls": 0, "input_tokens": 2 * INPUT_TOKENS,
        "output_tokens": 2 * OUTPUT_TOKENS, "reasoning_tokens": 2 * REASONING_TOKENS,
        "cached_input_tokens": 2 * CACHED_TOKENS, "cache_write_tokens": 0,
        "models": [{
            "model": "m", "model_calls": 2, "input_tokens": 2 * INPUT_TOKENS,
            "output_tokens": 2 * OUTPUT_TOKENS, "cached_input_tokens": 2 * CACHED_TOKENS,
            "cache_write_tokens": 0,
        }],
    });
    assert_eq!(two.ended()["usage"], two_calls, "{}", two.ended());

    // A 503 retried, then an answer whose provider counts nothing.
    setup.fake.push(Reply::status(503));
    setup.fake.push(Reply::Unmetered("Not counted.".into()));
    let unmetered = setup.turn("count nothing").await;
    assert_eq!(unmetered.all("model.retry").len(), 1);
    let unreported = json!({
        "model_calls": 1, "unreported_calls": 1, "input_tokens": 0,
        "output_tokens": 0, "reasoning_tokens": 0, "cached_input_tokens": 0,
        "cache_write_tokens": 0,
        "models": [{
            "model": "m", "model_calls": 1, "input_tokens": 0, "output_tokens": 0,
            "cached_input_tokens": 0, "cache_write_tokens": 0,
        }],
    });
    assert_eq!(unmetered.ended()["usage"], unreported);

    let (status, page) = setup.server.get(&list).await;
    assert_eq!(status, 200, "{page}");
    let turns = page["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{page}");
    assert_eq!(page["next_after"], serde_json::Value::Null);
    assert_eq!(turns[0]["usage"], one_call, "the first turn: {page}");
    assert_eq!(turns[1]["id"], two.ended()["turn_id"]);
    assert_eq!(turns[1]["usage"], two_calls);
    assert_eq!(turns[1]["status"], "completed");
    assert_eq!(turns[1]["message_ids"].as_array().unwrap().len(), 1);
    assert!(turns[1]["ended_at"].is_string(), "{page}");
    assert_eq!(turns[2]["usage"], unreported);

    // Pages, and what is refused.
    let (_, first) = setup.server.get(&format!("{list}?limit=2")).await;
    assert_eq!(first["turns"].as_array().unwrap().len(), 2);
    assert_eq!(first["next_after"], turns[1]["id"]);
    let after = first["next_after"].as_str().unwrap();
    let (_, rest) = setup.server.get(&format!("{list}?after={after}")).await;
    assert_eq!(rest["turns"], json!([turns[2]]));
    for (query, code) in [
        ("?limit=0", 400),
        ("?limit=2001", 400),
        ("?after=t_nosuchturn", 404),
        ("?session=s_nosuchsession", 404),
        ("?sort=up", 400),
    ] {
        let (status, body) = setup.server.get(&format!("{list}{query}")).await;
        assert_eq!(status, code, "{query}: {body}");
    }
    let (status, _) = setup.server.get("/api/conversations/c_nosuch/turns").await;
    assert_eq!(status, 404);

    // A running turn shows its calls so far: the tool call answered, the answer stalls.
    setup.fake.push(Reply::tool_call("list_dir", json!({}), 1));
    setup.fake.push(Reply::StallAfter {
        text: "This answer never ends.".to_owned(),
        chunks: 1,
    });
    let mut events = setup.server.events(&id).await;
    let (status, _) = setup
        .server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "stall" }),
        )
        .await;
    assert_eq!(status, 202);
    events_until(&mut events, "turn.started").await;
    until(&mut events, |kind, data| {
        kind == "item.delta" && data["field"] == "text"
    })
    .await;
    let (_, page) = setup.server.get(&list).await;
    let running = &page["turns"][3];
    assert_eq!(running["status"], "running", "{page}");
    assert_eq!(running["usage"], one_call, "{page}");

    // A crash cuts it short: its figures are unknown; the others were stored.
    let Setup { fake, server, .. } = setup;
    let data_dir = server.kill9().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        config: Some(fake.config()),
        ..ServerOptions::default()
    })
    .await;
    let (status, page) = server.get(&list).await;
    assert_eq!(status, 200, "{page}");
    let after_crash = page["turns"].as_array().unwrap();
    assert_eq!(after_crash.len(), 4, "{page}");
    assert_eq!(
        after_crash[..3],
        turns[..],
        "the ended turns are as they were"
    );
    assert_eq!(after_crash[3]["status"], "interrupted");
    assert_eq!(after_crash[3]["usage"], serde_json::Value::Null);
}
