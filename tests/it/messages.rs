//! Messages while the agent works: steer, queue, interrupt, and waiting messages
//! that can be edited, withdrawn or promoted. The built-in demo model is enough here: it quotes
//! the latest user message it was given, which shows what reached the model.

use futures::Stream;
use serde_json::{Value, json};

use crate::harness::{Server, TIMEOUT, process_alive};
use crate::support::{items, until, until_turns_ended};

type Event = (String, String, Value);

/// Waits for the first event matching `predicate` and returns its data.
async fn next_matching(
    stream: &mut (impl Stream<Item = Event> + Unpin),
    predicate: impl Fn(&str, &Value) -> bool,
) -> Value {
    let (_, _, data) = until(stream, predicate).await.pop().unwrap();
    data
}

fn of_kind<'a>(events: &'a [Event], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|(_, k, _)| k == kind)
        .map(|(_, _, data)| data)
        .collect()
}

/// A new conversation whose first answer is streaming (the first delta has arrived).
async fn streaming_turn(
    server: &Server,
    text: &str,
) -> (String, Value, impl Stream<Item = Event> + Unpin + use<>) {
    let (status, created) = server
        .post("/api/conversations", json!({ "text": text }))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server
        .raw_events(&format!("/api/conversations/{id}/events"), None)
        .await;
    next_matching(&mut events, |kind, _| kind == "item.delta").await;
    (id, created, events)
}

/// A conversation in `workdir` whose first turn runs a shell command that waits for `go`.
async fn blocked_turn(
    server: &Server,
    workdir: &std::path::Path,
) -> (String, impl Stream<Item = Event> + Unpin + use<>) {
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "hello", "cwd": workdir.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201);
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    let mut events = server
        .raw_events(&format!("/api/conversations/{id}/events"), None)
        .await;
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "/shell echo waiting; while [ ! -f go ]; do sleep 0.02; done" }),
        )
        .await;
    assert_eq!(status, 202);
    next_matching(&mut events, |kind, data| {
        kind == "item.delta" && data["delta"].as_str().unwrap().contains("waiting")
    })
    .await;
    (id, events)
}

#[tokio::test]
async fn a_steered_message_joins_the_running_turn_before_its_next_model_call() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let (id, mut events) = blocked_turn(&server, workdir.path()).await;

    let (status, steered) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "change course please" }),
        )
        .await;
    assert_eq!(status, 202);
    assert_eq!(steered["message"]["status"], "waiting");
    assert_eq!(steered["message"]["mode"], "steer");
    std::fs::write(workdir.path().join("go"), "").unwrap();

    let seen = until_turns_ended(&mut events, 1).await;
    assert_eq!(
        of_kind(&seen, "turn.started").len(),
        0,
        "no new turn: the steer joined the running one"
    );
    let started = of_kind(&seen, "item.started");
    let steered_item = started
        .iter()
        .find(|data| data["item"]["id"] == steered["message"]["id"])
        .expect("the steered message appears as an item of the running turn");
    assert_eq!(steered_item["item"]["kind"], "user_message");
    let turn_ended = of_kind(&seen, "turn.ended")[0];
    assert_eq!(steered_item["item"]["turn_id"], turn_ended["turn_id"]);
    assert_eq!(turn_ended["status"], "completed");

    // The model's next call had it: the demo quotes the latest user message.
    let items = items(&server, &id).await;
    let answer = items
        .iter()
        .rev()
        .find(|i| i["kind"] == "agent_message")
        .unwrap();
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("change course please"),
        "{answer}"
    );
    let (_, pending) = server
        .get(&format!("/api/conversations/{id}/pending"))
        .await;
    assert_eq!(pending["pending"], json!([]));
}

#[tokio::test]
async fn a_steer_arriving_after_the_last_model_call_started_becomes_the_next_turn() {
    let server = Server::start().await;
    let (id, created, mut events) = streaming_turn(&server, "slow answer\n/sleep 40").await;
    let (_, late) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "late steer" }),
        )
        .await;
    assert_eq!(late["message"]["status"], "waiting");

    let seen = until_turns_ended(&mut events, 2).await;
    let started = of_kind(&seen, "turn.started");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["message_ids"], json!([late["message"]["id"]]));
    let items = items(&server, &id).await;
    let late_items: Vec<&Value> = items
        .iter()
        .filter(|i| i["id"] == late["message"]["id"])
        .collect();
    assert_eq!(late_items.len(), 1, "read once, never twice");
    assert_ne!(late_items[0]["turn_id"], created["turn_id"]);
}

