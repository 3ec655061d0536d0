//! Model-call retries against the fake provider: transient failures are retried
//! visibly up to `max_attempts` calls in all, rejections fail at once, and a cut stream's
//! partial answer is kept for clients but never shown to the model.

use serde_json::Value;

use crate::fake_provider::{Reply, Setup, Wire, chunks};
use crate::support::events_until;

/// The protocol these tests use; the retry rule lives in the turn loop, the same for all.
const WIRE: Wire = Wire::OpenaiChat;

#[tokio::test]
async fn rate_limits_are_retried_after_the_wait_the_provider_asks_for() {
    let setup = Setup::start(WIRE).await;
    for _ in 0..3 {
        setup.fake.push(Reply::rate_limited("0"));
    }
    setup.fake.push(Reply::text("Finally through."));
    let turn = setup.turn("Are you there?").await;

    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let retries = turn.all("model.retry");
    assert_eq!(retries.len(), 3, "{retries:?}");
    for (n, retry) in retries.iter().enumerate() {
        assert_eq!(retry["attempt"], n as u64 + 1);
        assert_eq!(retry["max_attempts"], 10);
        // `Retry-After: 0` is honoured instead of the growing delay.
        assert_eq!(retry["delay_ms"], 0);
        let error = retry["error"].as_str().unwrap();
        assert!(error.contains("429"), "{error}");
        assert!(error.contains("rate limit reached, slow down"), "{error}");
    }
    assert_eq!(turn.requests.len(), 4);
    assert_eq!(
        turn.completed("agent_message").last().unwrap()["text"],
        "Finally through."
    );
}

#[tokio::test]
async fn ten_server_errors_fail_the_turn_after_exactly_ten_calls() {
    let setup = Setup::start(WIRE).await;
    for _ in 0..11 {
        setup.fake.push(Reply::status(500));
    }
    let turn = setup.turn("This will not work").await;

    let ended = turn.ended();
    assert_eq!(ended["status"], "failed", "{:?}", turn.events);
    let error = ended["error"].as_str().unwrap();
    assert!(error.contains("10 times"), "{error}");
    assert!(error.contains("fake provider failure 500"), "{error}");
    assert_eq!(turn.requests.len(), 10);
    assert_eq!(setup.fake.remaining(), 1);
    let retries = turn.all("model.retry");
    assert_eq!(retries.len(), 9, "{retries:?}");
    // Without Retry-After the wait doubles from 10 ms up to the 50 ms cap.
    let delays: Vec<u64> = retries
        .iter()
        .map(|retry| retry["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays, [10, 20, 40, 50, 50, 50, 50, 50, 50]);
}

#[tokio::test]
async fn a_rejected_request_fails_at_once_with_the_providers_message() {
    let setup = Setup::start(WIRE).await;
    setup.fake.push(Reply::rejected(
        400,
        "the model `fake-model` does not accept this",
    ));
    setup.fake.push(Reply::text("Now it works."));
    let mut list_events = setup.server.events_from("/api/events", None).await;
    let turn = setup.turn("Something invalid").await;

    let ended = turn.ended();
    assert_eq!(ended["status"], "failed", "{:?}", turn.events);
    let error = ended["error"].as_str().unwrap();
    assert!(
        error.contains("the model `fake-model` does not accept this"),
        "{error}"
    );
    assert!(error.contains("400"), "{error}");
    assert_eq!(turn.requests.len(), 1);
    assert!(turn.all("model.retry").is_empty());

    // The failure stays in the history as a notice, for every client and the next turn.
    let items = setup.items().await;
    let notice = items.last().unwrap();
    assert_eq!(notice["kind"], "notice");
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains("does not accept this"),
        "{notice}"
    );

    // The conversation says how its last turn ended, and so does the list (a sidebar marks a
    // failed conversation): the list learns it with the `conversation.updated` that follows
    // the index update.
    let listed = idle_update(&mut list_events, &setup.id).await;
    let last = &listed["last_turn"];
    assert_eq!(last["status"], "failed", "{listed}");
    assert_eq!(last["turn_id"], ended["turn_id"], "{listed}");
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("does not accept this"),
        "{listed}"
    );
    let (_, list) = setup.server.get("/api/conversations").await;
    assert_eq!(list["conversations"][0]["last_turn"], *last, "{list}");
    let (_, conversation) = setup
        .server
        .get(&format!("/api/conversations/{}", setup.id))
        .await;
    assert_eq!(conversation["last_turn"], *last, "{conversation}");

    // A turn that completes replaces the mark.
    let again = setup.turn("Try again").await;
    assert_eq!(again.ended()["status"], "completed", "{:?}", again.events);
    let listed = idle_update(&mut list_events, &setup.id).await;
    assert_eq!(listed["last_turn"]["status"], "completed", "{listed}");
    assert_eq!(listed["last_turn"]["error"], Value::Null, "{listed}");
}

