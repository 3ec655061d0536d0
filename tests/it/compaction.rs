//! Compaction: manual through the API, automatic before a model call that would reach
//! the threshold, and what the model and the clients see afterwards.

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Recorded, Reply, Setup, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::{events_until, items};

/// Everything the model was sent in one request, as text.
fn request_text(request: &Recorded) -> String {
    request.body["messages"].to_string()
}

/// A fake-provider config whose model has a small window: 2,000 tokens, 200 of them for output,
/// so the threshold is 1,600 tokens (`min(0.8 × 2,000, 2,000 − 200)`).
fn small_window_config(fake: &FakeProvider) -> String {
    fake.config()
        .replace("context_window = 100000", "context_window = 2000")
        .replace("max_output_tokens = 1000", "max_output_tokens = 200")
}

fn compact_path(setup: &Setup) -> String {
    format!("/api/conversations/{}/compact", setup.id)
}

#[tokio::test]
async fn manual_compaction_summarizes_all_but_the_last_turn_and_the_model_reads_the_summary() {
    let setup = Setup::start(Wire::OpenaiChat).await;
    setup.fake.push(Reply::text("The capital is Paris."));
    setup.turn("What is the capital of France?").await;
    setup.fake.push(Reply::text("It is on the Seine."));
    setup.turn("Which river runs through it?").await;
    let before = setup.items().await;

    let mut events = setup.server.events(&setup.id).await;
    let requests_before = setup.fake.requests().len();
    setup
        .fake
        .push(Reply::text("SUMMARY: the user asked about France."));
    let (status, body) = setup.server.post(&compact_path(&setup), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let summary = &body["summary"];
    assert_eq!(summary["kind"], "summary");
    assert_eq!(summary["text"], "SUMMARY: the user asked about France.");
    // Everything before the last turn is covered: the last turn starts at its user message.
    let last_question = before
        .iter()
        .find(|item| item["text"] == "Which river runs through it?")
        .expect("the last question is stored");
    let covers = summary["covers_through_seq"].as_u64().unwrap();
    assert_eq!(covers, last_question["seq"].as_u64().unwrap() - 1);
    assert_eq!(body["usage"]["source"], "estimated", "{body}");

    // Clients saw it happen.
    let mut seen = events_until(&mut events, "compaction.completed").await;
    seen.retain(|(kind, _)| kind != "snapshot");
    let kinds: Vec<&str> = seen.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "compaction.started",
            "item.started",
            "item.completed",
            "compaction.completed"
        ],
        "{seen:?}"
    );
    assert_eq!(seen[0].1["reason"], "manual");
    assert_eq!(seen[3].1["summary"]["id"], summary["id"]);

    // The compaction model read the older history and the request to summarize it, no tools.
    let compaction_request = &setup.fake.requests()[requests_before];
    let read = request_text(compaction_request);
    assert!(read.contains("What is the capital of France?"), "{read}");
    assert!(
        !read.contains("Which river"),
        "the last turn is kept, not summarized: {read}"
    );
    assert!(
        read.contains("Summarize the conversation above now"),
        "{read}"
    );
    assert!(
        compaction_request
            .body
            .get("tools")
            .is_none_or(Value::is_null)
    );

    // The history is all still there; the covered items are marked.
    let after = setup.items().await;
    assert_eq!(after.len(), before.len() + 1);
    for item in &after {
        let seq = item["seq"].as_u64().unwrap();
        let expected = seq <= covers;
        assert_eq!(item["compacted"], expected, "{item}");
    }

    // The next model call reads the summary first, then the kept turn, then the new message.
    setup.fake.push(Reply::text("Yes."));
    let run = setup.turn("Is it big?").await;
    let sent = request_text(&run.requests[0]);
    assert!(
        sent.contains("[summary of earlier conversation] SUMMARY: the user asked about France."),
        "{sent}"
    );
    assert!(!sent.contains("capital of France"), "{sent}");
    let summary_at = sent.find("SUMMARY").unwrap();
    let kept_at = sent.find("Which river").expect("the kept turn is sent");
    assert!(summary_at < kept_at, "the summary comes first: {sent}");

    // A restart changes nothing: the flags come from the stored summary.
    let config = setup.fake.config();
    let data_dir = setup.server.stop().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    let (status, page) = server
        .get(&format!("/api/conversations/{}/items", setup.id))
        .await;
    assert_eq!(status, 200);
    let compacted: Vec<u64> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["compacted"] == true)
        .map(|item| item["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(compacted, (1..=covers).collect::<Vec<u64>>());
}

#[tokio::test]
async fn a_model_call_that_would_reach_the_threshold_compacts_first() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = small_window_config(&fake);
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    // About 2,250 tokens by the estimate: over the 1,600-token threshold on its own.
    let long = "lorem ipsum ".repeat(750);
    setup.fake.push(Reply::text("SUMMARY-1"));
    setup.fake.push(Reply::text("Done."));
    let run = setup.turn(&long).await;
    assert_eq!(run.ended()["status"], "completed", "{:?}", run.events);

    let started = run.all("compaction.started");
    assert_eq!(started.len(), 1, "{:?}", run.events);
    assert_eq!(started[0]["reason"], "auto");
    let completed = run.all("compaction.completed");
    assert_eq!(completed[0]["summary"]["text"], "SUMMARY-1");

    // Two model calls: the summary of what came before the long message, then the answer;
    // the turn's figures count both.
    assert_eq!(run.requests.len(), 2);
    assert_eq!(run.ended()["usage"]["model_calls"], 2, "{}", run.ended());
    assert_eq!(
        run.ended()["usage"]["input_tokens"],
        2 * crate::fake_provider::INPUT_TOKENS
    );
    let summarized = request_text(&run.requests[0]);
    assert!(
        summarized.contains("Hello") && summarized.contains("Ready."),
        "{summarized}"
    );
    assert!(
        !summarized.contains("lorem"),
        "the recent part is kept: {summarized}"
    );
    let answered = request_text(&run.requests[1]);
    assert!(
        answered.contains("SUMMARY-1") && answered.contains("lorem"),
        "{answered}"
    );
    assert!(!answered.contains("Ready."), "{answered}");

    // The next turn does not compact again: what is left is the recent part.
    setup.fake.push(Reply::text("Again."));
    let next = setup.turn("And now?").await;
    assert!(
        next.all("compaction.started").is_empty(),
        "{:?}",
        next.events
    );
    assert_eq!(next.requests.len(), 1);
}

