//! Bounded resources: live conversations are capped (the least recently
//! used idle ones leave memory first), reading a conversation does not load it, and running
//! out of files or slots answers 503 with `Retry-After`, never a 500 or a refused connection.
//! An error answer means nothing was stored.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::harness::{Server, ServerOptions, TIMEOUT};

async fn live(server: &Server) -> u64 {
    let (_, health) = server.get("/api/health").await;
    health["live_conversations"].as_u64().unwrap()
}

fn id_of(created: &Value) -> String {
    created["conversation"]["id"].as_str().unwrap().to_owned()
}

/// 700 creates under `ulimit -n 256`, 16 at a time: each is answered 201 or 503 with
/// `Retry-After`; no 500, no refused connection. After a restart exactly the conversations
/// answered 201 exist: a 503 stored nothing.
#[tokio::test]
async fn creates_under_a_small_open_file_limit_get_201_or_503_and_503_stores_nothing() {
    let server = Server::start_with(ServerOptions {
        open_files: Some(256),
        ..Default::default()
    })
    .await;
    let mut created = HashSet::new();
    let mut unavailable = 0;
    for batch in 0..(700 / 16 + 1) {
        let requests = (0..16).map(|n| {
            let server = &server;
            async move {
                let response = server
                    .client
                    .post(server.url("/api/conversations"))
                    .json(&json!({ "text": format!("create {batch}-{n}\n/sleep 10") }))
                    .send()
                    .await
                    .expect("the connection was accepted");
                let retry_after = response.headers().get("retry-after").cloned();
                let (status, body) = crate::harness::read(response).await;
                (status, body, retry_after)
            }
        });
        for (status, body, retry_after) in futures::future::join_all(requests).await {
            match status {
                201 => {
                    created.insert(id_of(&body));
                }
                503 => {
                    assert_eq!(body["error"]["code"], "unavailable", "{body}");
                    assert!(retry_after.is_some(), "503 without Retry-After: {body}");
                    unavailable += 1;
                }
                other => panic!("create answered {other}: {body}"),
            }
        }
    }
    assert!(!created.is_empty());
    eprintln!("{} created, {unavailable} answered 503", created.len());

    let data_dir = server.stop().await;
    let server = Server::start_in(&data_dir).await;
    let mut listed = HashSet::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = server
            .get(&format!(
                "/api/conversations?archived=all&limit=500&cursor={cursor}"
            ))
            .await;
        assert_eq!(status, 200, "{page}");
        for conversation in page["conversations"].as_array().unwrap() {
            listed.insert(conversation["id"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(listed, created, "stored conversations differ from the 201s");
    let on_disk = std::fs::read_dir(data_dir.join("conversations"))
        .unwrap()
        .count();
    assert_eq!(on_disk, created.len());
}

/// With a cap of 3 live conversations, ten conversations used one after another never hold
/// more than 3 in memory (the least recently used idle one leaves first), and every one of
/// them still answers.
#[tokio::test]
async fn live_conversations_stay_at_the_cap_least_recently_used_leave_first() {
    let server = Server::start_with(ServerOptions {
        config: Some("[server]\nmax_live_conversations = 3\n".to_owned()),
        ..Default::default()
    })
    .await;
    let mut ids = Vec::new();
    for n in 0..10 {
        let created = server.create_and_wait(&format!("conversation {n}")).await;
        ids.push(id_of(&created));
        assert!(live(&server).await <= 3, "more than 3 live conversations");
    }
    // Sending to the oldest loads it again, in place of an idle one.
    for id in &ids {
        let (status, body) = server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": "again" }),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        server.wait_idle(id).await;
        assert!(live(&server).await <= 3);
    }
    for id in &ids {
        let (status, items) = server.get(&format!("/api/conversations/{id}/items")).await;
        assert_eq!(status, 200);
        assert_eq!(items["items"].as_array().unwrap().len(), 4, "{items}");
    }
}

/// Reading a conversation that is not in memory (its view, items, sessions, usage, waiting
/// messages) answers from the files and the index without loading it, with what the
/// conversation answers once loaded.
#[tokio::test]
async fn reading_a_conversation_does_not_load_it() {
    let server = Server::start().await;
    let created = server.create_and_wait("read me from disk").await;
    let id = id_of(&created);
    let live_items = server.get(&format!("/api/conversations/{id}/items")).await;

    let data_dir = server.stop().await;
    let server = Server::start_in(&data_dir).await;
    assert_eq!(live(&server).await, 0);
    let mut views = Vec::new();
    for _ in 0..3 {
        let (status, view) = server.get(&format!("/api/conversations/{id}")).await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(
            server.get(&format!("/api/conversations/{id}/items")).await,
            live_items
        );
        let (status, sessions) = server
            .get(&format!("/api/conversations/{id}/sessions"))
            .await;
        assert_eq!(status, 200);
        assert_eq!(sessions["sessions"], view["sessions"]);
        let (status, usage) = server.get(&format!("/api/conversations/{id}/usage")).await;
        assert_eq!(status, 200);
        assert_eq!(usage, view["usage"]);
        let (status, pending) = server
            .get(&format!("/api/conversations/{id}/pending"))
            .await;
        assert_eq!((status, pending), (200, json!({ "pending": [] })));
        views.push(view);
    }
    assert_eq!(live(&server).await, 0, "a read loaded the conversation");
    assert!(views.iter().all(|view| view == &views[0]));

    // Loaded (a follower needs the live conversation), it shows the same.
    let mut events = server.events(&id).await;
    let (kind, snapshot) = futures::StreamExt::next(&mut events).await.unwrap();
    assert_eq!(kind, "snapshot");
    assert_eq!(live(&server).await, 1);
    let mut loaded = snapshot["conversation"].clone();
    for field in ["sessions", "pending", "usage", "approvals"] {
        loaded[field] = snapshot[field].clone();
    }
    assert_eq!(loaded, views[0]);

    // Unknown ids are still 404.
    let (status, _) = server.get("/api/conversations/c_missing").await;
    assert_eq!(status, 404);
}

/// When every live slot is taken by a conversation that cannot leave (a client follows it),
/// a request that needs another one is answered 503 with `Retry-After`, and stores nothing.
#[tokio::test]
async fn a_full_cap_of_busy_conversations_answers_503_with_retry_after() {
    let server = Server::start_with(ServerOptions {
        config: Some("[server]\nmax_live_conversations = 2\n".to_owned()),
        ..Default::default()
    })
    .await;
    let first = id_of(&server.create_and_wait("followed one").await);
    let second = id_of(&server.create_and_wait("followed two").await);
    // Followers keep both in memory.
    let _follow_first = server.events(&first).await;
    let _follow_second = server.events(&second).await;
    let before = crate::harness::snapshot_conversations(&server.data_dir);

    let response = server
        .client
        .post(server.url("/api/conversations"))
        .json(&json!({ "text": "no room" }))
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("retry-after").is_some());
    let (status, body) = crate::harness::read(response).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "unavailable");
    assert_eq!(
        crate::harness::snapshot_conversations(&server.data_dir),
        before,
        "a 503 stored something"
    );

    // Once a follower leaves, its conversation can give up its place.
    drop(_follow_second);
    let created = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (status, body) = server
                .post("/api/conversations", json!({ "text": "room now" }))
                .await;
            if status == 201 {
                return body;
            }
            assert_eq!(status, 503, "{body}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a slot did not free up");
    server.wait_idle(&id_of(&created)).await;
}

/// How long any one request of a burst may take to be answered: a request that waits for a
/// place in the registry gives up well before this (503), so this only trips on a hang.
const BURST_ANSWER_BOUND: std::time::Duration = std::time::Duration::from_secs(30);

/// Posts `body` to `path`, and returns the status, the body and whether `Retry-After` came;
/// `None` when no answer came within [`BURST_ANSWER_BOUND`].
async fn post_bounded(server: &Server, path: &str, body: Value) -> Option<(u16, Value, bool)> {
    tokio::time::timeout(BURST_ANSWER_BOUND, async {
        let response = server
            .client
            .post(server.url(path))
            .json(&body)
            .send()
            .await
            .expect("the connection was accepted");
        let retry_after = response.headers().contains_key("retry-after");
        let (status, body) = crate::harness::read(response).await;
        (status, body, retry_after)
    })
    .await
    .ok()
}

/// A burst of creates and messages far past a small cap on live conversations: every request
/// is answered within a bound, 201/202 or 503 with `Retry-After`; none hangs waiting for a
/// place (the registry's wait for a slot used to retry without end while others churned), and
/// the service still answers afterwards.
#[tokio::test]
async fn a_burst_past_a_small_cap_answers_every_request_in_bounded_time() {
    let server = Server::start_with(ServerOptions {
        config: Some("[server]\nmax_live_conversations = 4\n".to_owned()),
        ..Default::default()
    })
    .await;
    let mut ids = Vec::new();
    // Three times as many conversations as places: messages to them load and unload them
    // all the time, while the creates wait for places too.
    for n in 0..12 {
        ids.push(id_of(
            &server.create_and_wait(&format!("resident {n}")).await,
        ));
    }
    let creates = (0..240).map(|n| {
        let server = &server;
        async move {
            let answer = post_bounded(
                server,
                "/api/conversations",
                json!({ "text": format!("burst {n}") }),
            )
            .await;
            (201, answer)
        }
    });
    let sends = (0..240).map(|n| {
        let server = &server;
        let path = format!("/api/conversations/{}/messages", ids[n % ids.len()]);
        async move {
            let answer = post_bounded(server, &path, json!({ "text": format!("more {n}") })).await;
            (202, answer)
        }
    });
    let creates = futures::future::join_all(creates);
    let sends = futures::future::join_all(sends);
    let (creates, sends) = futures::join!(creates, sends);
    let (mut accepted, mut unavailable, mut hung) = (0, 0, 0);
    for (expected, answer) in creates.into_iter().chain(sends) {
        let Some((status, body, retry_after)) = answer else {
            eprintln!("a request expecting {expected} was not answered");
            hung += 1;
            continue;
        };
        if status == expected {
            accepted += 1;
        } else {
            assert_eq!(status, 503, "answered {status}: {body}");
            assert_eq!(body["error"]["code"], "unavailable", "{body}");
            assert!(retry_after, "503 without Retry-After: {body}");
            unavailable += 1;
        }
    }
    eprintln!("{accepted} accepted, {unavailable} answered 503, {hung} unanswered");
    assert_eq!(
        hung, 0,
        "requests were not answered within {BURST_ANSWER_BOUND:?}"
    );
    assert!(accepted > 0, "nothing got through");
    // The service is not left spinning or wedged: a fresh create still gets through.
    let created = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (status, body) = server
                .post("/api/conversations", json!({ "text": "after the burst" }))
                .await;
            if status == 201 {
                return body;
            }
            assert_eq!(status, 503, "{body}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("no create got through after the burst");
    server.wait_idle(&id_of(&created)).await;
}
