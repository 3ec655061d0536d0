//! The search index catches up after a crash (invariant 3, the index is derived): a finished
//! message's search row is written moments after the message is stored, so a `kill -9` can
//! come in between. The next start must bring search back to what `reindex` gives.

use std::collections::{BTreeSet, HashSet};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::{Server, TIMEOUT, reindex};

const BURST: usize = 120;

/// What search finds: per conversation, its answer's words (only the agent's message has
/// "said" and the token in one row), and every answered conversation at once.
async fn searches(server: &Server) -> Vec<BTreeSet<String>> {
    let mut found = Vec::new();
    let mut queries: Vec<String> = (0..BURST)
        .map(|n| format!("/api/conversations?archived=all&limit=500&q=said+token{n:03}x"))
        .collect();
    queries.push("/api/conversations?archived=all&limit=500&q=Configure+real".to_owned());
    queries.push("/api/conversations?archived=all&limit=500&q=burst".to_owned());
    for query in queries {
        let (status, page) = server.get(&query).await;
        assert_eq!(status, 200, "{page}");
        found.push(
            page["conversations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_owned())
                .collect(),
        );
    }
    found
}

#[tokio::test]
async fn after_kill_9_right_after_a_burst_search_matches_a_reindex() {
    let server = Server::start().await;
    let mut list = server.events_from("/api/events", None).await;
    let requests = (0..BURST).map(|n| {
        server.post(
            "/api/conversations",
            json!({ "text": format!("burst token{n:03}x") }),
        )
    });
    let mut running: HashSet<String> = HashSet::new();
    for (status, body) in futures::future::join_all(requests).await {
        assert_eq!(status, 201, "{body}");
        running.insert(body["conversation"]["id"].as_str().unwrap().to_owned());
    }
    let ids = running.clone();
    // Every turn has ended (its answer is stored and acknowledged to followers)...
    let ended = tokio::time::timeout(TIMEOUT * 3, async {
        while let Some((kind, data)) = list.next().await {
            let conversation: &Value = &data["conversation"];
            if kind == "conversation.updated" && conversation["status"] == "idle" {
                running.remove(conversation["id"].as_str().unwrap());
                if running.is_empty() {
                    return;
                }
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "turns still running: {}", running.len());
    // ...and the service dies at once, with search rows still queued.
    let data_dir = server.kill9().await;

    let server = Server::start_in(&data_dir).await;
    let recovered = searches(&server).await;
    let data_dir = server.stop().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(data_dir.join(format!("metadata.db{suffix}")));
    }
    let (ok, output) = reindex(&data_dir).await;
    assert!(ok, "{output}");
    let server = Server::start_in(&data_dir).await;
    let rebuilt = searches(&server).await;

    let all: BTreeSet<String> = ids.into_iter().collect();
    assert_eq!(rebuilt[BURST], all, "reindex finds every answer");
    let missed: Vec<usize> = (0..BURST)
        .filter(|n| recovered[*n] != rebuilt[*n])
        .collect();
    assert!(
        missed.is_empty(),
        "after the crash, search missed {} of {BURST} answers (e.g. token{:03}x)",
        missed.len(),
        missed.first().copied().unwrap_or_default()
    );
    assert_eq!(recovered, rebuilt);
}
