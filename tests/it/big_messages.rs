//! A very long message does not hold up the service: its tokens are estimated by its length
//! (past a size, encoding it would cost seconds), and long texts are counted on the blocking
//! pool, so other requests keep being answered while it is created.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Server, TIMEOUT};

/// How long `/api/health` may take while the big create runs. Before the fix the message was
/// encoded on an async worker, about 4.5 s a count (more than one count on the create path);
/// now it answers in milliseconds, but a debug build's own handling of 15 MB of JSON
/// elsewhere on the path can hold a worker for about a second under load.
const HEALTH_BOUND: Duration = Duration::from_secs(3);

// Two workers: the client's own sending of 15 MB must not hold up its health requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_while_a_15_mb_message_is_created() {
    let server = Server::start().await;
    // Encoded before the clock starts: the client's own work is not what is measured.
    let body = serde_json::to_vec(&json!({ "text": "a".repeat(15 * 1024 * 1024) })).unwrap();
    let create = {
        let client = server.client.clone();
        let url = server.url("/api/conversations");
        tokio::spawn(async move {
            let response = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("the create was answered");
            crate::harness::read(response).await
        })
    };
    let mut during = Vec::new();
    let started = Instant::now();
    while !create.is_finished() {
        assert!(started.elapsed() < TIMEOUT, "the create did not finish");
        let asked = Instant::now();
        let (status, health) = tokio::time::timeout(HEALTH_BOUND, server.get("/api/health"))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "/api/health took over {HEALTH_BOUND:?} at {:?} (before: {during:?})",
                    started.elapsed()
                )
            });
        assert_eq!(status, 200, "{health}");
        if !create.is_finished() {
            during.push(asked.elapsed());
        }
    }
    let (status, body) = create.await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert!(
        during.len() >= 2,
        "only {} health answers arrived while the create ran",
        during.len()
    );
    let id = body["conversation"]["id"].as_str().unwrap();
    server.wait_idle(id).await;
}