#[tokio::test]
async fn a_failed_compaction_fails_the_turn_and_stores_no_summary() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = small_window_config(&fake);
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup
        .fake
        .push(Reply::rejected(400, "the compaction request was refused"));
    let run = setup.turn(&"lorem ipsum ".repeat(750)).await;
    let ended = run.ended();
    assert_eq!(ended["status"], "failed", "{ended}");
    let error = ended["error"].as_str().unwrap();
    assert!(
        error.contains("compaction failed") && error.contains("refused"),
        "{error}"
    );
    assert_eq!(run.all("compaction.failed").len(), 1, "{:?}", run.events);
    assert!(
        setup
            .items()
            .await
            .iter()
            .all(|item| item["kind"] != "summary" && item["compacted"] == false)
    );
}

#[tokio::test]
async fn manual_compaction_waits_for_no_turn_and_a_message_sent_meanwhile_waits_for_it() {
    let setup = Setup::start(Wire::OpenaiChat).await;
    // A slow answer keeps the turn running.
    setup.fake.set_pace(std::time::Duration::from_millis(100));
    setup
        .fake
        .push(Reply::text("one two three four five six seven"));
    let mut events = setup.server.events(&setup.id).await;
    let (status, _) = setup
        .server
        .post(
            &format!("/api/conversations/{}/messages", setup.id),
            json!({ "text": "Go slowly." }),
        )
        .await;
    assert_eq!(status, 202);
    events_until(&mut events, "item.delta").await;
    let (status, body) = setup.server.post(&compact_path(&setup), json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "turn_running");
    events_until(&mut events, "turn.ended").await;

    // A slow summary: a message sent during it waits, then starts its turn.
    setup
        .fake
        .push(Reply::text("SUMMARY written slowly by the model"));
    setup
        .fake
        .push(Reply::text("Answered after the compaction."));
    let server = setup.server.url(&compact_path(&setup));
    let client = setup.server.client.clone();
    let compaction = tokio::spawn(async move { client.post(server).json(&json!({})).send().await });
    events_until(&mut events, "compaction.started").await;
    // A client that connects now sees the compaction in its snapshot.
    let mut late = setup.server.events(&setup.id).await;
    let (kind, snapshot) = events_until(&mut late, "snapshot").await.remove(0);
    assert_eq!(kind, "snapshot");
    assert_eq!(snapshot["compacting"], true, "{snapshot}");
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/messages", setup.id),
            json!({ "text": "After the summary, please." }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["message"]["status"], "waiting", "{body}");
    let (status, again) = setup.server.post(&compact_path(&setup), json!({})).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "compaction_running");

    let response = compaction.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let seen = events_until(&mut events, "turn.ended").await;
    let order: Vec<&str> = seen
        .iter()
        .map(|(kind, _)| kind.as_str())
        .filter(|kind| ["compaction.completed", "turn.started", "turn.ended"].contains(kind))
        .collect();
    assert_eq!(
        order,
        ["compaction.completed", "turn.started", "turn.ended"],
        "{seen:?}"
    );
    let last = setup.fake.requests().last().cloned().unwrap();
    let sent = request_text(&last);
    assert!(
        sent.contains("SUMMARY written slowly") && sent.contains("After the summary"),
        "{sent}"
    );
}