#[tokio::test]
async fn queued_messages_run_as_successive_turns_in_order() {
    let server = Server::start().await;
    let (_, created) = server
        .post("/api/conversations", json!({ "text": "first\n/sleep 20" }))
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server
        .raw_events(&format!("/api/conversations/{id}/events"), None)
        .await;
    let mut queued = Vec::new();
    for text in ["queued one", "queued two", "queued three"] {
        let (status, body) = server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": text, "mode": "queue" }),
            )
            .await;
        assert_eq!(status, 202);
        assert_eq!(body["message"]["status"], "waiting");
        queued.push(body["message"]["id"].clone());
    }
    let seen = until_turns_ended(&mut events, 4).await;
    let started: Vec<Value> = of_kind(&seen, "turn.started")
        .iter()
        .map(|d| d["message_ids"].clone())
        .collect();
    assert_eq!(
        started,
        queued.iter().map(|id| json!([id])).collect::<Vec<_>>()
    );
    assert!(
        of_kind(&seen, "turn.ended")
            .iter()
            .all(|d| d["status"] == "completed")
    );
    let answers: Vec<String> = items(&server, &id)
        .await
        .iter()
        .filter(|i| i["kind"] == "agent_message")
        .map(|i| i["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(answers.len(), 4);
    for (answer, text) in answers[1..]
        .iter()
        .zip(["queued one", "queued two", "queued three"])
    {
        assert!(answer.contains(text), "{answer} should answer {text}");
    }
}

#[tokio::test]
async fn an_interrupt_keeps_the_partial_text_and_tells_the_next_turn() {
    let server = Server::start().await;
    let (id, _, mut events) = streaming_turn(&server, "long answer\n/sleep 60").await;
    next_matching(&mut events, |kind, _| kind == "item.delta").await;

    let (status, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({ "interrupted": true }));
    let ended = next_matching(&mut events, |kind, _| kind == "turn.ended").await;
    assert_eq!(ended["status"], "interrupted");

    let stored = items(&server, &id).await;
    let partial = stored
        .iter()
        .find(|i| i["kind"] == "agent_message")
        .unwrap();
    assert_eq!(partial["status"], "interrupted");
    let text = partial["text"].as_str().unwrap();
    assert!(
        !text.is_empty() && !text.ends_with("real answers."),
        "partial text kept: {text}"
    );
    let notice = stored
        .iter()
        .find(|i| i["kind"] == "notice")
        .expect("a notice for the model");
    assert!(notice["text"].as_str().unwrap().contains("interrupted"));
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["status"], "idle");

    // Interrupting an idle conversation changes nothing.
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({ "interrupted": false }));
    assert_eq!(items(&server, &id).await, stored);
}

#[tokio::test]
async fn an_interrupt_during_a_shell_command_kills_it_and_its_children() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({
                "text": "/shell sleep 300.25 & echo started; wait",
                "cwd": workdir.path().to_str().unwrap(),
            }),
        )
        .await;
    assert_eq!(status, 201);
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server
        .raw_events(&format!("/api/conversations/{id}/events"), None)
        .await;
    next_matching(&mut events, |kind, data| {
        kind == "item.delta" && data["delta"].as_str().unwrap().contains("started")
    })
    .await;
    // The launcher, the namespace's init, the shell and its background `sleep`.
    let running = crate::harness::pids_running("sleep 300.25");
    assert!(running.len() >= 2, "{running:?}");

    let (_, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(body["interrupted"], true);
    for pid in running {
        assert!(!process_alive(pid), "process {pid} of the command is gone");
    }
    let stored = items(&server, &id).await;
    let tool = stored.iter().find(|i| i["kind"] == "tool_call").unwrap();
    assert_eq!(tool["status"], "interrupted");
    assert!(tool["output"].as_str().unwrap().contains("started"));
}

