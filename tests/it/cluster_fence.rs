//! Cluster mode under faults placed at precise moments: an owner frozen between the lease
//! check and its write, the database's clock stepping past a lease, a delete queued on a
//! paused owner. A lease alone let the stale owner write (or delete) after another instance
//! took the conversation; the fence makes such a write refused and never read.
//!
//! The pause is a test hook: `OPENVAALA_TEST_STOP_AT=<point>:<text>` makes the instance stop
//! itself (SIGSTOP) at that point, and the test resumes it (SIGCONT).

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use crate::cluster::{LEASE_MS, cluster_config, create};
use crate::harness::{Server, ServerOptions, TIMEOUT, signal};
use openvaala::testkit::postgres::Postgres;

/// An instance of the cluster, stopping itself at `stop_at` if given.
async fn instance(postgres: &Postgres, data_dir: &std::path::Path, stop_at: &str) -> Server {
    let env = if stop_at.is_empty() {
        Vec::new()
    } else {
        vec![("OPENVAALA_TEST_STOP_AT".to_owned(), stop_at.to_owned())]
    };
    Server::start_with(ServerOptions {
        data_dir: Some(data_dir.to_owned()),
        config: Some(cluster_config(postgres)),
        env,
        ..ServerOptions::default()
    })
    .await
}

fn pid(server: &Server) -> i32 {
    server.child.id().expect("running") as i32
}