#[tokio::test]
async fn the_demo_model_writes_a_summary_without_any_configuration() {
    let server = Server::start().await;
    let created = server
        .create_and_wait("First question about the demo")
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.send_and_wait(&id, "A second question").await;
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let text = body["summary"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Summary by the demo model") && text.contains("First question"),
        "{text}"
    );
    let (status, body) = server
        .post("/api/conversations/c_missing/compact", json!({}))
        .await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn a_press_never_summarizes_the_latest_turn() {
    let server = Server::start().await;
    let created = server.create_and_wait("The only question").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}/compact");

    // One turn: nothing is older than it, and nothing is stored.
    let (status, body) = server.post(&path, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "nothing_to_compact");
    let before = items(&server, &id).await;
    assert!(
        before
            .iter()
            .all(|item| item["kind"] != "summary" && item["compacted"] == false),
        "{before:?}"
    );

    // A second turn: the first is summarized, the second kept.
    server.send_and_wait(&id, "The latest question").await;
    let (status, body) = server.post(&path, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let covers = body["summary"]["covers_through_seq"].as_u64().unwrap();

    // A second press: only the summary is older than the latest turn.
    let (status, body) = server.post(&path, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "nothing_to_compact");
    let after = items(&server, &id).await;
    let summaries = after
        .iter()
        .filter(|item| item["kind"] == "summary")
        .count();
    assert_eq!(summaries, 1, "{after:?}");
    let latest = after
        .iter()
        .find(|item| item["text"] == "The latest question")
        .expect("the latest question is stored");
    assert!(latest["seq"].as_u64().unwrap() > covers);
    for item in after.iter().filter(|item| item["kind"] != "summary") {
        let compacted = item["seq"].as_u64().unwrap() <= covers;
        assert_eq!(item["compacted"], compacted, "{item}");
    }
}

#[tokio::test]
async fn tool_calls_reach_the_compaction_model_as_text_on_every_protocol() {
    // Anthropic refuses tool blocks in a request without tools; a summary offers no tools.
    let setup = Setup::start(Wire::AnthropicMessages).await;
    setup.fake.push(Reply::tool_call(
        "shell",
        json!({ "command": "echo compacted-tool-output" }),
        2,
    ));
    setup.fake.push(Reply::text("Ran it."));
    setup.turn("run the tool").await;
    setup.fake.push(Reply::text("Fine."));
    setup.turn("and now?").await;

    setup.fake.push(Reply::text("SUMMARY with a tool"));
    let before = setup.fake.requests().len();
    let (status, body) = setup.server.post(&compact_path(&setup), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let request = &setup.fake.requests()[before];
    let sent = request.body.to_string();
    assert!(
        !sent.contains("tool_use") && !sent.contains("tool_result"),
        "{sent}"
    );
    assert!(
        request.body.get("tools").is_none_or(Value::is_null),
        "{sent}"
    );
    assert!(
        sent.contains("[called the shell tool") && sent.contains("compacted-tool-output"),
        "{sent}"
    );
}

#[tokio::test]
async fn the_compaction_call_is_retried_visibly_and_times_out_like_any_model_call() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config().replace(
        "max_delay_ms = 50",
        "max_delay_ms = 50\nchunk_timeout_ms = 200",
    );
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.push(Reply::text("Another answer."));
    setup.turn("a second turn").await;

    // Two server errors, then a summary: both retries are announced.
    let mut events = setup.server.events(&setup.id).await;
    setup.fake.push(Reply::status(503));
    setup.fake.push(Reply::status(503));
    setup.fake.push(Reply::text("SUMMARY after retries"));
    let (status, body) = setup.server.post(&compact_path(&setup), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let seen = events_until(&mut events, "compaction.completed").await;
    let retries: Vec<&Value> = seen
        .iter()
        .filter(|(kind, _)| kind == "model.retry")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(retries.len(), 2, "{seen:?}");
    assert_eq!(retries[1]["attempt"], 2);
    let (_, conversation) = setup
        .server
        .get(&format!("/api/conversations/{}", setup.id))
        .await;
    assert_eq!(
        retries[0]["session_id"], conversation["root_session_id"],
        "{conversation}"
    );

    // A provider that goes silent: every attempt times out, and the compaction fails in the
    // end instead of holding the conversation forever.
    setup.fake.push(Reply::text("Third."));
    setup.turn("a third turn").await;
    setup.fake.set_pace(std::time::Duration::from_millis(1_000));
    for _ in 0..10 {
        setup.fake.push(Reply::text("too slow to arrive"));
    }
    let (status, body) = setup.server.post(&compact_path(&setup), json!({})).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "compaction_failed");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no data from the model"),
        "{body}"
    );
}

