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
    let setup = Setup::start(Wire::AnthropicMessages).await;
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