#[tokio::test]
async fn waiting_messages_can_be_edited_withdrawn_and_promoted() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let (id, mut events) = blocked_turn(&server, workdir.path()).await;
    let mut watcher = server
        .raw_events(&format!("/api/conversations/{id}/events"), None)
        .await;
    let base = format!("/api/conversations/{id}");

    // Edit, then withdraw; a second subscriber sees every change.
    let (_, queued) = server
        .post(
            &format!("{base}/messages"),
            json!({ "text": "draft", "mode": "queue" }),
        )
        .await;
    let message_id = queued["message"]["id"].as_str().unwrap().to_owned();
    let update = next_matching(&mut watcher, |kind, _| kind == "pending.updated").await;
    assert_eq!(update["pending"][0]["text"], "draft");
    let (status, edited) = server
        .patch(
            &format!("{base}/pending/{message_id}"),
            json!({ "text": "final words" }),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["text"], "final words");
    assert_eq!(edited["status"], "waiting");
    let update = next_matching(&mut watcher, |kind, _| kind == "pending.updated").await;
    assert_eq!(update["pending"][0]["text"], "final words");
    let (status, withdrawn) = server.delete(&format!("{base}/pending/{message_id}")).await;
    assert_eq!(status, 200);
    assert_eq!(withdrawn["text"], "final words");
    let update = next_matching(&mut watcher, |kind, _| kind == "pending.updated").await;
    assert_eq!(update["pending"], json!([]));
    let (status, error) = server.delete(&format!("{base}/pending/{message_id}")).await;
    assert_eq!(status, 404, "{error}");

    // Promote a queued message to steer: the running turn takes it.
    let (_, queued) = server
        .post(
            &format!("{base}/messages"),
            json!({ "text": "promoted to steer", "mode": "queue" }),
        )
        .await;
    let steer_id = queued["message"]["id"].as_str().unwrap().to_owned();
    let (status, promoted) = server
        .patch(
            &format!("{base}/pending/{steer_id}"),
            json!({ "mode": "steer" }),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(promoted["mode"], "steer");
    let update = next_matching(&mut watcher, |kind, data| {
        kind == "pending.updated" && data["pending"][0]["mode"] == "steer"
    })
    .await;
    assert_eq!(update["pending"][0]["id"], steer_id.as_str());
    std::fs::write(workdir.path().join("go"), "").unwrap();
    let seen = until_turns_ended(&mut events, 1).await;
    let item = of_kind(&seen, "item.started")
        .into_iter()
        .find(|d| d["item"]["id"] == steer_id.as_str())
        .expect("steered");
    assert_eq!(
        item["item"]["turn_id"],
        of_kind(&seen, "turn.ended")[0]["turn_id"]
    );

    // Once taken, it can no longer be changed.
    let (status, error) = server
        .patch(
            &format!("{base}/pending/{steer_id}"),
            json!({ "text": "too late" }),
        )
        .await;
    assert_eq!(status, 409);
    assert_eq!(error["error"]["code"], "not_waiting");
    let (status, error) = server.delete(&format!("{base}/pending/{steer_id}")).await;
    assert_eq!(status, 409);
    assert_eq!(error["error"]["code"], "not_waiting");

    // Promote a queued message to interrupt: the running turn stops, the message runs next.
    std::fs::remove_file(workdir.path().join("go")).unwrap();
    server
        .post(
            &format!("{base}/messages"),
            json!({ "text": "/shell echo waiting; while [ ! -f go ]; do sleep 0.02; done" }),
        )
        .await;
    next_matching(&mut events, |kind, data| {
        kind == "item.delta" && data["delta"].as_str().unwrap().contains("waiting")
    })
    .await;
    let (_, queued) = server
        .post(
            &format!("{base}/messages"),
            json!({ "text": "cut in", "mode": "queue" }),
        )
        .await;
    let cut_id = queued["message"]["id"].as_str().unwrap().to_owned();
    let (status, _) = server
        .patch(
            &format!("{base}/pending/{cut_id}"),
            json!({ "mode": "interrupt" }),
        )
        .await;
    assert_eq!(status, 200);
    let seen = until_turns_ended(&mut events, 2).await;
    let ended = of_kind(&seen, "turn.ended");
    assert_eq!(ended[0]["status"], "interrupted");
    assert_eq!(ended[1]["status"], "completed");
    assert_eq!(
        of_kind(&seen, "turn.started")[0]["message_ids"],
        json!([cut_id])
    );
}

#[tokio::test]
async fn an_interrupt_mode_message_cuts_in_and_runs_next() {
    let server = Server::start().await;
    let (id, _, mut events) = streaming_turn(&server, "going on and on\n/sleep 60").await;
    let (_, queued) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "queued before", "mode": "queue" }),
        )
        .await;
    let (_, urgent) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "stop, do this", "mode": "interrupt" }),
        )
        .await;
    assert_eq!(urgent["message"]["status"], "waiting");
    let seen = until_turns_ended(&mut events, 3).await;
    let ended: Vec<&Value> = of_kind(&seen, "turn.ended")
        .into_iter()
        .map(|d| &d["status"])
        .collect();
    assert_eq!(ended, vec!["interrupted", "completed", "completed"]);
    let started: Vec<Value> = of_kind(&seen, "turn.started")
        .iter()
        .map(|d| d["message_ids"].clone())
        .collect();
    assert_eq!(
        started,
        vec![
            json!([urgent["message"]["id"]]),
            json!([queued["message"]["id"]])
        ]
    );
}