#[tokio::test]
async fn an_interrupted_automatic_compaction_says_so() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = small_window_config(&fake);
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.set_pace(std::time::Duration::from_millis(200));
    setup
        .fake
        .push(Reply::text("a summary that takes its time to arrive"));
    let mut events = setup.server.events(&setup.id).await;
    let (status, _) = setup
        .server
        .post(
            &format!("/api/conversations/{}/messages", setup.id),
            json!({ "text": "lorem ipsum ".repeat(750) }),
        )
        .await;
    assert_eq!(status, 202);
    events_until(&mut events, "compaction.started").await;
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/interrupt", setup.id),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let seen = events_until(&mut events, "turn.ended").await;
    let failed = seen
        .iter()
        .find(|(kind, _)| kind == "compaction.failed")
        .unwrap_or_else(|| panic!("no compaction.failed in {seen:?}"));
    assert_eq!(failed.1["error"], "interrupted");
    assert_eq!(seen.last().unwrap().1["status"], "interrupted");
}

#[tokio::test]
async fn compaction_fork_and_rewind_need_the_working_directory_like_a_turn() {
    let workdir = tempfile::tempdir().unwrap();
    let cwd = workdir.path().join("project");
    std::fs::create_dir(&cwd).unwrap();
    let server = Server::start().await;
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "hello", "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    server.wait_idle(id).await;
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let message_id = items["items"][0]["id"].as_str().unwrap().to_owned();
    std::fs::remove_dir(&cwd).unwrap();
    // A copy could not open either, so none is made.
    for (route, body) in [
        ("compact", json!({})),
        ("fork", json!({})),
        ("rewind", json!({ "message_id": message_id })),
    ] {
        let (status, answer) = server
            .post(&format!("/api/conversations/{id}/{route}"), body)
            .await;
        assert_eq!(status, 422, "{route}: {answer}");
        assert_eq!(answer["error"]["code"], "cwd_missing", "{route}");
    }
    let (_, listed) = server.get("/api/conversations").await;
    assert_eq!(listed["conversations"].as_array().unwrap().len(), 1);
}

