//! Crash safety (invariant 4, crash-safe): `kill -9` during a burst of writes loses nothing
//! that was acknowledged, and turns cut by the crash are closed as `interrupted` at the next
//! start.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::json;

use crate::harness::{Server, TIMEOUT};

#[derive(Default)]
struct Acknowledged {
    conversations: Vec<String>,
    /// (conversation id, message id) of messages that started a turn (stored, not waiting).
    messages: Vec<(String, String)>,
}

#[tokio::test]
async fn kill_9_during_a_burst_loses_nothing_acknowledged() {
    let server = Server::start().await;
    let acknowledged = Arc::new(Mutex::new(Acknowledged::default()));
    let (enough_sender, mut enough) = tokio::sync::mpsc::channel::<()>(64);
    let mut workers = Vec::new();
    for worker in 0..4 {
        let client = server.client.clone();
        let base = server.base.clone();
        let acknowledged = acknowledged.clone();
        let enough_sender = enough_sender.clone();
        workers.push(tokio::spawn(async move {
            for n in 0.. {
                let created = client
                    .post(format!("{base}/api/conversations"))
                    .json(&json!({ "text": format!("worker {worker} conversation {n}\n/sleep 5") }))
                    .send()
                    .await;
                let Ok(response) = created else { return };
                if response.status() != 201 {
                    return;
                }
                let Ok(body) = response.json::<serde_json::Value>().await else {
                    return;
                };
                let id = body["conversation"]["id"].as_str().unwrap().to_owned();
                acknowledged.lock().unwrap().conversations.push(id.clone());
                let sent = client
                    .post(format!("{base}/api/conversations/{id}/messages"))
                    .json(&json!({ "text": format!("follow-up {n}"), "mode": "queue" }))
                    .send()
                    .await;
                let Ok(response) = sent else { return };
                if response.status() != 202 {
                    return;
                }
                let Ok(body) = response.json::<serde_json::Value>().await else {
                    return;
                };
                if body["message"]["status"] == "started" {
                    let message_id = body["message"]["id"].as_str().unwrap().to_owned();
                    acknowledged.lock().unwrap().messages.push((id, message_id));
                }
                let _ = enough_sender.send(()).await;
            }
        }));
    }
    // Crash once the burst is well under way.
    for _ in 0..24 {
        tokio::time::timeout(TIMEOUT, enough.recv())
            .await
            .expect("burst progress");
    }
    let data_dir = server.kill9().await;
    for worker in workers {
        let _ = worker.await;
    }
    let acknowledged = std::mem::take(&mut *acknowledged.lock().unwrap());
    assert!(acknowledged.conversations.len() >= 24);

    let server = Server::start_in(&data_dir).await;
    let (_, list) = server
        .get("/api/conversations?archived=all&limit=500")
        .await;
    let listed: Vec<&str> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for id in &acknowledged.conversations {
        assert!(
            listed.contains(&id.as_str()),
            "acknowledged conversation {id} is missing"
        );
        let (status, conversation) = server.get(&format!("/api/conversations/{id}")).await;
        assert_eq!(status, 200);
        assert_eq!(
            conversation["status"], "idle",
            "turns cut by the crash are closed"
        );
    }
    for (id, message_id) in &acknowledged.messages {
        let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
        let found = items["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|item| item["id"] == message_id.as_str());
        assert!(
            found,
            "acknowledged message {message_id} of {id} is missing"
        );
    }
    // Every listed conversation can be opened, and none is listed twice.
    let mut unique = listed.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), listed.len());
}