/// The next list-level `conversation.updated` that shows the conversation idle.
async fn idle_update(
    events: &mut (impl futures::Stream<Item = (String, Value)> + Unpin),
    id: &str,
) -> Value {
    loop {
        let seen = events_until(events, "conversation.updated").await;
        let (_, data) = seen.last().unwrap();
        let conversation = &data["conversation"];
        if conversation["id"] == id && conversation["status"] == "idle" {
            return conversation.clone();
        }
    }
}

#[tokio::test]
async fn a_cut_stream_is_retried_and_its_partial_answer_never_reaches_the_model() {
    let setup = Setup::start(WIRE).await;
    let cut_text = "This first attempt gets cut in the middle of a sentence";
    let kept_chunks = 3;
    setup.fake.push(Reply::cut_after(cut_text, kept_chunks));
    setup.fake.push(Reply::text("The complete answer."));
    let turn = setup.turn("Tell me everything").await;

    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let retries = turn.all("model.retry");
    assert_eq!(retries.len(), 1, "{:?}", turn.events);
    let error = retries[0]["error"].as_str().unwrap();
    assert!(error.contains("the provider's stream broke"), "{error}");
    assert_eq!(turn.requests.len(), 2);

    let partial: String = chunks(cut_text)[..kept_chunks].concat();
    let answers = turn.completed("agent_message");
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["status"], "failed");
    assert_eq!(answers[0]["text"], partial.as_str());
    assert_eq!(answers[1]["status"], "completed");
    assert_eq!(answers[1]["text"], "The complete answer.");

    // The retry's request is the first one again: no trace of the cut answer.
    let retried = &turn.requests[1].body;
    assert_eq!(retried, &turn.requests[0].body);
    assert!(!retried.to_string().contains(&partial), "{retried}");

    // On disk: the failed partial answer, then the complete one.
    let items = setup.items().await;
    let stored: Vec<(&str, &str)> = items
        .iter()
        .rev()
        .take(2)
        .rev()
        .map(|item| {
            (
                item["status"].as_str().unwrap(),
                item["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        stored,
        [
            ("failed", partial.as_str()),
            ("completed", "The complete answer.")
        ]
    );

    // Nor does it reach the model in later turns.
    setup.fake.push(Reply::text("Still fine."));
    let next = setup.turn("And now?").await;
    assert_eq!(next.ended()["status"], "completed");
    let sent = next.requests[0].body.to_string();
    assert!(!sent.contains(&partial), "{sent}");
    assert!(sent.contains("The complete answer."), "{sent}");
}

#[tokio::test]
async fn a_stream_that_ends_before_its_completion_marker_is_retried() {
    let setup = Setup::start(WIRE).await;
    setup
        .fake
        .push(Reply::end_after("An answer that stops early", 2));
    setup.fake.push(Reply::text("An answer that is whole."));
    let turn = setup.turn("Go on").await;

    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let retries = turn.all("model.retry");
    assert_eq!(retries.len(), 1, "{:?}", turn.events);
    let error = retries[0]["error"].as_str().unwrap();
    assert!(error.contains("completion marker"), "{error}");
    let answers = turn.completed("agent_message");
    assert_eq!(answers.last().unwrap()["text"], "An answer that is whole.");
}

/// The "no data" timeout counts time without any event from the provider, not without text:
/// a tool call whose arguments stream slowly (or a provider's pings) keeps the call alive.
#[tokio::test]
async fn a_tool_call_streaming_slowly_is_not_cut_as_silence() {
    use crate::fake_provider::FakeProvider;
    let fake = FakeProvider::start(WIRE).await;
    let config = fake.config().replace(
        "max_delay_ms = 50",
        "max_delay_ms = 50\nchunk_timeout_ms = 600",
    );
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.set_pace(std::time::Duration::from_millis(150));
    setup.fake.push(Reply::tool_call(
        "list_dir",
        serde_json::json!({ "path": "." }),
        10,
    ));
    setup.fake.push(Reply::text("Listed."));
    let turn = setup.turn("List the directory, slowly.").await;

    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    assert!(turn.all("model.retry").is_empty(), "{:?}", turn.events);
    assert_eq!(
        turn.requests.len(),
        2,
        "one call for the tool, one for the answer"
    );
}

/// A client that subscribes while the model call waits for its retry sees the retry in its
/// snapshot (which attempt failed, why, and when the next is sent), not a running turn with
/// nothing happening; a `Retry-After` longer than `max_delay_ms` is waited in full.
#[tokio::test]
async fn a_client_joining_during_a_back_off_sees_the_retry_in_its_snapshot() {
    let setup = Setup::start(WIRE).await;
    setup.fake.push(Reply::rate_limited("2"));
    setup.fake.push(Reply::text("Through after the wait."));
    let mut first = setup.server.events(&setup.id).await;
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/messages", setup.id),
            serde_json::json!({ "text": "Slowly, please" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let seen = events_until(&mut first, "model.retry").await;
    let retry = &seen.last().unwrap().1;
    // Two seconds, although `max_delay_ms` is 50: the provider is not asked again early.
    assert_eq!(retry["delay_ms"], 2000, "{retry}");
    assert!(retry["next_at"].is_string(), "{retry}");

    let mut joining = setup.server.events(&setup.id).await;
    let (kind, snapshot) = futures::StreamExt::next(&mut joining).await.unwrap();
    assert_eq!(kind, "snapshot");
    let running = &snapshot["running"][0];
    assert_eq!(running["retry"]["attempt"], 1, "{snapshot}");
    assert_eq!(running["retry"]["max_attempts"], 10);
    assert_eq!(running["retry"]["next_at"], retry["next_at"]);
    let error = running["retry"]["error"].as_str().unwrap();
    assert!(error.contains("rate limit reached"), "{error}");

    let rest = events_until(&mut joining, "turn.ended").await;
    assert_eq!(rest.last().unwrap().1["status"], "completed", "{rest:?}");
    // Once the next attempt answered, nothing is being retried any more.
    let mut after = setup.server.events(&setup.id).await;
    let (_, snapshot) = futures::StreamExt::next(&mut after).await.unwrap();
    assert_eq!(snapshot["running"], serde_json::json!([]), "{snapshot}");
}

/// A provider that asks to wait longer than `max_retry_after_ms` fails the turn at once with
/// its own message; the request is not sent again early.
#[tokio::test]
async fn a_retry_after_past_the_allowed_wait_fails_the_turn_with_the_providers_message() {
    let fake = crate::fake_provider::FakeProvider::start(WIRE).await;
    let config = fake.config().replace(
        "max_delay_ms = 50",
        "max_delay_ms = 50\nmax_retry_after_ms = 1000",
    );
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.push(Reply::rate_limited("120"));
    setup.fake.push(Reply::text("never sent"));
    let turn = setup.turn("Now?").await;

    let ended = turn.ended();
    assert_eq!(ended["status"], "failed", "{:?}", turn.events);
    let error = ended["error"].as_str().unwrap();
    assert!(error.contains("120 s"), "{error}");
    assert!(error.contains("max_retry_after_ms"), "{error}");
    assert!(error.contains("rate limit reached, slow down"), "{error}");
    assert_eq!(turn.requests.len(), 1);
    assert!(turn.all("model.retry").is_empty());
}

/// `POST …/retry` runs a failed turn again with the history it had: the model gets the same
/// request (and the notice that the attempt failed), the user's message is not posted twice,
/// and only a failed latest turn qualifies.
#[tokio::test]
async fn retry_runs_a_failed_turn_again_without_posting_the_message_twice() {
    let setup = Setup::start(Wire::OpenaiChat).await;
    let retry = format!("/api/conversations/{}/retry", setup.id);
    setup
        .fake
        .push(Reply::rejected(400, "the request is malformed"));
    let failed = setup.turn("Summarise the plan").await;
    assert_eq!(failed.ended()["status"], "failed", "{:?}", failed.events);
    let failed_turn = failed.ended()["turn_id"].as_str().unwrap().to_owned();

    setup.fake.push(Reply::text("Here is the summary."));
    let mut events = setup.server.events(&setup.id).await;
    let (status, body) = setup.server.post(&retry, serde_json::json!({})).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["retry_of"], failed_turn.as_str());
    let seen = events_until(&mut events, "turn.ended").await;
    let started = seen
        .iter()
        .find(|(kind, _)| kind == "turn.started")
        .expect("turn.started");
    assert_eq!(started.1["turn_id"], body["turn_id"]);
    assert_eq!(started.1["message_ids"], serde_json::json!([]));
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");

    // The model got the same history again, told of the failed attempt.
    let requests = setup.fake.requests();
    let (first, again) = (&requests[requests.len() - 2], &requests[requests.len() - 1]);
    let first = first.body["messages"].as_array().unwrap();
    let again = again.body["messages"].as_array().unwrap();
    assert_eq!(&again[..first.len()], &first[..], "{again:?}");
    assert_eq!(again.len(), first.len() + 1, "{again:?}");
    let notice = again.last().unwrap()["content"].as_str().unwrap();
    assert!(
        notice.starts_with("[runtime notice] The previous turn failed"),
        "{notice}"
    );
    let items = setup.items().await;
    let asked = items
        .iter()
        .filter(|item| item["kind"] == "user_message" && item["text"] == "Summarise the plan")
        .count();
    assert_eq!(asked, 1, "{items:?}");
    assert!(
        items
            .iter()
            .any(|item| item["kind"] == "agent_message" && item["text"] == "Here is the summary."),
        "{items:?}"
    );

    // The latest turn completed: nothing to retry. No body is fine; a bad one is refused.
    let (status, body) = setup
        .server
        .client
        .post(setup.server.url(&retry))
        .send()
        .await
        .map(crate::harness::read)
        .unwrap()
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "nothing_to_retry");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("completed"),
        "{body}"
    );
    let (status, body) = setup
        .server
        .post(&retry, serde_json::json!({"session_id": "s_none"}))
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = setup
        .server
        .post(&retry, serde_json::json!({"session": "x"}))
        .await;
    assert_eq!(status, 400);
}

/// "Retry now": a turn waiting a minute to try its model call again tries at once.
#[tokio::test]
async fn retry_now_cuts_the_wait_before_the_next_attempt_short() {
    let setup = Setup::start(WIRE).await;
    let retry_now = format!("/api/conversations/{}/retry/now", setup.id);
    // Nothing waits to be retried yet: nothing happens.
    let (status, body) = setup.server.post(&retry_now, serde_json::json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["retrying"], false, "{body}");
    let (status, body) = setup
        .server
        .post(&retry_now, serde_json::json!({ "session_id": "s_nope" }))
        .await;
    assert_eq!(status, 404, "{body}");

    setup.fake.push(Reply::rate_limited("60"));
    setup.fake.push(Reply::text("Through at once."));
    let mut events = setup.server.events(&setup.id).await;
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/messages", setup.id),
            serde_json::json!({ "text": "Hurry" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let seen = events_until(&mut events, "model.retry").await;
    assert_eq!(seen.last().unwrap().1["delay_ms"], 60_000);
    let (status, body) = setup.server.post(&retry_now, serde_json::json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["retrying"], true, "{body}");
    // Well within the test's timeout, a third of the minute it would have waited.
    let rest = events_until(&mut events, "turn.ended").await;
    assert_eq!(rest.last().unwrap().1["status"], "completed", "{rest:?}");
}

/// Stopped while it waits to try a failed model call again, a turn ends `failed` with that
/// call's error, and `POST …/retry` runs it again.
#[tokio::test]
async fn a_turn_stopped_during_its_retry_wait_fails_and_can_be_retried() {
    let setup = Setup::start(WIRE).await;
    setup.fake.push(Reply::rate_limited("60"));
    setup.fake.push(Reply::text("Through on the retry."));
    let mut events = setup.server.events(&setup.id).await;
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/messages", setup.id),
            serde_json::json!({ "text": "Try hard" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    events_until(&mut events, "model.retry").await;
    let (status, _) = setup
        .server
        .post(
            &format!("/api/conversations/{}/interrupt", setup.id),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let seen = events_until(&mut events, "turn.ended").await;
    let ended = &seen.last().unwrap().1;
    assert_eq!(ended["status"], "failed", "{ended}");
    let error = ended["error"].as_str().unwrap();
    assert!(
        error.contains("rate limit reached") && error.contains("stopped while waiting"),
        "{error}"
    );
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/retry", setup.id),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let rest = events_until(&mut events, "turn.ended").await;
    assert_eq!(rest.last().unwrap().1["status"], "completed", "{rest:?}");
}
