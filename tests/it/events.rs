//! Live events (invariant 5, same view for every client): every client sees the same events in
//! the same order, a client joining mid-turn gets the partial state first, a reconnecting
//! client gets exactly what it missed, and a client leaving stops nothing.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::{Server, TIMEOUT};
use crate::support::{events_until, until, until_turn_end};

type Events = Vec<(String, String, Value)>;

fn deltas_of(events: &Events, item_id: &str, field: &str) -> String {
    events
        .iter()
        .filter(|(_, kind, data)| {
            kind == "item.delta" && data["item_id"] == item_id && data["field"] == field
        })
        .map(|(_, _, data)| data["delta"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn two_subscribers_see_identical_events_including_live_tool_output() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let cwd = workdir.path().to_str().unwrap().to_owned();
    let (status, created) = server
        .post("/api/conversations", json!({ "text": "hello", "cwd": cwd }))
        .await;
    assert_eq!(status, 201);
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;

    let path = format!("/api/conversations/{id}/events");
    let mut first = server.raw_events(&path, None).await;
    let mut second = server.raw_events(&path, None).await;
    // Both start with a snapshot of the idle conversation.
    for stream in [&mut first, &mut second] {
        let (_, kind, snapshot) = stream.next().await.unwrap();
        assert_eq!(kind, "snapshot");
        assert_eq!(snapshot["conversation"]["status"], "idle");
        assert_eq!(snapshot["running"], json!([]));
    }

    // The command prints, then waits for the test's signal: its output must arrive live.
    let command = "echo first-line; while [ ! -f go ]; do sleep 0.02; done; echo second-line";
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": format!("/shell {command}") }),
        )
        .await;
    assert_eq!(status, 202);
    let mut seen = Vec::new();
    for stream in [&mut first, &mut second] {
        seen.push(
            until(stream, |kind, data| {
                kind == "item.delta"
                    && data["field"] == "output"
                    && data["delta"].as_str().unwrap().contains("first-line")
            })
            .await,
        );
    }
    std::fs::write(workdir.path().join("go"), "").unwrap();
    for (stream, events) in [&mut first, &mut second].into_iter().zip(seen.iter_mut()) {
        events.extend(until_turn_end(stream).await);
    }
    assert_eq!(
        seen[0], seen[1],
        "both subscribers saw the same events in the same order"
    );
    let events = &seen[0];
    let (_, _, ended) = events.last().unwrap();
    assert_eq!(ended["status"], "completed");

    // What was streamed is what was stored.
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let items = items["items"].as_array().unwrap();
    let tool = items
        .iter()
        .find(|item| item["kind"] == "tool_call")
        .expect("a tool call");
    assert_eq!(tool["name"], "shell");
    assert_eq!(tool["status"], "completed");
    assert_eq!(tool["exit_code"], 0);
    let output = tool["output"].as_str().unwrap();
    assert_eq!(output, "first-line\nsecond-line\n");
    assert_eq!(
        deltas_of(events, tool["id"].as_str().unwrap(), "output"),
        output
    );
    let answer = items
        .iter()
        .rev()
        .find(|item| item["kind"] == "agent_message")
        .unwrap();
    assert_eq!(
        deltas_of(events, answer["id"].as_str().unwrap(), "text"),
        answer["text"].as_str().unwrap()
    );
    let completed: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, _)| kind == "item.completed")
        .map(|(_, _, data)| &data["item"])
        .collect();
    for item in completed {
        let stored = items
            .iter()
            .find(|stored| stored["id"] == item["id"])
            .expect("stored");
        assert_eq!(stored, item);
    }
    // Event ids increase.
    let ids: Vec<(u64, u64)> = events
        .iter()
        .map(|(id, _, _)| {
            let (epoch, n) = id.split_once('-').unwrap();
            (epoch.parse().unwrap(), n.parse().unwrap())
        })
        .collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
}

#[tokio::test]
async fn a_client_joining_mid_turn_gets_the_partial_text_then_live_events() {
    let server = Server::start().await;
    let (_, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "stream this slowly please\n/sleep 60" }),
        )
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}/events");
    let mut early = server.raw_events(&path, None).await;
    until(&mut early, |kind, _| kind == "item.delta").await;
    until(&mut early, |kind, _| kind == "item.delta").await;

    let mut late = server.raw_events(&path, None).await;
    let (_, kind, snapshot) = late.next().await.unwrap();
    assert_eq!(kind, "snapshot");
    assert_eq!(snapshot["conversation"]["status"], "running");
    let running = &snapshot["running"][0];
    let answer = running["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["kind"] == "agent_message")
        .expect("the answer in progress");
    let partial = answer["text"].as_str().unwrap().to_owned();
    assert!(!partial.is_empty(), "the snapshot carries the text so far");
    // The running turn starts with the message it answers.
    let first = &running["items"][0];
    assert_eq!(first["kind"], "user_message", "{running}");
    assert_eq!(first["text"], "stream this slowly please\n/sleep 60");
    assert_eq!(first["turn_id"], running["turn_id"]);
    let answer_id = answer["id"].as_str().unwrap().to_owned();
    // `last_seq` is the last stored item: the answer streaming now is not stored yet.
    let session_id = running["session_id"].as_str().unwrap();
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let stored_last = items["items"].as_array().unwrap().last().unwrap()["seq"].clone();
    assert_eq!(snapshot["last_seq"][session_id], stored_last, "{snapshot}");
    assert!(answer["seq"].as_u64() > stored_last.as_u64());

    let rest = until_turn_end(&mut late).await;
    let text = format!("{partial}{}", deltas_of(&rest, &answer_id, "text"));
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let stored = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == answer_id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        stored["text"].as_str().unwrap(),
        text,
        "snapshot + live deltas = the whole answer"
    );
}