/// Many conversations at once, each created and answered (the demo model answers at once), so
/// that their fsyncs overlap: a conversation the list reported idle again had its turn's end
/// acknowledged, so after `kill -9` its answer and the end of its turn are still there.
#[tokio::test]
async fn kill_9_during_concurrent_exchanges_loses_no_finished_turn() {
    let server = Server::start().await;
    let mut list = server.events_from("/api/events", None).await;
    let mut workers = Vec::new();
    for worker in 0..8 {
        let client = server.client.clone();
        let base = server.base.clone();
        workers.push(tokio::spawn(async move {
            for n in 0.. {
                let created = client
                    .post(format!("{base}/api/conversations"))
                    .json(&json!({ "text": format!("worker {worker} exchange {n}") }))
                    .send()
                    .await;
                if !created.is_ok_and(|response| response.status() == 201) {
                    return;
                }
            }
        }));
    }
    // Conversations whose first turn ended: the list says so only after the end was stored.
    let mut finished: Vec<String> = Vec::new();
    let enough = tokio::time::timeout(TIMEOUT, async {
        while let Some((kind, data)) = list.next().await {
            if kind == "conversation.updated" && data["conversation"]["status"] == "idle" {
                let id = data["conversation"]["id"].as_str().unwrap().to_owned();
                if !finished.contains(&id) {
                    finished.push(id);
                }
                if finished.len() >= 40 {
                    return;
                }
            }
        }
    })
    .await;
    assert!(
        enough.is_ok(),
        "only {} exchanges ended in time",
        finished.len()
    );
    let data_dir = server.kill9().await;
    for worker in workers {
        let _ = worker.await;
    }

    let server = Server::start_in(&data_dir).await;
    for id in &finished {
        let (status, conversation) = server.get(&format!("/api/conversations/{id}")).await;
        assert_eq!(status, 200, "finished conversation {id} is missing");
        assert_eq!(conversation["status"], "idle");
        let items = crate::support::items(&server, id).await;
        let kinds: Vec<&str> = items
            .iter()
            .map(|item| item["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds[0], "user_message", "{id}: {kinds:?}");
        assert!(
            kinds.contains(&"agent_message") && !kinds.contains(&"notice"),
            "{id}: the answer of a finished turn is stored and the turn was not cut: {kinds:?}"
        );
    }
}

#[tokio::test]
async fn a_turn_cut_by_a_crash_is_interrupted_with_a_notice() {
    let server = Server::start().await;
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "long one\n/sleep 200" }),
        )
        .await;
    assert_eq!(status, 201);
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    // Wait until the answer is streaming, then crash.
    let mut events = server.events(&id).await;
    tokio::time::timeout(TIMEOUT, async {
        use futures::StreamExt;
        while let Some((kind, _)) = events.next().await {
            if kind == "item.delta" {
                return;
            }
        }
    })
    .await
    .expect("streaming started");
    let data_dir = server.kill9().await;

    let server = Server::start_in(&data_dir).await;
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["status"], "idle");
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let items = items["items"].as_array().unwrap();
    assert_eq!(items[0]["kind"], "user_message");
    let notice = items
        .iter()
        .find(|item| item["kind"] == "notice")
        .expect("a notice");
    assert!(notice["text"].as_str().unwrap().contains("interrupted"));

    // The conversation goes on normally afterwards.
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "still there?" }),
        )
        .await;
    assert_eq!(status, 202);
    server.wait_idle(&id).await;
}