/// Waits until the process has stopped itself (state `T` in /proc).
async fn wait_stopped(pid: i32) {
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let state = stat.rsplit(") ").next().unwrap().chars().next().unwrap();
            if state == 'T' {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the instance never reached the point it was to stop at");
}

/// Sends a request in the background (the instance it goes to is about to freeze): its
/// status, or the transport error if the instance died first.
fn in_background(
    request: reqwest::RequestBuilder,
) -> tokio::task::JoinHandle<Result<u16, reqwest::Error>> {
    tokio::spawn(async move {
        request
            .send()
            .await
            .map(|response| response.status().as_u16())
    })
}

fn resume(pid: i32) {
    // SAFETY: kill(2) on our own child's pid with a valid signal.
    unsafe {
        libc::kill(pid, libc::SIGCONT);
    }
}

/// Waits until PostgreSQL says the lease of `id` has expired (what lets another instance in).
async fn wait_lease_expired(pool: &sqlx::PgPool, id: &str) {
    tokio::time::timeout(Duration::from_millis(LEASE_MS * 5), async {
        loop {
            let expired: bool = sqlx::query_scalar(
                "SELECT expires_at < now() FROM leases WHERE conversation_id = $1",
            )
            .bind(id)
            .fetch_one(pool)
            .await
            .unwrap();
            if expired {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the frozen owner's lease never expired");
}

async fn pool(postgres: &Postgres) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&postgres.url())
        .await
        .unwrap()
}

/// Sends until the answer is not 503: while ownership moves (a takeover, a lease noticed lost)
/// the service answers 503 with `Retry-After`, and a client retries.
async fn settled<F, Fut>(mut send: F) -> (u16, serde_json::Value)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = (u16, serde_json::Value)>,
{
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let (status, body) = send().await;
            if status != 503 {
                return (status, body);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the service kept answering 503")
}

async fn title(server: &Server, id: &str) -> String {
    let path = format!("/api/conversations/{id}");
    let (status, body) = settled(|| server.get(&path)).await;
    assert_eq!(status, 200, "{body}");
    body["title"].as_str().unwrap().to_owned()
}

/// Two instances over one database and data directory, and a conversation A made and owns.
struct Pair {
    postgres: Postgres,
    pool: sqlx::PgPool,
    data: std::path::PathBuf,
    a: Server,
    b: Server,
    id: String,
    _dir: tempfile::TempDir,
}

/// A stops itself at `stop_at` (see `instance`); B never does.
async fn pair(stop_at: &str) -> Pair {
    let postgres = Postgres::start();
    let pool = pool(&postgres).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let a = instance(&postgres, &data, stop_at).await;
    let b = instance(&postgres, &data, "").await;
    let id = create(&a, "Hello").await;
    a.wait_idle(&id).await;
    Pair {
        postgres,
        pool,
        data,
        a,
        b,
        id,
        _dir: dir,
    }
}

#[tokio::test]
async fn an_owner_frozen_before_its_write_cannot_write_after_a_takeover() {
    let Pair {
        postgres,
        pool,
        data,
        a,
        b,
        id,
        _dir,
    } = pair("append:stale title A").await;

    // A checks its lease, then freezes before the write (a VM pause, a blocked NFS write).
    let stale = in_background(
        a.client
            .patch(a.url(&format!("/api/conversations/{id}")))
            .json(&json!({ "title": "stale title A" })),
    );
    wait_stopped(pid(&a)).await;
    wait_lease_expired(&pool, &id).await;
    let path = format!("/api/conversations/{id}");
    let (status, body) = settled(|| b.patch(&path, json!({ "title": "variant A" }))).await;
    assert_eq!(status, 200, "{body}");

    // A wakes and writes its line: the write is refused (503), not acknowledged.
    resume(pid(&a));
    let status = tokio::time::timeout(TIMEOUT, stale)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(status, 503, "the stale owner's write was acknowledged");
    let metadata = std::fs::read_to_string(b.conversation_dir(&id).join("metadata.jsonl")).unwrap();
    assert!(
        metadata.contains("stale title A"),
        "the stale line is in the file: {metadata}"
    );
    for server in [&a, &b] {
        assert_eq!(title(server, &id).await, "variant A");
    }
    // The stale line is never read: not by a restarted cluster either.
    b.terminate().await;
    a.terminate().await;
    let fresh = instance(&postgres, &data, "").await;
    assert_eq!(title(&fresh, &id).await, "variant A");
    let (status, body) = fresh
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "still writable" }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    fresh.wait_idle(&id).await;
    assert_eq!(title(&fresh, &id).await, "variant A");
}

#[tokio::test]
async fn a_step_of_the_database_clock_cannot_make_two_owners_write() {
    let Pair {
        postgres,
        pool,
        data,
        a,
        b,
        id,
        _dir,
    } = pair("").await;
    // The database's clock steps forward past the lease: for PostgreSQL it has expired,
    // while A, by its own clock, still holds it.
    sqlx::query(
        "UPDATE leases SET expires_at = now() - interval '1 second' WHERE conversation_id = $1",
    )
    .bind(&id)
    .execute(&pool)
    .await
    .unwrap();
    let path = format!("/api/conversations/{id}");
    let (status, body) = settled(|| b.patch(&path, json!({ "title": "from B" }))).await;
    assert_eq!(status, 200, "{body}");
    // A writes as the owner it believes it is. Unless its renewal noticed the loss first
    // (then the write goes to B), it is refused, with Retry-After: never stored by A.
    let response = a
        .client
        .patch(a.url(&format!("/api/conversations/{id}")))
        .json(&json!({ "title": "from A" }))
        .send()
        .await
        .unwrap();
    let expected = match response.status().as_u16() {
        200 => "from A",
        503 => {
            assert!(response.headers().contains_key("retry-after"));
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "unavailable", "{body}");
            "from B"
        }
        status => panic!("A answered {status}"),
    };
    for server in [&a, &b] {
        assert_eq!(title(server, &id).await, expected);
    }
    // What was acknowledged is what the files say, for a cluster started afresh.
    b.terminate().await;
    a.terminate().await;
    let fresh = instance(&postgres, &data, "").await;
    assert_eq!(title(&fresh, &id).await, expected);
    let (status, body) = fresh
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "title": "after" }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(title(&fresh, &id).await, "after");
}

#[tokio::test]
async fn a_delete_queued_on_a_paused_owner_does_not_run_after_a_takeover() {
    let Pair {
        postgres: _postgres,
        pool,
        data: _data,
        a,
        b,
        id,
        _dir,
    } = pair("delete:c_").await;
    let delete = in_background(a.client.delete(a.url(&format!("/api/conversations/{id}"))));
    wait_stopped(pid(&a)).await;
    wait_lease_expired(&pool, &id).await;
    let messages = format!("/api/conversations/{id}/messages");
    let (status, body) =
        settled(|| b.post(&messages, json!({ "text": "after the takeover" }))).await;
    assert_eq!(status, 202, "{body}");
    b.wait_idle(&id).await;

    resume(pid(&a));
    let status = tokio::time::timeout(TIMEOUT, delete)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(status, 503, "the stale owner's delete ran");
    assert!(b.conversation_dir(&id).join("metadata.jsonl").is_file());
    for server in [&a, &b] {
        let items_path = format!("/api/conversations/{id}/items");
        let (status, items) = settled(|| server.get(&items_path)).await;
        assert_eq!(status, 200, "{items}");
        assert!(items.to_string().contains("after the takeover"), "{items}");
    }
    // The owner's delete goes through, and every instance agrees it is gone.
    let path = format!("/api/conversations/{id}");
    let (status, body) = settled(|| b.delete(&path)).await;
    assert_eq!(status, 204, "{body}");
    for server in [&a, &b] {
        let (status, _) = server.get(&format!("/api/conversations/{id}")).await;
        assert_eq!(status, 404);
        let (status, _) = server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": "into a deleted one" }),
            )
            .await;
        assert_eq!(status, 404);
    }
}

