//! The search index keeps up with a burst: finished answers are written in batches, one
//! transaction each, from a bounded queue, so an answer is searchable a moment after it is
//! given, not a backlog later; `/api/health` shows the backlog and the age of its oldest job.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::{Server, TIMEOUT};

const CLIENTS: usize = 8;
const PER_CLIENT: usize = 63;

/// How long after its answer the last answer of the burst may take to be found.
const SEARCHABLE_WITHIN: Duration = Duration::from_secs(1);

async fn found(server: &Server, token: &str) -> bool {
    let (status, page) = server
        .get(&format!(
            "/api/conversations?archived=all&limit=10&q=said+{token}"
        ))
        .await;
    assert_eq!(status, 200, "{page}");
    !page["conversations"].as_array().unwrap().is_empty()
}

#[tokio::test]
async fn after_a_burst_of_500_answers_the_last_is_searchable_within_a_second() {
    let server = Server::start().await;
    let mut list = server.events_from("/api/events", None).await;
    let clients = (0..CLIENTS).map(|client| {
        let server = &server;
        async move {
            let mut created = Vec::new();
            for n in 0..PER_CLIENT {
                let token = format!("tok{client}x{n:03}y");
                let (status, body) = server
                    .post(
                        "/api/conversations",
                        json!({ "text": format!("burst {token}") }),
                    )
                    .await;
                assert_eq!(status, 201, "{body}");
                let id = body["conversation"]["id"].as_str().unwrap().to_owned();
                created.push((id, token));
            }
            created
        }
    });
    let tokens: std::collections::HashMap<String, String> = futures::future::join_all(clients)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(tokens.len(), CLIENTS * PER_CLIENT);

    // Every answer is given; the last one to be given, and when.
    let mut running: HashSet<String> = tokens.keys().cloned().collect();
    let last = tokio::time::timeout(TIMEOUT * 3, async {
        while let Some((kind, data)) = list.next().await {
            let conversation: &Value = &data["conversation"];
            if kind == "conversation.updated" && conversation["status"] == "idle" {
                let id = conversation["id"].as_str().unwrap();
                running.remove(id);
                if running.is_empty() {
                    return (id.to_owned(), Instant::now());
                }
            }
        }
        panic!("the list's event stream ended");
    })
    .await
    .expect("turns still running");
    let (last_id, answered_at) = last;
    let (_, health) = server.get("/api/health").await;
    let oldest_job_ms = health["index_oldest_job_ms"].as_u64().unwrap();

    let token = &tokens[&last_id];
    let searchable = tokio::time::timeout(TIMEOUT, async {
        while !found(&server, token).await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        answered_at.elapsed()
    })
    .await
    .expect("the last answer never became searchable");
    eprintln!(
        "the last answer was searchable {searchable:?} after it was given; \
         the oldest index job had waited {oldest_job_ms} ms then"
    );
    assert!(
        searchable <= SEARCHABLE_WITHIN,
        "searchable only {searchable:?} after the answer"
    );
    server.wait_index_settled().await;
    let (_, health) = server.get("/api/health").await;
    assert_eq!(health["index_jobs_pending"], 0, "{health}");
    assert_eq!(health["index_oldest_job_ms"], 0, "{health}");
}