/// The provider counts more than the meter estimated (images, a tokenizer only approximated)
/// and refuses a call as longer than the context window: the turn compacts what came before
/// it and sends the call again, once. Refused again after that, the turn fails with the
/// provider's words. Anthropic's wording is checked too.
#[tokio::test]
async fn a_call_refused_as_too_long_compacts_the_history_and_is_sent_again_once() {
    for wire in [Wire::OpenaiChat, Wire::AnthropicMessages] {
        let setup = Setup::start(wire).await;
        setup.fake.push(Reply::text("The capital is Paris."));
        setup.turn("What is the capital of France?").await;
        let refusal = match wire {
            Wire::AnthropicMessages => "prompt is too long: 2300 tokens > 2000 maximum",
            _ => {
                "This model's maximum context length is 2000 tokens. However, your messages \
                 resulted in 2300 tokens."
            }
        };
        setup.fake.push(Reply::rejected(400, refusal));
        setup.fake.push(Reply::text("SUMMARY-OVERFLOW"));
        setup.fake.push(Reply::text("It is on the Seine."));
        let run = setup.turn("Which river runs through it?").await;
        assert_eq!(run.ended()["status"], "completed", "{:?}", run.events);
        let started = run.all("compaction.started");
        assert_eq!(started.len(), 1, "{:?}", run.events);
        assert_eq!(started[0]["reason"], "auto");
        assert_eq!(
            run.all("compaction.completed")[0]["summary"]["text"],
            "SUMMARY-OVERFLOW"
        );
        // The refused call, the summary of the turns before this one, the call again.
        assert_eq!(run.requests.len(), 3, "{wire:?}");
        let texts: Vec<String> = run
            .requests
            .iter()
            .map(|request| request.body["messages"].to_string())
            .collect();
        assert!(texts[0].contains("capital of France"), "{}", texts[0]);
        assert!(texts[1].contains("capital of France"), "{}", texts[1]);
        assert!(!texts[1].contains("Which river"), "{}", texts[1]);
        assert!(texts[2].contains("SUMMARY-OVERFLOW"), "{}", texts[2]);
        assert!(texts[2].contains("Which river"), "{}", texts[2]);
        assert!(!texts[2].contains("capital of France"), "{}", texts[2]);
        let stored = setup.items().await;
        let answer = stored.last().unwrap();
        assert_eq!(answer["text"], "It is on the Seine.", "{answer}");

        // Refused again once compacted: the turn fails, saying why.
        setup.fake.push(Reply::rejected(400, refusal));
        setup.fake.push(Reply::text("SUMMARY-AGAIN"));
        setup.fake.push(Reply::rejected(400, refusal));
        let run = setup.turn("And how long is it?").await;
        assert_eq!(run.ended()["status"], "failed", "{:?}", run.events);
        let error = run.ended()["error"].as_str().unwrap();
        assert!(error.contains(refusal), "{error}");
        assert_eq!(run.requests.len(), 3, "{wire:?}");
        assert_eq!(setup.fake.remaining(), 0);
    }
}