/// The status the shared index lists a conversation with, through `server`.
async fn listed_status(server: &Server, id: &str) -> String {
    let (status, listed) = server.get("/api/conversations").await;
    assert_eq!(status, 200, "{listed}");
    let found = listed["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|conversation| conversation["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not listed: {listed}"));
    found["status"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn followers_of_an_owner_that_lost_its_lease_are_told_to_reconnect_and_find_the_truth() {
    let Pair {
        postgres,
        pool,
        data,
        a,
        b,
        id,
        _dir,
    } = pair("").await;
    // A long turn on A, followed on A.
    let mut events = a
        .raw_events(&format!("/api/conversations/{id}/events"), None)
        .await;
    let (status, _) = a
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "Slowly\n/sleep 200" }),
        )
        .await;
    assert_eq!(status, 202);
    let mut last_id = None;
    while let Some((event_id, kind, _)) = events.next().await {
        last_id = Some(event_id);
        if kind == "item.delta" {
            break;
        }
    }
    assert_eq!(listed_status(&b, &id).await, "running");

    // A pauses past its lease; B takes the conversation and closes the cut turn, in the
    // files and in the shared index.
    signal(pid(&a), libc::SIGSTOP);
    wait_lease_expired(&pool, &id).await;
    let taken = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (status, body) = b.get(&format!("/api/conversations/{id}")).await;
            if status == 200 && body["status"] == "idle" {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("B never took the conversation over");
    assert_eq!(taken["status"], "idle", "{taken}");
    assert_eq!(listed_status(&b, &id).await, "idle");

    // A wakes: its follower is told the conversation moved, and the stream ends there.
    signal(pid(&a), libc::SIGCONT);
    let rest: Vec<(String, String, serde_json::Value)> =
        tokio::time::timeout(TIMEOUT, events.collect())
            .await
            .expect("the old owner's stream never ended");
    let kinds: Vec<&str> = rest.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert_eq!(kinds.last(), Some(&"conversation.moved"), "{kinds:?}");
    // The event is what the served contract says it is.
    let (_, document) = b.get("/api/openapi.json").await;
    let (_, kind, moved) = rest.last().unwrap().clone();
    assert_eq!(moved["conversation_id"], id.as_str(), "{moved}");
    let problems = crate::contract::check_some(
        &document,
        &[(crate::contract::Feed::Conversation, kind, moved)],
    );
    assert!(problems.is_empty(), "{problems:?}");
    // Nor of any end of the turn: the stale owner could store none, and the end that counts
    // is the new owner's.
    assert!(
        !rest.iter().any(|(_, kind, _)| kind == "turn.ended"),
        "{rest:?}"
    );
    if let Some((event_id, _, _)) = rest.iter().rev().nth(1) {
        last_id = Some(event_id.clone());
    }
    // Reconnecting through A reaches the conversation where it is now.
    let mut resumed = a
        .raw_events(
            &format!("/api/conversations/{id}/events"),
            last_id.as_deref(),
        )
        .await;
    let (_, kind, snapshot) = tokio::time::timeout(TIMEOUT, resumed.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kind, "snapshot");
    assert_eq!(snapshot["conversation"]["status"], "idle", "{snapshot}");
    let (_, items) = a.get(&format!("/api/conversations/{id}/items")).await;
    let last = items["items"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["text"].as_str().unwrap_or("").contains("interrupted"),
        "{last}"
    );
    // A, which lost the lease, wrote nothing to the index for it since: still idle for all,
    // and the index (its turn rows included) is what the files say.
    for server in [&a, &b] {
        assert_eq!(listed_status(server, &id).await, "idle");
    }
    crate::cluster::assert_index_matches_files(&postgres, &data).await;
}

#[tokio::test]
async fn index_updates_that_failed_are_redone_once_the_database_takes_them_again() {
    let postgres = Postgres::start();
    let pool = pool(&postgres).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let a = instance(&postgres, &data, "").await;
    let id = create(&a, "Hello").await;
    a.wait_idle(&id).await;
    // A peer holds the conversation's index row (as one paused inside a transaction would):
    // the write is stored and acknowledged, but its index update gives up on the lock.
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE")
        .bind(&id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let (status, body) = a
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "title": "renamed while away" }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let indexed: String =
        sqlx::query_scalar("SELECT data::json->>'title' FROM conversations WHERE id = $1")
            .bind(&id)
            .fetch_one(&mut *holder)
            .await
            .unwrap();
    assert_eq!(indexed, "Hello", "the index update went through the lock");
    holder.commit().await.unwrap();
    // Repaired in the background, without a restart.
    tokio::time::timeout(Duration::from_millis(LEASE_MS * 5), async {
        loop {
            let title: String =
                sqlx::query_scalar("SELECT data::json->>'title' FROM conversations WHERE id = $1")
                    .bind(&id)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            if title == "renamed while away" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the failed index update was never redone");
    let (_, listed) = a.get("/api/conversations?q=renamed").await;
    assert_eq!(listed["conversations"][0]["id"], id.as_str(), "{listed}");
}

#[tokio::test]
async fn a_delete_accepted_by_an_owner_that_stopped_before_removing_the_files_is_finished() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let a = instance(&postgres, &data, "delete_accepted:c_").await;
    let b = instance(&postgres, &data, "").await;
    let id = create(&a, "Hello").await;
    a.wait_idle(&id).await;
    let delete = in_background(a.client.delete(a.url(&format!("/api/conversations/{id}"))));
    // A's delete is accepted; A stops before removing anything, and dies there.
    wait_stopped(pid(&a)).await;
    assert!(b.conversation_dir(&id).join("metadata.jsonl").is_file());
    a.kill9().await;
    let _ = delete.await;
    // For everyone else the conversation is gone, and the first write finishes the removal.
    let (status, _) = b.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 404);
    let (status, body) = b
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "into a deleted one" }),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        !b.conversation_dir(&id).exists(),
        "the files were left behind"
    );
    let (_, listed) = b.get("/api/conversations").await;
    assert_eq!(listed["conversations"], json!([]), "{listed}");
}

