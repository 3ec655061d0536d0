//! Cluster mode over a real PostgreSQL server (started by the test): the shared index, the
//! leases that make one instance the writer of a conversation, and three instances of the
//! binary sharing one data directory.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use openvaala::cluster::{Claim, Leases};
use openvaala::domain::{Conversation, ConversationStatus, now};
use openvaala::index::postgres::PgIndex;
use openvaala::index::{ArchivedFilter, IndexUpdate, ListQuery};

use crate::harness::{Server, ServerOptions};
use crate::support::events_until;
use openvaala::testkit::postgres::Postgres;

pub(crate) fn conversation(id: &str, title: &str) -> Conversation {
    Conversation {
        id: id.to_owned(),
        title: title.to_owned(),
        title_custom: false,
        created_at: now(),
        updated_at: now(),
        archived: false,
        status: ConversationStatus::Idle,
        cwd: "/".to_owned(),
        agent: "default".to_owned(),
        model: "demo".to_owned(),
        root_session_id: "s_1".to_owned(),
        forked_from: None,
        last_turn: None,
        mcp: Default::default(),
        budget: Default::default(),
    }
}

#[tokio::test]
async fn the_postgres_index_lists_pages_and_searches_substrings_in_any_script() {
    let postgres = Postgres::start();
    let index = PgIndex::open(&postgres.url()).await.unwrap();
    let first = conversation("c_1", "Release plan");
    let second = conversation("c_2", "发布计划");
    for (conversation, text) in [
        (&first, "ship the parser on Friday"),
        (&second, "周五发布解析器"),
    ] {
        index
            .apply(&[
                IndexUpdate::Conversation {
                    conversation,
                    meta_len: 10,
                },
                IndexUpdate::Title {
                    conversation_id: &conversation.id,
                    title: &conversation.title,
                },
                IndexUpdate::SearchText {
                    conversation_id: &conversation.id,
                    seq: 1,
                    text,
                },
            ])
            .await
            .unwrap();
    }
    let search = |q: &str| ListQuery {
        archived: ArchivedFilter::Active,
        search: Some(q.to_owned()),
        limit: 50,
        cursor: None,
    };
    let ids = |page: openvaala::index::ListPage| -> Vec<String> {
        page.conversations.into_iter().map(|c| c.id).collect()
    };
    assert_eq!(ids(index.list(&search("PARSER")).await.unwrap()), ["c_1"]);
    assert_eq!(ids(index.list(&search("解析")).await.unwrap()), ["c_2"]);
    assert_eq!(
        ids(index.list(&search("plan ship")).await.unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(index.list(&search("100%")).await.unwrap()),
        Vec::<String>::new()
    );
    // As in the embedded index, a NUL is refused rather than searched for.
    assert!(index.list(&search("a\0b")).await.is_err());
    let page = index
        .list(&ListQuery {
            limit: 1,
            ..search("")
        })
        .await
        .unwrap();
    assert_eq!(page.conversations.len(), 1);
    let rest = index
        .list(&ListQuery {
            limit: 1,
            cursor: page.next_cursor,
            ..search("")
        })
        .await
        .unwrap();
    assert_eq!(rest.conversations.len(), 1);
    assert_ne!(rest.conversations[0].id, page.conversations[0].id);

    // A row never moves back in its log.
    let mut older = first.clone();
    older.title = "stale".to_owned();
    index
        .apply(&[IndexUpdate::Conversation {
            conversation: &older,
            meta_len: 5,
        }])
        .await
        .unwrap();
    assert_eq!(
        index.get("c_1").await.unwrap().unwrap().title,
        "Release plan"
    );
    index.remove_conversation("c_1").await.unwrap();
    assert!(index.get("c_1").await.unwrap().is_none());
    assert_eq!(
        ids(index.list(&search("parser")).await.unwrap()),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn one_instance_at_a_time_holds_a_lease_and_each_new_owner_has_a_larger_epoch() {
    let postgres = Postgres::start();
    let index = PgIndex::open(&postgres.url()).await.unwrap();
    let pool = index.pool().clone();
    for (id, addr) in [("i_a", "127.0.0.1:1"), ("i_b", "127.0.0.1:2")] {
        sqlx::query("INSERT INTO instances (id, addr) VALUES ($1, $2)")
            .bind(id)
            .bind(addr)
            .execute(&pool)
            .await
            .unwrap();
    }
    let ttl = Duration::from_millis(1500);
    let a = Leases::new(pool.clone(), "i_a".to_owned(), ttl);
    let b = Leases::new(pool.clone(), "i_b".to_owned(), ttl);

    // Both race for one idle conversation: exactly one wins.
    let (claim_a, claim_b) = tokio::join!(a.claim("c_1", 0), b.claim("c_1", 0));
    let (claim_a, claim_b) = (claim_a.unwrap(), claim_b.unwrap());
    let winners = [&claim_a, &claim_b]
        .iter()
        .filter(|claim| matches!(claim, Claim::Owned(_)))
        .count();
    assert_eq!(winners, 1, "{claim_a:?} {claim_b:?}");
    let (owner, other, first) = match (claim_a, claim_b) {
        (Claim::Owned(fence), Claim::HeldBy { addr, .. }) => {
            assert_eq!(addr, "127.0.0.1:1");
            (&a, &b, fence)
        }
        (Claim::HeldBy { addr, .. }, Claim::Owned(fence)) => {
            assert_eq!(addr, "127.0.0.1:2");
            (&b, &a, fence)
        }
        claims => panic!("{claims:?}"),
    };
    assert!(first.holds());
    assert_eq!(first.epoch, 1);

    // Renewed, it holds past its first deadline; released, the other takes it with epoch 2.
    assert!(owner.renew().await.unwrap().is_empty());
    owner.release("c_1").await;
    assert!(!first.holds(), "a released lease stops writes at once");
    let Claim::Owned(second) = other.claim("c_1", 0).await.unwrap() else {
        panic!("the released conversation was not taken");
    };
    assert_eq!(second.epoch, 2);

    // An owner that stops renewing loses the right to write before another can take over.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while second.holds() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fence never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let taken = loop {
        match owner.claim("c_1", 0).await.unwrap() {
            Claim::Owned(fence) => break fence,
            Claim::Deleted => panic!("not deleted"),
            Claim::HeldBy { .. } => {
                assert!(!second.holds());
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the lease never expired"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(taken.epoch, 3);
    // The files' epoch wins over a table that was rebuilt.
    owner.release("c_1").await;
    let Claim::Owned(after_rebuild) = other.claim("c_1", 41).await.unwrap() else {
        panic!("not taken");
    };
    assert_eq!(after_rebuild.epoch, 42);
    // The renewal reports what the other instance took meanwhile.
    assert_eq!(owner.renew().await.unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn while_postgres_is_down_leases_cannot_be_renewed_and_stop_writes_in_time() {
    let postgres = Postgres::start();
    let index = PgIndex::open(&postgres.url()).await.unwrap();
    let pool = index.pool().clone();
    sqlx::query("INSERT INTO instances (id, addr) VALUES ('i_a', '127.0.0.1:1')")
        .execute(&pool)
        .await
        .unwrap();
    let leases = Leases::new(pool, "i_a".to_owned(), Duration::from_millis(1500));
    let Claim::Owned(fence) = leases.claim("c_1", 0).await.unwrap() else {
        panic!("not claimed");
    };
    postgres.stop();
    assert!(leases.renew().await.is_err());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while fence.holds() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fence never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(leases.expired(), ["c_1"]);
    postgres.resume();
    // The pool reconnects; the conversation can be owned again, with a new epoch.
    let claimed = loop {
        match leases.claim("c_1", 0).await {
            Ok(Claim::Owned(fence)) => break fence,
            Ok(other) => panic!("{other:?}"),
            Err(_) => {
                assert!(tokio::time::Instant::now() < deadline, "no reconnection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(claimed.epoch, 2);
}

// ---------------------------------------------------------------------------------------------
// Three instances of the binary over one PostgreSQL and one data directory.

/// The lease the instances use: short, so a takeover is quick to wait for.
pub(crate) const LEASE_MS: u64 = 2000;

pub(crate) struct Cluster {
    pub(crate) instances: Vec<Server>,
    pub(crate) data_dir: std::path::PathBuf,
    _dir: Option<tempfile::TempDir>,
}

pub(crate) fn cluster_config(postgres: &Postgres) -> String {
    format!(
        "[cluster]\ndatabase_url = \"{}\"\nlease_ms = {LEASE_MS}\n",
        postgres.url()
    )
}

pub(crate) async fn start_cluster(postgres: &Postgres, count: usize) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = start_cluster_in(postgres, count, dir.path().join("data")).await;
    cluster._dir = Some(dir);
    cluster
}

/// `count` instances sharing `data_dir`, which the caller keeps.
pub(crate) async fn start_cluster_in(
    postgres: &Postgres,
    count: usize,
    data_dir: std::path::PathBuf,
) -> Cluster {
    let mut instances = Vec::new();
    for _ in 0..count {
        instances.push(start_instance(postgres, &data_dir).await);
    }
    Cluster {
        instances,
        data_dir,
        _dir: None,
    }
}

async fn start_instance(postgres: &Postgres, data_dir: &std::path::Path) -> Server {
    start_instance_at(postgres, data_dir, None).await
}

/// An instance listening on `addr` (a free port when `None`): one restarted where it was.
pub(crate) async fn start_instance_at(
    postgres: &Postgres,
    data_dir: &std::path::Path,
    addr: Option<String>,
) -> Server {
    Server::start_with(ServerOptions {
        data_dir: Some(data_dir.to_owned()),
        config: Some(cluster_config(postgres)),
        addr,
        ..ServerOptions::default()
    })
    .await
}

/// An instance that listens on every interface names the address the others reach it at: it
/// refuses to start without one, and with one the requests forwarded to it arrive there.
#[tokio::test]
async fn an_instance_on_every_interface_is_reached_at_its_advertised_address() {
    const TOKEN: &str = "a-cluster-token-0123456789";
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config_path = dir.path().join("cluster.toml");
    std::fs::write(&config_path, cluster_config(&postgres)).unwrap();
    for (extra, why) in [
        (None, "--advertise-addr"),
        (Some("0.0.0.0:7341"), "names every interface"),
        (Some("http://node-1:7341"), "must be host:port"),
    ] {
        let mut command = tokio::process::Command::new(crate::harness::binary());
        command
            .args(["serve", "--addr", "0.0.0.0:0", "--data-dir"])
            .arg(&data_dir)
            .env("OPENVAALA_CONFIG", &config_path)
            .env("OPENVAALA_TOKEN", TOKEN)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        if let Some(addr) = extra {
            command.args(["--advertise-addr", addr]);
        }
        let output = tokio::time::timeout(
            crate::harness::TIMEOUT,
            command.spawn().unwrap().wait_with_output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{extra:?}: the instance started"))
        .unwrap();
        assert!(!output.status.success(), "{extra:?}: the instance started");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(why), "{extra:?}: {stderr}");
    }

    // The port is chosen first, as an operator would, so the advertised address can name it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let everywhere = Server::start_with(ServerOptions {
        data_dir: Some(data_dir.clone()),
        addr: Some(format!("0.0.0.0:{port}")),
        config: Some(format!(
            "{}advertise_addr = \"127.0.0.1:{port}\"\n",
            cluster_config(&postgres)
        )),
        token: Some(TOKEN.to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let other = Server::start_with(ServerOptions {
        data_dir: Some(data_dir.clone()),
        config: Some(cluster_config(&postgres)),
        token: Some(TOKEN.to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let id = create(&everywhere, "Hello").await;
    everywhere.wait_idle(&id).await;
    let mut events = other.events(&id).await;
    let (status, sent) = other
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "Again\n/shell echo reached" }),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    let seen = events_until(&mut events, "turn.ended").await;
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");
    // It ran where the conversation lives, which the others know by its advertised address.
    assert_eq!(owned(&everywhere).await, 1);
    assert_eq!(owned(&other).await, 0);
    let (_, health) = everywhere.get("/api/health").await;
    assert_eq!(health["cluster"]["addr"], format!("127.0.0.1:{port}"));
}

pub(crate) async fn owned(server: &Server) -> u64 {
    let (status, health) = server.get("/api/health").await;
    assert_eq!(status, 200, "{health}");
    health["cluster"]["conversations_owned"].as_u64().unwrap()
}

pub(crate) async fn create(server: &Server, text: &str) -> String {
    let (status, body) = server
        .post("/api/conversations", json!({ "text": text }))
        .await;
    assert_eq!(status, 201, "{body}");
    body["conversation"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_conversation_created_on_one_instance_is_listed_and_searched_on_the_others() {
    let postgres = Postgres::start();
    let cluster = start_cluster(&postgres, 3).await;
    let [a, b, c] = &cluster.instances[..] else {
        unreachable!()
    };
    let id = create(a, "Plan the 发布 of the parser").await;
    a.wait_idle(&id).await;
    a.wait_index_settled().await;
    for server in [b, c] {
        let (_, listed) = server.get("/api/conversations").await;
        assert_eq!(listed["conversations"][0]["id"], id.as_str(), "{listed}");
        let (_, found) = server.get("/api/conversations?q=%E5%8F%91%E5%B8%83").await;
        assert_eq!(found["conversations"][0]["id"], id.as_str(), "{found}");
        // Not the first message again (it is the title): the reply that quotes it.
        let snippet = found["snippets"][id.as_str()].as_str().unwrap();
        assert!(snippet.starts_with("Demo model"), "{found}");
        let (_, none) = server.get("/api/conversations?q=nowhere").await;
        assert_eq!(none["conversations"], json!([]));
    }
    let (status, health) = a.get("/api/health").await;
    assert_eq!(status, 200);
    assert!(
        health["cluster"]["instance_id"]
            .as_str()
            .unwrap()
            .starts_with("i_")
    );
    assert_eq!(health["cluster"]["postgres"], "ok");
    assert_eq!(owned(a).await, 1);
    assert_eq!(owned(b).await + owned(c).await, 0);
}

#[tokio::test]
async fn a_message_through_one_instance_runs_on_the_owner_and_another_instance_streams_it() {
    let postgres = Postgres::start();
    let cluster = start_cluster(&postgres, 3).await;
    let [a, b, c] = &cluster.instances[..] else {
        unreachable!()
    };
    let id = create(a, "Hello").await;
    a.wait_idle(&id).await;
    let mut events = b.events(&id).await;
    let (kind, _) = events.next().await.unwrap();
    assert_eq!(kind, "snapshot");
    let (status, sent) = c
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "Again\n/shell echo from-the-owner" }),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    let seen = events_until(&mut events, "turn.ended").await;
    let kinds: Vec<&str> = seen.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"conversation.updated"), "{kinds:?}");
    assert!(kinds.contains(&"turn.started"), "{kinds:?}");
    assert!(kinds.contains(&"item.delta"), "{kinds:?}");
    let output: String = seen
        .iter()
        .filter(|(kind, data)| kind == "item.delta" && data["field"] == "output")
        .map(|(_, data)| data["delta"].as_str().unwrap())
        .collect();
    assert_eq!(output.trim(), "from-the-owner");
    assert_eq!(seen.last().unwrap().1["status"], "completed");
    // It ran on A: A owns the conversation, B and C forwarded.
    assert_eq!(owned(a).await, 1);
    assert_eq!(owned(b).await + owned(c).await, 0);
}

#[tokio::test]
async fn instances_racing_for_an_idle_conversation_leave_exactly_one_owner_and_no_double_write() {
    let postgres = Postgres::start();
    let mut cluster = start_cluster(&postgres, 3).await;
    let id = create(&cluster.instances[0], "Hello").await;
    cluster.instances[0].wait_idle(&id).await;
    // A stops cleanly: its lease is released, the conversation is idle and unowned.
    let a = cluster.instances.remove(0);
    a.terminate().await;
    let [b, c] = &cluster.instances[..] else {
        unreachable!()
    };
    let path = format!("/api/conversations/{id}/messages");
    let (first, second) = tokio::join!(
        b.post(&path, json!({ "text": "from B", "mode": "queue" })),
        c.post(&path, json!({ "text": "from C", "mode": "queue" })),
    );
    assert_eq!((first.0, second.0), (202, 202), "{first:?} {second:?}");
    b.wait_idle(&id).await;
    assert_eq!(owned(b).await + owned(c).await, 1);
    // Every message is in the history exactly once, and no line of the files repeats.
    let (_, items) = c.get(&format!("/api/conversations/{id}/items")).await;
    let texts: Vec<&str> = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .map(|item| item["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    for text in ["Hello", "from B", "from C"] {
        assert_eq!(texts.iter().filter(|t| **t == text).count(), 1, "{texts:?}");
    }
    let metadata = std::fs::read_to_string(
        cluster
            .data_dir
            .join("conversations")
            .join(&id)
            .join("metadata.jsonl"),
    )
    .unwrap();
    let mut lines: Vec<&str> = metadata.lines().collect();
    let count = lines.len();
    lines.sort();
    lines.dedup();
    assert_eq!(
        lines.len(),
        count,
        "a record was written twice:\n{metadata}"
    );
}

#[tokio::test]
async fn when_the_owner_is_killed_another_instance_takes_over_and_followers_resume() {
    let postgres = Postgres::start();
    let mut cluster = start_cluster(&postgres, 3).await;
    let id = create(&cluster.instances[0], "Hello").await;
    cluster.instances[0].wait_idle(&id).await;
    // A long turn on A, followed through C.
    let c = &cluster.instances[2];
    let mut events = c
        .raw_events(&format!("/api/conversations/{id}/events"), None)
        .await;
    let (status, _) = cluster.instances[0]
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
    let a = cluster.instances.remove(0);
    let killed = std::time::Instant::now();
    a.kill9().await;
    // The stream through C ends with A; C's follower reconnects with Last-Event-ID.
    let [b, c] = &cluster.instances[..] else {
        unreachable!()
    };
    let taken = tokio::time::timeout(Duration::from_millis(LEASE_MS + 8_000), async {
        loop {
            let (status, body) = b.get(&format!("/api/conversations/{id}")).await;
            if status == 200 {
                return body;
            }
            assert_eq!(status, 503, "{body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("no instance took the conversation over");
    let took = killed.elapsed();
    assert!(
        took < Duration::from_millis(LEASE_MS + 2_000),
        "the takeover took {took:?}"
    );
    assert_eq!(taken["status"], "idle", "{taken}");
    let (_, items) = b.get(&format!("/api/conversations/{id}/items")).await;
    let last = items["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "notice", "{last}");
    assert!(
        last["text"].as_str().unwrap().contains("interrupted"),
        "{last}"
    );
    let mut resumed = c
        .raw_events(
            &format!("/api/conversations/{id}/events"),
            last_id.as_deref(),
        )
        .await;
    let (_, kind, snapshot) = resumed.next().await.unwrap();
    // The new owner cannot replay A's events: a fresh snapshot, which shows the closed turn.
    assert_eq!(kind, "snapshot");
    assert_eq!(snapshot["conversation"]["status"], "idle");
    assert_eq!(snapshot["running"], json!([]));
}

#[tokio::test]
async fn while_postgres_is_down_instances_answer_503_and_recover_without_losing_writes() {
    let postgres = Postgres::start();
    let cluster = start_cluster(&postgres, 2).await;
    let [a, b] = &cluster.instances[..] else {
        unreachable!()
    };
    let id = create(a, "Before the outage").await;
    a.wait_idle(&id).await;
    postgres.stop();
    for server in [a, b] {
        let (status, health) = server.get("/api/health").await;
        assert_eq!(status, 503, "{health}");
        assert_eq!(health["cluster"]["postgres"], "unreachable", "{health}");
        let (status, body) = server.get("/api/conversations").await;
        assert_eq!(status, 503, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("PostgreSQL"),
            "{body}"
        );
    }
    postgres.resume();
    let recovered = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let (status, _) = b.get("/api/health").await;
            if status == 200 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(recovered.is_ok(), "the instance did not recover");
    // What was acknowledged before the outage is all there.
    let (status, items) = b.get(&format!("/api/conversations/{id}/items")).await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["items"][0]["text"], "Before the outage");
    let (status, sent) = b
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "After the outage" }),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
}

async fn listing(server: &Server, q: &str) -> serde_json::Value {
    server
        .get(&format!("/api/conversations?archived=all&q={q}"))
        .await
        .1
}

#[tokio::test]
async fn a_reindex_into_an_empty_database_gives_the_same_listing_and_search() {
    let postgres = Postgres::start();
    let mut cluster = start_cluster(&postgres, 1).await;
    let server = &cluster.instances[0];
    for text in ["Alpha plan", "Beta 计划", "Gamma"] {
        let id = create(server, text).await;
        server.wait_idle(&id).await;
    }
    server.wait_index_settled().await;
    let before = (
        listing(server, "").await,
        listing(server, "plan").await,
        listing(server, "%E8%AE%A1%E5%88%92").await,
    );
    cluster.instances.remove(0).terminate().await;
    let other = Postgres::start();
    let output = std::process::Command::new(crate::harness::binary())
        .args(["reindex", "--data-dir"])
        .arg(&cluster.data_dir)
        .args(["--database-url", &other.url()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let server = start_instance(&other, &cluster.data_dir).await;
    let after = (
        listing(&server, "").await,
        listing(&server, "plan").await,
        listing(&server, "%E8%AE%A1%E5%88%92").await,
    );
    assert_eq!(after, before);
    assert_eq!(before.0["conversations"].as_array().unwrap().len(), 3);
}

/// An approval is answered through any instance: the answer goes to the instance that runs
/// its turn, and every instance lists every instance's pending approvals.
#[tokio::test]
async fn an_approval_is_listed_everywhere_and_answered_on_an_instance_that_does_not_run_it() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = format!(
        "{}[agents.default]\ndescription = \"asks\"\nmodel = \"demo\"\n\
         [agents.default.permissions]\nshell = \"ask\"\n",
        cluster_config(&postgres)
    );
    let mut instances = Vec::new();
    for _ in 0..2 {
        instances.push(
            Server::start_with(ServerOptions {
                data_dir: Some(data_dir.clone()),
                config: Some(config.clone()),
                ..ServerOptions::default()
            })
            .await,
        );
    }
    let [a, b] = &instances[..] else {
        unreachable!()
    };
    let id = create(a, "/shell echo answered-elsewhere").await;
    let mut events = a.events(&id).await;
    let asked = events_until(&mut events, "approval.requested").await;
    let approval = asked.last().unwrap().1["approval"].clone();
    let approval_id = approval["id"].as_str().unwrap();
    assert_eq!(owned(a).await, 1);
    assert_eq!(owned(b).await, 0);

    for server in [a, b] {
        let (status, listed) = server.get("/api/approvals").await;
        assert_eq!(status, 200, "{listed}");
        let ids: Vec<&str> = listed["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|approval| approval["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [approval_id], "{listed}");
    }

    let (status, answered) = b
        .post(
            &format!("/api/approvals/{approval_id}"),
            json!({ "decision": "allow_once" }),
        )
        .await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["status"], "allowed");
    assert_eq!(answered["resolution"]["decided_by"], "api");
    let seen = events_until(&mut events, "turn.ended").await;
    assert_eq!(seen.last().unwrap().1["status"], "completed");
    let output: String = seen
        .iter()
        .filter(|(kind, data)| kind == "item.delta" && data["field"] == "output")
        .map(|(_, data)| data["delta"].as_str().unwrap())
        .collect();
    assert_eq!(output.trim(), "answered-elsewhere");
    // A second answer, through either instance, is told the first one won.
    for server in [a, b] {
        let (status, again) = server
            .post(
                &format!("/api/approvals/{approval_id}"),
                json!({ "decision": "deny" }),
            )
            .await;
        assert_eq!(status, 409, "{again}");
    }
    // Still only A ran it: B forwarded and took nothing.
    assert_eq!(owned(b).await, 0);
}

/// A turn cut with its owner (kill -9) is closed in the files and the shared index without
/// anyone asking for its conversation: a surviving instance's sweep of expired leases takes
/// it. Only the listing (the index) is read until then.
#[tokio::test]
async fn a_cut_turn_is_closed_in_the_index_without_a_request() {
    let postgres = Postgres::start();
    let mut cluster = start_cluster(&postgres, 2).await;
    let id = create(&cluster.instances[0], "Hello").await;
    cluster.instances[0].wait_idle(&id).await;
    start_slow_turn(&cluster.instances[0], &id).await;
    let a = cluster.instances.remove(0);
    a.kill9().await;
    let killed = std::time::Instant::now();
    let b = &cluster.instances[0];
    let listed_status = async || {
        let (_, listed) = b.get("/api/conversations").await;
        listed["conversations"][0]["status"].clone()
    };
    assert_eq!(listed_status().await, "running");
    // Within the lease and the sweep after it (a lease each), with no request for it.
    tokio::time::timeout(Duration::from_millis(4 * LEASE_MS + 5_000), async {
        while listed_status().await != "idle" {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the cut turn was never closed in the index");
    eprintln!("closed in the index {:?} after the kill", killed.elapsed());
    let pool = sqlx::PgPool::connect(&postgres.url()).await.unwrap();
    let turns: Vec<String> = sqlx::query_scalar(
        "SELECT status FROM turns WHERE conversation_id = $1 ORDER BY started_at",
    )
    .bind(&id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(turns, ["completed", "interrupted"]);
    assert_index_matches_files(&postgres, &cluster.data_dir).await;
}

/// `reindex --database-url` right after a kill -9: it names the instance it waits for while
/// that one's lease runs, then runs. It closes the turn the kill cut with lines stamped with
/// a new epoch, which every later reader takes (unstamped, they were skipped as a stale
/// writer's and the turn read as still running).
#[tokio::test]
async fn a_reindex_after_a_kill_waits_for_the_lease_and_closes_the_cut_turn_for_good() {
    let postgres = Postgres::start();
    let mut cluster = start_cluster(&postgres, 1).await;
    let id = create(&cluster.instances[0], "Hello").await;
    cluster.instances[0].wait_idle(&id).await;
    start_slow_turn(&cluster.instances[0], &id).await;
    cluster.instances.remove(0).kill9().await;
    let reindex = || {
        std::process::Command::new(crate::harness::binary())
            .args(["reindex", "--data-dir"])
            .arg(&cluster.data_dir)
            .args(["--database-url", &postgres.url()])
            .output()
            .unwrap()
    };
    let refused = reindex();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("1 instance(s) of the cluster are running")
            && said.contains(" at 127.0.0.1:"),
        "{said}"
    );
    let ran = tokio::time::timeout(Duration::from_millis(LEASE_MS + 10_000), async {
        loop {
            let output = reindex();
            if output.status.success() {
                return output;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("the reindex never ran");
    assert!(ran.status.success(), "{ran:?}");
    let meta = std::fs::read_to_string(
        cluster
            .data_dir
            .join("conversations")
            .join(&id)
            .join("metadata.jsonl"),
    )
    .unwrap();
    let last: serde_json::Value = serde_json::from_str(meta.lines().last().unwrap()).unwrap();
    assert!(last["epoch"].as_u64().unwrap() >= 2, "{last}");

    let server = start_instance(&postgres, &cluster.data_dir).await;
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["status"], "idle", "{conversation}");
    assert_eq!(
        conversation["last_turn"]["status"], "interrupted",
        "{conversation}"
    );
    let items = crate::support::items(&server, &id).await;
    let last = items.last().unwrap();
    assert_eq!(last["kind"], "notice", "{last}");
}

/// PostgreSQL frozen past the lease (a paused VM), then resumed: writes through every instance
/// work again within seconds, not after the pool waits its broken connections out.
#[tokio::test]
async fn after_postgres_resumes_from_a_long_pause_writes_work_again_at_once() {
    let postgres = Postgres::start();
    let cluster = start_cluster(&postgres, 2).await;
    let [a, b] = &cluster.instances[..] else {
        unreachable!()
    };
    let id = create(a, "Before the pause").await;
    a.wait_idle(&id).await;
    postgres.freeze(true);
    // Past the lease: every lease of the cluster has lapsed meanwhile.
    let paused = std::time::Instant::now();
    tokio::time::timeout(Duration::from_millis(3 * LEASE_MS), async {
        loop {
            let (status, _) = a.get("/api/health").await;
            if status == 503 && paused.elapsed() > Duration::from_millis(2 * LEASE_MS) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .ok();
    postgres.freeze(false);
    let resumed = std::time::Instant::now();
    let mut recovered = Vec::new();
    for server in [a, b] {
        let path = format!("/api/conversations/{id}/messages");
        tokio::time::timeout(crate::harness::TIMEOUT, async {
            loop {
                let (status, body) = server.post(&path, json!({ "text": "After" })).await;
                if status == 202 {
                    return;
                }
                assert_eq!(status, 503, "{body}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("writes never worked again");
        recovered.push(resumed.elapsed());
        server.wait_idle(&id).await;
    }
    eprintln!("writes worked again after {recovered:?}");
    assert!(
        recovered.iter().all(|took| *took < Duration::from_secs(3)),
        "{recovered:?}"
    );
    assert_index_matches_files(&postgres, &cluster.data_dir).await;
}

/// What the shared index says: every conversation's (id, status, title), every turn's
/// (id, status) and every searchable text's (conversation, seq, text), sorted.
struct IndexRows {
    conversations: Vec<(String, String, String)>,
    turns: Vec<(String, String)>,
    search: Vec<(String, i64, String)>,
}

async fn index_rows(url: &str) -> IndexRows {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let conversations =
        sqlx::query_as("SELECT id, status, data::json->>'title' FROM conversations ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let turns = sqlx::query_as("SELECT id, status FROM turns ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    let search = sqlx::query_as(
        "SELECT conversation_id, seq, text FROM search ORDER BY conversation_id, seq",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    IndexRows {
        conversations,
        turns,
        search,
    }
}

/// The rows of `a` not in `b` and those of `b` not in `a`, shown in short.
fn only_in<T: PartialEq + std::fmt::Debug>(a: &[T], b: &[T]) -> (Vec<String>, Vec<String>) {
    let short = |row: &T| {
        let text = format!("{row:?}");
        text.chars().take(160).collect::<String>()
    };
    (
        a.iter().filter(|row| !b.contains(row)).map(short).collect(),
        b.iter().filter(|row| !a.contains(row)).map(short).collect(),
    )
}

/// The live index agrees with the files: it equals what `reindex --database-url` of a copy of
/// the data directory writes into a copy of the database. Called with the cluster quiet.
pub(crate) async fn assert_index_matches_files(live: &Postgres, data_dir: &std::path::Path) {
    let copy = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .args(["-a"])
        .arg(data_dir)
        .arg(copy.path().join("data"))
        .status()
        .unwrap();
    assert!(status.success());
    // A copy made while instances ran holds their registrations' leftovers: none matter here.
    let _ = std::fs::remove_dir_all(copy.path().join("data/instances"));
    // A copy of the database too: its leases say which stamped lines count (a line whose
    // commit the database never confirmed does not). The instances' registrations go, as
    // after they all stopped.
    let fresh = Postgres::start();
    live.copy_into(&fresh);
    let pool = sqlx::PgPool::connect(&fresh.url()).await.unwrap();
    sqlx::query("DELETE FROM instances")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let output = std::process::Command::new(crate::harness::binary())
        .args(["reindex", "--data-dir"])
        .arg(copy.path().join("data"))
        .args(["--database-url", &fresh.url()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let (live, fresh) = (
        index_rows(&live.url()).await,
        index_rows(&fresh.url()).await,
    );
    let differ = [
        only_in(&live.conversations, &fresh.conversations),
        only_in(&live.turns, &fresh.turns),
        only_in(&live.search, &fresh.search),
    ];
    if differ
        .iter()
        .any(|(live, fresh)| !live.is_empty() || !fresh.is_empty())
    {
        panic!(
            "the index disagrees with the files (kept in {}): only in the live index, then only \
             in a reindex of the files: {differ:#?}",
            copy.keep().display()
        );
    }
    eprintln!(
        "the index agrees with the files: {} conversations, {} turns ({} not completed), {} search rows",
        live.conversations.len(),
        live.turns.len(),
        live.turns
            .iter()
            .filter(|(_, status)| status != "completed")
            .count(),
        live.search.len()
    );
}

/// Starts a long turn (the demo model streaming slowly) on `server`, and returns once its
/// answer has begun: a kill from then on cuts it.
pub(crate) async fn start_slow_turn(server: &Server, id: &str) {
    let mut events = server.events(id).await;
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "Slowly\n/sleep 200" }),
        )
        .await;
    assert_eq!(status, 202);
    while let Some((kind, _)) = events.next().await {
        if kind == "item.delta" {
            return;
        }
    }
    panic!("the stream ended before the turn's answer began");
}