/// A message is accepted in two writes: its `message.accepted` record (with the answer kept
/// for its idempotency key) in `metadata.jsonl`, then its item in the session's history. A crash
/// between them must not leave an "accepted" message that is nowhere in the history.
#[tokio::test]
async fn a_message_accepted_just_before_a_crash_is_in_the_history_after_it() {
    let server = Server::start().await;
    let created = server.create_and_wait("first").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    let session_id = conversation["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/conversations/{id}/messages");
    let body = json!({ "text": "second\n/sleep 200" });
    let (status, answer) = server.post_with_key(&path, body.clone(), "k-2").await;
    assert_eq!(status, 202, "{answer}");
    let message_id = answer["message"]["id"].as_str().unwrap().to_owned();
    let history_file = server
        .conversation_dir(&id)
        .join(format!("{session_id}.jsonl"));
    let data_dir = server.kill9().await;

    // Put the files in the state a crash between the two writes leaves: the message's item,
    // the last line of the history, was never written.
    let history = std::fs::read_to_string(&history_file).unwrap();
    let mut lines: Vec<&str> = history.lines().collect();
    let last = lines.pop().expect("a history");
    assert!(
        last.contains(&message_id),
        "the message's item is last: {last}"
    );
    std::fs::write(&history_file, lines.join("\n") + "\n").unwrap();

    let server = Server::start_in(&data_dir).await;
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let items = items["items"].as_array().unwrap().clone();
    let user_messages = |items: &[serde_json::Value]| -> Vec<String> {
        items
            .iter()
            .filter(|item| item["kind"] == "user_message")
            .map(|item| item["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(user_messages(&items)[1..], [message_id.as_str()]);
    let restored = items
        .iter()
        .position(|item| item["id"] == message_id.as_str())
        .unwrap();
    assert_eq!(items[restored]["text"], "second\n/sleep 200");
    assert!(
        items[restored + 1..]
            .iter()
            .any(|item| item["kind"] == "notice"),
        "the interrupted turn's notice follows the message: {items:?}"
    );
    let seqs: Vec<u64> = items
        .iter()
        .map(|item| item["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");

    // The client never got its answer and retries: the same message, not a second one.
    let (status, again) = server.post_with_key(&path, body, "k-2").await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again["message"]["id"], message_id.as_str());
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let items = items["items"].as_array().unwrap();
    assert_eq!(user_messages(items)[1..], [message_id.as_str()]);
}

/// While the index cannot be written (another process holds its write lock longer than the
/// service waits for it), a new conversation is still stored and runs, a retry of its request
/// gets the same answer, and the next start, even after a clean stop, re-indexes it whole.
#[tokio::test]
async fn a_conversation_created_while_the_index_is_locked_runs_and_is_listed_after_a_restart() {
    use sqlx::Connection as _;
    let server = Server::start().await;
    let db = server.data_dir.join("metadata.db");
    let mut holder = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .unwrap();
    let body = json!({ "text": "made while the index is locked" });
    let (status, created) = server
        .post_with_key("/api/conversations", body.clone(), "k-locked")
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let (status, again) = server
        .post_with_key("/api/conversations", body, "k-locked")
        .await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again, created, "the retry gets the first answer");
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    holder.close().await.unwrap();
    server.wait_idle(&id).await;

    let data_dir = server.stop().await;
    let server = Server::start_in(&data_dir).await;
    let (_, list) = server.get("/api/conversations").await;
    let ids: Vec<&str> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id.as_str()]);
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    assert_eq!(
        items["items"][1]["kind"], "agent_message",
        "the turn ran: {items}"
    );
    // What the failed write left out (the key's answer, the message's search row) is back,
    // although later writes had already brought the conversation's row up to date.
    let (status, retried) = server
        .post_with_key(
            "/api/conversations",
            json!({ "text": "made while the index is locked" }),
            "k-locked",
        )
        .await;
    assert_eq!(status, 201, "{retried}");
    assert_eq!(
        retried["conversation"]["id"],
        id.as_str(),
        "no second conversation"
    );
    let (_, found) = server.get("/api/conversations?q=locked").await;
    assert_eq!(found["conversations"][0]["id"], id.as_str(), "{found}");
}

/// A shell command's output streams to clients before it is stored; a crash in the middle of
/// the command must not take back what they were shown.
#[tokio::test]
async fn the_output_a_tool_streamed_before_a_crash_is_kept_marked_as_cut() {
    use crate::fake_provider::{FakeProvider, Reply, Wire};
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let server =
        crate::checkpoints::start(&fake, Some(&data.path().join("data")), Vec::new()).await;
    fake.push(crate::checkpoints::shell(
        "echo first line; printf 'second line'; sleep 30",
    ));
    fake.push(Reply::text("Done."));
    let work = tempfile::tempdir().unwrap();
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "run it", "cwd": work.path().to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server.events(&id).await;
    let mut shown = String::new();
    crate::support::until(&mut events, |kind, data| {
        if kind == "item.delta" && data["field"] == "output" {
            shown.push_str(data["delta"].as_str().unwrap());
        }
        shown.contains("second line")
    })
    .await;
    let data_dir = server.kill9().await;

    let server = Server::start_in(&data_dir).await;
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let call = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["kind"] == "tool_call")
        .expect("the tool call")
        .clone();
    assert_eq!(call["status"], "interrupted", "{call}");
    assert_eq!(
        call["output"], "first line\nsecond line\n[output cut short: the service stopped]",
        "{call}"
    );
    // A reindex reads the same.
    let data_dir = server.stop().await;
    let (ok, output) = crate::harness::reindex(&data_dir).await;
    assert!(ok, "{output}");
    let server = Server::start_in(&data_dir).await;
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let again = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["kind"] == "tool_call")
        .cloned()
        .unwrap();
    assert_eq!(again["output"], call["output"]);
}
