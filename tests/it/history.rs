//! Fork and rewind: copies of the root history into new conversations, the
//! original untouched byte for byte, crash-safe.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::fake_provider::{Reply, Setup, Wire};
use crate::harness::{Server, TIMEOUT, snapshot_dir};
use crate::support::items;

/// Items without the fields that differ between a source and its copy.
fn comparable(items: &[Value]) -> Vec<Value> {
    items
        .iter()
        .map(|item| {
            let mut item = item.clone();
            item.as_object_mut().unwrap().remove("session_id");
            item
        })
        .collect()
}

#[tokio::test]
async fn a_fork_during_a_turn_copies_finished_turns_and_leaves_the_source_alone() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let (_, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "original plan", "cwd": workdir.path().to_str().unwrap() }),
        )
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    let finished = items(&server, &id).await;

    // A second turn blocks in a tool until the test lets it go.
    let mut events = server.events(&id).await;
    server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "/shell echo waiting; while [ ! -f go ]; do sleep 0.02; done" }),
        )
        .await;
    tokio::time::timeout(TIMEOUT, async {
        while let Some((kind, data)) = events.next().await {
            if kind == "item.delta" && data["delta"].as_str().unwrap().contains("waiting") {
                return;
            }
        }
    })
    .await
    .unwrap();
    let source_files = snapshot_dir(&server.conversation_dir(&id));

    let (status, forked) = server
        .post(&format!("/api/conversations/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{forked}");
    let fork = &forked["conversation"];
    let fork_id = fork["id"].as_str().unwrap();
    assert_ne!(fork_id, id);
    assert_eq!(fork["title"], "original plan (fork)");
    assert_eq!(fork["title_custom"], false);
    assert_eq!(fork["archived"], false);
    assert_eq!(fork["status"], "idle");
    assert_eq!(fork["cwd"], created["conversation"]["cwd"]);
    assert_eq!(fork["agent"], created["conversation"]["agent"]);
    assert_eq!(fork["model"], created["conversation"]["model"]);
    assert_ne!(
        fork["root_session_id"],
        created["conversation"]["root_session_id"]
    );
    assert_eq!(fork["forked_from"]["conversation_id"], id.as_str());
    assert_eq!(
        fork["forked_from"]["item_id"],
        finished.last().unwrap()["id"]
    );

    let copied = items(&server, fork_id).await;
    assert_eq!(
        comparable(&copied),
        comparable(&finished),
        "exactly the finished turn"
    );
    assert!(
        copied
            .iter()
            .all(|item| item["session_id"] == fork["root_session_id"])
    );
    assert_eq!(
        snapshot_dir(&server.conversation_dir(&id)),
        source_files,
        "the source is untouched"
    );
    let (_, pending) = server
        .get(&format!("/api/conversations/{fork_id}/pending"))
        .await;
    assert_eq!(pending["pending"], json!([]));

    // The source's turn goes on undisturbed; the fork lives its own life.
    std::fs::write(workdir.path().join("go"), "").unwrap();
    server.wait_idle(&id).await;
    let (_, source) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(source["status"], "idle");
    assert_eq!(items(&server, &id).await.len(), finished.len() + 3);
    server
        .post(
            &format!("/api/conversations/{fork_id}/messages"),
            json!({ "text": "fork goes on" }),
        )
        .await;
    server.wait_idle(fork_id).await;
    let after = items(&server, fork_id).await;
    assert_eq!(after.len(), finished.len() + 2);
    assert_eq!(after[finished.len()]["seq"], finished.len() as u64 + 1);

    // A fork of the fork, and the list shows all three. Its title does not grow another
    // "(fork)"; it names its own source.
    let (status, again) = server
        .post(&format!("/api/conversations/{fork_id}/fork"), json!({}))
        .await;
    assert_eq!(status, 201);
    assert_eq!(again["conversation"]["title"], "original plan (fork)");
    assert_eq!(
        again["conversation"]["forked_from"]["conversation_id"],
        fork_id
    );
    assert_eq!(
        comparable(&items(&server, again["conversation"]["id"].as_str().unwrap()).await),
        comparable(&after)
    );
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 3);
    // A fork's copied messages become searchable once its background index work is done.
    server.wait_index_settled().await;
    let (_, found) = server.get("/api/conversations?q=fork%20goes").await;
    assert_eq!(
        found["conversations"].as_array().unwrap().len(),
        2,
        "copied messages are searchable"
    );
}