/// A conversation whose background process runs on an instance stays with that instance while
/// it runs (idle, it keeps its lease, so requests through another instance reach the process),
/// and an instance that loses the lease stops its processes: nothing runs for a conversation
/// whose owner cannot see it.
#[tokio::test]
async fn a_background_process_keeps_its_conversation_here_and_ends_with_the_lease() {
    let postgres = Postgres::start();
    let pool = pool(&postgres).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = format!(
        "{}\n[server]\nidle_unload_s = 1\n[tools]\nbackground_wait_ms = 200\n",
        cluster_config(&postgres)
    );
    let mut instances = Vec::new();
    for _ in 0..2 {
        instances.push(
            Server::start_with(ServerOptions {
                data_dir: Some(data.clone()),
                config: Some(config.clone()),
                ..ServerOptions::default()
            })
            .await,
        );
    }
    let [a, b] = &instances[..] else {
        unreachable!()
    };
    // Turns are waited for by reading the conversation: a follower would keep it in memory.
    let idle = |id: String| async move {
        tokio::time::timeout(TIMEOUT, async {
            loop {
                let (_, body) = a.get(&format!("/api/conversations/{id}")).await;
                if body["status"] == "idle" {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("the turn ended");
    };
    let marker = format!("300.{}77", std::process::id());
    let id = create(a, &format!("Start it\n/background echo up; sleep {marker}")).await;
    idle(id.clone()).await;
    // A conversation with nothing running leaves memory, and its lease, after a second idle.
    let quiet = create(a, "Hello").await;
    idle(quiet.clone()).await;
    wait_lease_expired(&pool, &quiet).await;
    // Idle as long, the one with a process is still A's: B forwards to A, which runs it.
    let held: bool =
        sqlx::query_scalar("SELECT expires_at > now() FROM leases WHERE conversation_id = $1")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        held,
        "the conversation of a running process left its instance"
    );
    let (_, listed) = b.get(&format!("/api/conversations/{id}/processes")).await;
    assert_eq!(listed["processes"][0]["status"], "running", "{listed}");
    assert!(!crate::harness::pids_running(&marker).is_empty());

    // A pauses past its lease and B takes the conversation; when A wakes it finds the lease
    // lost and stops the process, saying why.
    signal(pid(a), libc::SIGSTOP);
    wait_lease_expired(&pool, &id).await;
    let path = format!("/api/conversations/{id}/messages");
    let (status, body) = settled(|| b.post(&path, json!({ "text": "Hello again" }))).await;
    assert_eq!(status, 202, "{body}");
    signal(pid(a), libc::SIGCONT);
    let ended = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (_, listed) = b.get(&format!("/api/conversations/{id}/processes")).await;
            let process = listed["processes"][0].clone();
            if process["status"] == "killed" {
                return process;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the old owner never stopped the process");
    assert_eq!(
        ended["reason"], "its conversation moved to another instance",
        "{ended}"
    );
    tokio::time::timeout(TIMEOUT, async {
        while !crate::harness::pids_running(&marker).is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the process ended with its group");
}

/// Sends `request` while the test holds conversation `id`'s lease row locked, waits until the
/// request's fenced statement waits on the row, then restarts PostgreSQL: the statement is cut
/// mid-flight and its answer lost. Returns the request's status.
async fn cut_mid_statement(postgres: &Postgres, id: &str, request: reqwest::RequestBuilder) -> u16 {
    use sqlx::Connection as _;
    let mut holder = sqlx::PgConnection::connect(&postgres.url()).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT 1 FROM leases WHERE conversation_id = $1 FOR UPDATE")
        .bind(id)
        .execute(&mut holder)
        .await
        .unwrap();
    let sent = in_background(request);
    let mut watcher = sqlx::PgConnection::connect(&postgres.url()).await.unwrap();
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE leases SET%'",
            )
            .fetch_one(&mut watcher)
            .await
            .unwrap();
            if waiting > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the fenced statement waited on the row");
    postgres.stop();
    postgres.resume();
    drop((holder, watcher));
    tokio::time::timeout(TIMEOUT, sent)
        .await
        .expect("the request was answered")
        .unwrap()
        .unwrap()
}

/// A server of its own on a database of its own, at the default lease.
async fn alone(postgres: &Postgres, dir: &std::path::Path) -> Server {
    let config = format!(
        "[cluster]\ndatabase_url = \"{}\"\nlease_ms = 10000\n",
        postgres.url()
    );
    Server::start_with(ServerOptions {
        data_dir: Some(dir.join("data")),
        config: Some(config),
        ..ServerOptions::default()
    })
    .await
}

/// PostgreSQL restarted while an owner's commit is in flight: the commit's answer is lost, and
/// the owner settles it (reads the row back, sends it again) on a new connection rather than
/// giving up. Four restarts, at the default lease, each cutting a message's commit: every
/// message is acknowledged and every turn completes.
// Multi-threaded: the request goes out while this thread waits on `pg_ctl`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_of_postgres_during_commits_cut_no_turn() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let server = alone(&postgres, dir.path()).await;
    let id = create(&server, "Before the restarts").await;
    server.wait_idle(&id).await;
    let path = format!("/api/conversations/{id}/messages");
    for round in 1..=4 {
        let mut events = server.events(&id).await;
        let request = server
            .client
            .post(server.url(&path))
            .json(&json!({ "text": format!("Round {round}") }));
        let status = cut_mid_statement(&postgres, &id, request).await;
        assert_eq!(status, 202, "round {round}");
        let ended = tokio::time::timeout(TIMEOUT, async {
            while let Some((kind, data)) = events.next().await {
                if kind == "turn.ended" {
                    return data;
                }
            }
            panic!("round {round}: the stream ended before the turn");
        })
        .await
        .expect("the turn ended");
        assert_eq!(ended["status"], "completed", "round {round}: {ended}");
    }
    let items = crate::support::items(&server, &id).await;
    let sent = items
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .count();
    assert_eq!(sent, 5, "{items:?}");
}

/// A delete whose acceptance was cut mid-statement is settled by reading the row back: one
/// that happened answers 204 (never 503 "not deleted"), and the conversation is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_whose_answer_was_lost_is_settled_and_answers_204() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let server = alone(&postgres, dir.path()).await;
    let id = create(&server, "To be deleted").await;
    server.wait_idle(&id).await;
    let request = server
        .client
        .delete(server.url(&format!("/api/conversations/{id}")));
    let status = cut_mid_statement(&postgres, &id, request).await;
    assert_eq!(status, 204);
    let (status, _) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 404);
    assert!(!server.conversation_dir(&id).exists());
}