#[tokio::test]
async fn races_between_edits_and_turn_ends_deliver_every_message_at_most_once() {
    let server = Server::start().await;
    let created = server.create_and_wait("race course").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let base = format!("/api/conversations/{id}");
    let mut outcomes = Vec::new();
    for round in 0..12 {
        // A short turn, and a queued message that is edited and withdrawn while it ends.
        let (status, _) = server
            .post(
                &format!("{base}/messages"),
                json!({ "text": format!("turn {round}\n/sleep 1") }),
            )
            .await;
        assert_eq!(status, 202);
        let (_, queued) = server
            .post(
                &format!("{base}/messages"),
                json!({ "text": format!("queued {round}"), "mode": "queue" }),
            )
            .await;
        let message_id = queued["message"]["id"].as_str().unwrap().to_owned();
        let pending_path = format!("{base}/pending/{message_id}");
        let edit = server.patch(&pending_path, json!({ "text": format!("edited {round}") }));
        let withdraw = async {
            if round % 2 == 0 {
                Some(server.delete(&pending_path).await)
            } else {
                None
            }
        };
        let (edit, withdraw) = tokio::join!(edit, withdraw);
        outcomes.push((
            message_id,
            queued["message"]["status"].clone(),
            edit,
            withdraw,
        ));
        server.wait_idle(&id).await;
    }
    let stored = items(&server, &id).await;
    for (message_id, status, (edit_status, edited), withdraw) in outcomes {
        let copies: Vec<&Value> = stored
            .iter()
            .filter(|i| i["id"] == message_id.as_str())
            .collect();
        assert!(copies.len() <= 1, "{message_id} delivered twice");
        if status == "started" {
            // The agent was already idle: it ran at once and could not be edited.
            assert_eq!(copies.len(), 1);
            assert_eq!(edit_status, 409);
            continue;
        }
        match withdraw {
            Some((200, withdrawn)) => {
                assert!(copies.is_empty(), "withdrawn {message_id} was delivered");
                assert_eq!(withdrawn["id"], message_id.as_str());
            }
            Some((409, _)) | None => {
                assert_eq!(copies.len(), 1, "{message_id} was lost");
                let text = copies[0]["text"].as_str().unwrap();
                match edit_status {
                    200 => assert_eq!(text, edited["text"].as_str().unwrap(), "a 2xx edit is true"),
                    409 => assert!(text.starts_with("queued"), "a refused edit changed nothing"),
                    other => panic!("unexpected edit status {other}: {edited}"),
                }
            }
            Some((other, body)) => panic!("unexpected withdraw status {other}: {body}"),
        }
    }
}

/// A message that waited keeps its idempotency key's answer once the agent takes it: a retry
/// after the conversation left memory gets the same answer, not a second message.
#[tokio::test]
async fn a_retried_message_that_had_to_wait_is_not_sent_twice() {
    let server = Server::start_with(crate::harness::ServerOptions {
        config: Some("[server]\nidle_unload_s = 1\n".to_owned()),
        ..Default::default()
    })
    .await;
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "busy for a moment\n/sleep 300" }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}/messages");
    let sent = [
        (
            "k-queued",
            json!({ "text": "queued while busy", "mode": "queue" }),
        ),
        (
            "k-steered",
            json!({ "text": "steered while busy", "mode": "steer" }),
        ),
    ];
    for (key, body) in &sent {
        let (status, first) = server.post_with_key(&path, body.clone(), key).await;
        assert_eq!(status, 202, "{first}");
        assert_eq!(first["message"]["status"], "waiting", "{first}");
    }
    let mut answers = Vec::new();
    for (key, body) in &sent {
        let (_, answer) = server.post_with_key(&path, body.clone(), key).await;
        answers.push(answer);
        // The same key with another body is refused, not answered.
        let (status, refused) = server
            .post_with_key(&path, json!({ "text": "ignored" }), key)
            .await;
        assert_eq!(status, 422, "{refused}");
    }
    server.wait_idle(&id).await;

    // Wait until the conversation has left memory, then retry both.
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let (_, health) = server.get("/api/health").await;
            if health["live_conversations"] == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the conversation was unloaded");
    for ((key, body), before) in sent.iter().zip(&answers) {
        let (status, again) = server.post_with_key(&path, body.clone(), key).await;
        assert_eq!(status, 202, "{again}");
        assert_eq!(&again, before, "{key}");
    }
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let texts: Vec<&str> = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .map(|item| item["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts.iter().filter(|t| **t == "queued while busy").count(),
        1
    );
    assert_eq!(
        texts.iter().filter(|t| **t == "steered while busy").count(),
        1
    );
    assert!(!texts.contains(&"ignored"), "{texts:?}");
}