#[tokio::test]
async fn rewind_copies_up_to_a_user_message_and_the_model_continues_from_there() {
    let setup = Setup::start(Wire::OpenaiChat).await;
    let (server, fake, id) = (&setup.server, &setup.fake, setup.id.as_str());
    for n in 2..=4 {
        fake.push(Reply::text(&format!("Answer {n}.")));
        setup.turn(&format!("Question {n}")).await;
    }
    let all = items(server, id).await;
    let users: Vec<&Value> = all.iter().filter(|i| i["kind"] == "user_message").collect();
    assert_eq!(users.len(), 4);
    let third = users[2];
    let source_files = snapshot_dir(&server.conversation_dir(id));

    let (status, rewound) = server
        .post(
            &format!("/api/conversations/{id}/rewind"),
            json!({ "message_id": third["id"] }),
        )
        .await;
    assert_eq!(status, 201, "{rewound}");
    assert_eq!(rewound["text"], "Question 3");
    let new_id = rewound["conversation"]["id"].as_str().unwrap().to_owned();
    let position = all.iter().position(|i| i["id"] == third["id"]).unwrap();
    assert_eq!(
        comparable(&items(server, &new_id).await),
        comparable(&all[..position])
    );
    assert_eq!(
        rewound["conversation"]["forked_from"]["item_id"],
        all[position - 1]["id"]
    );
    assert_eq!(snapshot_dir(&server.conversation_dir(id)), source_files);
    // Search knows the copy holds the 2nd question but not the 3rd or the 4th.
    let found = |q: &'static str| async move {
        let (_, found) = server.get(&format!("/api/conversations?q={q}")).await;
        found["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    server.wait_index_settled().await;
    assert!(found("Question%202").await.contains(&new_id));
    assert!(!found("Question%203").await.contains(&new_id));
    assert!(!found("Question%204").await.contains(&new_id));

    // A new message there: the provider sees the history before the 3rd question, then it.
    fake.push(Reply::text("A different answer."));
    let before = fake.requests().len();
    server
        .post(
            &format!("/api/conversations/{new_id}/messages"),
            json!({ "text": "Question 3, edited" }),
        )
        .await;
    server.wait_idle(&new_id).await;
    let request = &fake.requests()[before].body;
    let contents: Vec<String> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| {
            m["content"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| m["content"].to_string())
        })
        .collect();
    assert_eq!(
        contents,
        vec![
            "Hello",
            "Ready.",
            "Question 2",
            "Answer 2.",
            "Question 3, edited"
        ],
        "{request}"
    );
}

/// A fork's search rows are copied after the answer; what its source says afterwards is not
/// the fork's, however long the copy waits in the queue.
#[tokio::test]
async fn a_fork_is_not_found_by_what_its_source_says_after_it() {
    let server = Server::start().await;
    let created = server.create_and_wait("source of a fork").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let (status, fork) = server
        .post(&format!("/api/conversations/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{fork}");
    let fork_id = fork["conversation"]["id"].as_str().unwrap().to_owned();
    server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "yakwombat after the fork" }),
        )
        .await;
    server.wait_idle(&id).await;
    server.wait_index_settled().await;
    let (_, found) = server.get("/api/conversations?q=yakwombat").await;
    let found: Vec<&str> = found["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(found, [id.as_str()]);
    let (_, found) = server.get("/api/conversations?q=source").await;
    assert_eq!(found["conversations"].as_array().unwrap().len(), 2);
    assert!(
        found["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == fork_id.as_str())
    );
}

#[tokio::test]
async fn rewind_to_the_first_message_or_to_a_bad_id_stores_nothing() {
    let server = Server::start().await;
    let created = server.create_and_wait("the very first").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "second" }),
        )
        .await;
    server.wait_idle(&id).await;
    let all = items(&server, &id).await;
    let before = snapshot_dir(&server.data_dir.join("conversations"));

    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/rewind"),
            json!({ "message_id": created["message"]["id"] }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({ "conversation": null, "text": "the very first" })
    );

    let agent_item = all.iter().find(|i| i["kind"] == "agent_message").unwrap();
    for (bad, status_wanted, code) in [
        (
            json!({ "message_id": agent_item["id"] }),
            400,
            "invalid_request",
        ),
        (json!({ "message_id": "m_missing" }), 404, "not_found"),
        (json!({ "message_id": "x\"y" }), 400, "invalid_request"),
        (json!({}), 400, "invalid_request"),
    ] {
        let (status, error) = server
            .post(&format!("/api/conversations/{id}/rewind"), bad.clone())
            .await;
        assert_eq!(status, status_wanted, "{bad}: {error}");
        assert_eq!(error["error"]["code"], code);
    }
    assert_eq!(snapshot_dir(&server.data_dir.join("conversations")), before);
    let (_, list) = server.get("/api/conversations?archived=all").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn kill_9_during_forks_leaves_no_partial_fork() {
    let server = Server::start().await;
    // A large source: one long message makes every fork copy megabytes.
    let big = format!(
        "big source\n{}",
        "lorem ipsum dolor sit amet ".repeat(200_000)
    );
    let (_, created) = server
        .post("/api/conversations", json!({ "text": big }))
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    let source = items(&server, &id).await;

    let (acknowledged_sender, mut acknowledged) = tokio::sync::mpsc::unbounded_channel::<String>();
    let client = server.client.clone();
    let url = server.url(&format!("/api/conversations/{id}/fork"));
    let forks = tokio::spawn(async move {
        loop {
            let Ok(response) = client.post(&url).json(&json!({})).send().await else {
                return;
            };
            if response.status() != 201 {
                return;
            }
            let Ok(body) = response.json::<Value>().await else {
                return;
            };
            let _ =
                acknowledged_sender.send(body["conversation"]["id"].as_str().unwrap().to_owned());
        }
    });
    let mut acked = Vec::new();
    for _ in 0..3 {
        acked.push(
            tokio::time::timeout(TIMEOUT, acknowledged.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let data_dir = server.kill9().await;
    let _ = forks.await;
    while let Ok(id) = acknowledged.try_recv() {
        acked.push(id);
    }

    let server = Server::start_in(&data_dir).await;
    let (_, list) = server
        .get("/api/conversations?archived=all&limit=500")
        .await;
    let listed: Vec<String> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    for fork in &acked {
        assert!(listed.contains(fork), "acknowledged fork {fork} is missing");
    }
    for conversation in listed.iter().filter(|c| **c != id) {
        assert_eq!(
            comparable(&items(&server, conversation).await),
            comparable(&source),
            "{conversation} is whole"
        );
    }
    let leftovers = std::fs::read_dir(data_dir.join("tmp")).unwrap().count();
    assert_eq!(leftovers, 0, "half-built forks are cleaned up");
}