#[tokio::test]
async fn a_reconnect_with_last_event_id_gets_exactly_the_missed_events() {
    let server = Server::start().await;
    let (_, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "reconnect test\n/sleep 40" }),
        )
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}/events");
    let mut witness = server.raw_events(&path, None).await;
    let mut leaving = server.raw_events(&path, None).await;
    witness.next().await.unwrap(); // snapshot
    leaving.next().await.unwrap();

    let before = until(&mut leaving, |kind, _| kind == "item.delta").await;
    let last_seen = before.last().unwrap().0.clone();
    drop(leaving);

    let all = until_turn_end(&mut witness).await;
    let mut resumed = server.raw_events(&path, Some(&last_seen)).await;
    let replayed = until_turn_end(&mut resumed).await;
    let position = all.iter().position(|(id, _, _)| *id == last_seen).unwrap();
    assert_eq!(
        replayed,
        all[position + 1..].to_vec(),
        "exactly the missed events, no duplicates"
    );

    // An unknown id gets a fresh snapshot instead.
    let mut unknown = server.raw_events(&path, Some("1-999999")).await;
    let (_, kind, snapshot) = unknown.next().await.unwrap();
    assert_eq!(kind, "snapshot");
    assert_eq!(snapshot["conversation"]["status"], "idle");
}

#[tokio::test]
async fn a_leaving_client_stops_nothing() {
    let server = Server::start().await;
    let (_, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "keep going without me\n/sleep 20" }),
        )
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}/events");
    let mut stream = server.raw_events(&path, None).await;
    until(&mut stream, |kind, _| kind == "item.delta").await;
    drop(stream);

    // Nobody is subscribed now; follow the list-level stream to see the turn end.
    let mut list = server.raw_events("/api/events", None).await;
    let (_, kind, snapshot) = list.next().await.unwrap();
    assert_eq!(kind, "snapshot");
    let listed = snapshot["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id.as_str())
        .cloned();
    let already_idle = listed.is_some_and(|c| c["status"] == "idle");
    tokio::time::timeout(TIMEOUT, async {
        if already_idle {
            return;
        }
        loop {
            let (_, kind, data) = list.next().await.unwrap();
            if kind == "conversation.updated"
                && data["conversation"]["id"] == id.as_str()
                && data["conversation"]["status"] == "idle"
            {
                return;
            }
        }
    })
    .await
    .expect("the turn completed without subscribers");
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let answer = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "agent_message")
        .cloned()
        .unwrap();
    assert_eq!(answer["status"], "completed");
}

/// Switching the model changes the context window the meter measures against: every client is
/// told at once, not at the next model call.
#[tokio::test]
async fn a_model_switch_tells_clients_the_new_context_window() {
    use crate::fake_provider::{Setup, Wire};
    let setup = Setup::start(Wire::OpenaiChat).await;
    let path = format!("/api/conversations/{}", setup.id);
    let (_, before) = setup.server.get(&format!("{path}/usage")).await;
    let mut events = setup.server.events(&setup.id).await;
    let (status, patched) = setup.server.patch(&path, json!({ "model": "demo" })).await;
    assert_eq!(status, 200, "{patched}");
    let seen = events_until(&mut events, "usage.updated").await;
    let (_, usage) = seen.last().unwrap();
    let (_, after) = setup.server.get(&format!("{path}/usage")).await;
    assert_ne!(after["context_window"], before["context_window"]);
    assert_eq!(
        usage["usage"]["context_window"], after["context_window"],
        "{usage}"
    );
}

/// A client that subscribes right after creating a conversation and replays its stream from
/// the first event gets the creation's turn from its start: `turn.started` with the first
/// message, that message's item, then the answer.
#[tokio::test]
async fn a_new_conversations_stream_replayed_from_its_first_event_begins_with_its_turn() {
    let server = Server::start().await;
    let (status, created) = server
        .post("/api/conversations", json!({ "text": "hello\n/sleep 300" }))
        .await;
    assert_eq!(status, 201);
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let message_id = created["message"]["id"].clone();
    let path = format!("/api/conversations/{id}/events");
    let mut live = server.raw_events(&path, None).await;
    let (snapshot_id, kind, _) = live.next().await.unwrap();
    assert_eq!(kind, "snapshot");
    let epoch = snapshot_id.rsplit_once('-').unwrap().0.to_owned();
    let mut replay = server.raw_events(&path, Some(&format!("{epoch}-0"))).await;
    let seen = until(&mut replay, |kind, _| kind == "turn.started").await;
    let turn_started = &seen.last().unwrap().2;
    assert_eq!(
        turn_started["message_ids"],
        json!([message_id]),
        "{turn_started}"
    );
    let (_, kind, data) = replay.next().await.unwrap();
    assert_eq!(kind, "item.started", "{data}");
    assert_eq!(data["item"]["id"], message_id, "{data}");
    until(&mut replay, |kind, data| {
        kind == "item.started" && data["item"]["kind"] == "agent_message"
    })
    .await;
}