/// A stop (`POST …/interrupt`) stops: the messages that wait stay waiting, and the next message
/// from the user sends them, in the order they were sent, before itself.
#[tokio::test]
async fn after_a_stop_waiting_messages_wait_until_the_user_speaks_again() {
    let server = Server::start().await;
    let (id, _, mut events) = streaming_turn(&server, "long answer\n/sleep 60").await;
    let mut waiting = Vec::new();
    for (text, mode) in [("held one", "queue"), ("held two", "queue")] {
        let (status, body) = server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": text, "mode": mode }),
            )
            .await;
        assert_eq!(status, 202);
        assert_eq!(body["message"]["status"], "waiting");
        waiting.push(body["message"]["id"].clone());
    }
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!((status, &body), (200, &json!({ "interrupted": true })));
    next_matching(&mut events, |kind, _| kind == "turn.ended").await;
    // The answer came once the turn had ended: had the waiting messages started a turn, it
    // would be running now.
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["status"], "idle", "{conversation}");
    let pending: Vec<Value> = conversation["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["id"].clone())
        .collect();
    assert_eq!(pending, waiting);

    // The user speaks again: the held messages go first, then the new one.
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "and now this", "mode": "queue" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let seen = until_turns_ended(&mut events, 3).await;
    let started: Vec<Value> = of_kind(&seen, "turn.started")
        .iter()
        .map(|data| data["message_ids"].clone())
        .collect();
    assert_eq!(
        started,
        [
            json!([waiting[0]]),
            json!([waiting[1]]),
            json!([body["message"]["id"]])
        ]
    );
}

/// After a stop, one waiting message is sent now: it starts a turn on its own, the other keeps
/// waiting (still held); sending a message the agent took is 409, one never seen 404. While a
/// turn runs, sending one now makes it join that turn (steer).
#[tokio::test]
async fn a_waiting_message_held_after_a_stop_is_sent_now_on_its_own() {
    let server = Server::start().await;
    let (id, _, mut events) = streaming_turn(&server, "long answer\n/sleep 60").await;
    let mut waiting = Vec::new();
    for text in ["first held", "second held"] {
        let (status, body) = server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": text, "mode": "queue" }),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        waiting.push(body["message"]["id"].as_str().unwrap().to_owned());
    }
    let (status, _) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(status, 200);
    next_matching(&mut events, |kind, _| kind == "turn.ended").await;

    let send = |message_id: &str| format!("/api/conversations/{id}/pending/{message_id}/send");
    let (status, body) = server.post(&send(&waiting[1]), json!({})).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["id"], waiting[1].as_str());
    assert_eq!(body["status"], "started");
    let started = next_matching(&mut events, |kind, _| kind == "turn.started").await;
    assert_eq!(started["message_ids"], json!([waiting[1]]));
    next_matching(&mut events, |kind, _| kind == "turn.ended").await;
    // The other still waits, held: the turn's end did not start it.
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["status"], "idle", "{conversation}");
    assert_eq!(conversation["pending"][0]["id"], waiting[0].as_str());
    assert_eq!(conversation["pending"].as_array().unwrap().len(), 1);

    let (status, body) = server.post(&send(&waiting[1]), json!({})).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (409, json!("not_waiting"))
    );
    let (status, _) = server.post(&send("m_never"), json!({})).await;
    assert_eq!(status, 404);

    // While a turn runs, "send now" steers a queued message into it.
    let (other, _, _events) = streaming_turn(&server, "long answer\n/sleep 60").await;
    let (status, body) = server
        .post(
            &format!("/api/conversations/{other}/messages"),
            json!({ "text": "join in", "mode": "queue" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let queued = body["message"]["id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("/api/conversations/{other}/pending/{queued}/send"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        (body["status"].clone(), body["mode"].clone()),
        (json!("waiting"), json!("steer"))
    );
    server
        .post(&format!("/api/conversations/{other}/interrupt"), json!({}))
        .await;
}
