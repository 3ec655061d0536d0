//! Cluster mode among peers: what one instance must not cost the others. The same request
//! sent to several instances is carried out once; an instance whose registration was lost
//! registers again; a peer stuck inside a transaction costs a bounded wait, never a hang.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

use crate::cluster::{LEASE_MS, create, owned, start_cluster};
use crate::harness::Server;
use openvaala::testkit::postgres::Postgres;

async fn instance_id(server: &Server) -> String {
    let (status, health) = server.get("/api/health").await;
    assert_eq!(status, 200, "{health}");
    health["cluster"]["instance_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_instance_whose_registration_is_gone_registers_again_within_a_lease() {
    let postgres = Postgres::start();
    let cluster = start_cluster(&postgres, 2).await;
    let [a, b] = &cluster.instances[..] else {
        unreachable!()
    };
    let id = create(a, "Hello").await;
    a.wait_idle(&id).await;
    let a_id = instance_id(a).await;

    // What a long pause costs an instance: another one that starts clears its row as dead.
    let mut db = PgConnection::connect(&postgres.url()).await.unwrap();
    let cleared = sqlx::query("DELETE FROM instances WHERE id = $1")
        .bind(&a_id)
        .execute(&mut db)
        .await
        .unwrap();
    assert_eq!(cleared.rows_affected(), 1);
    let since = Instant::now();

    // A write through B needs A's address: it works again once A has registered again.
    let path = format!("/api/conversations/{id}");
    let limit = Duration::from_millis(3 * LEASE_MS);
    let renamed = tokio::time::timeout(limit, async {
        loop {
            let (status, body) = b.patch(&path, json!({ "title": "Renamed" })).await;
            if status == 200 {
                return body;
            }
            assert_eq!(status, 503, "{body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("A's conversation still unreachable through B after {limit:?}"));
    let took = since.elapsed();
    assert!(
        took < Duration::from_millis(LEASE_MS + 1_000),
        "re-registration took {took:?}"
    );
    assert_eq!(renamed["title"], "Renamed", "{renamed}");
    let registered: i64 = sqlx::query_scalar("SELECT count(*) FROM instances WHERE id = $1")
        .bind(&a_id)
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(registered, 1);
    // It was forwarded to A, which still owns the conversation.
    assert_eq!(owned(a).await, 1);
    assert_eq!(owned(b).await, 0);
}

/// A clean stop leaves the cluster for good: the renewal loop is joined before the instance
/// removes its row, so no heartbeat registers it again on its way out, and its leases end
/// with it.
#[tokio::test]
async fn a_stopped_instance_leaves_no_registration_and_no_lease_behind() {
    let postgres = Postgres::start();
    let mut cluster = start_cluster(&postgres, 1).await;
    let a = &cluster.instances[0];
    let id = create(a, "Hello").await;
    a.wait_idle(&id).await;
    let a_id = instance_id(a).await;
    assert_eq!(owned(a).await, 1);
    // Past a few renewals, so the loop has been running when the stop comes.
    tokio::time::sleep(Duration::from_millis(LEASE_MS / 2)).await;
    cluster.instances.remove(0).terminate().await;

    let mut db = PgConnection::connect(&postgres.url()).await.unwrap();
    let registered: i64 = sqlx::query_scalar("SELECT count(*) FROM instances WHERE id = $1")
        .bind(&a_id)
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(registered, 0);
    let held: i64 =
        sqlx::query_scalar("SELECT count(*) FROM leases WHERE owner = $1 AND expires_at > now()")
            .bind(&a_id)
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!(held, 0);
}

/// What a request answered while the index row it needs is locked: its status, whether it
/// said when to retry, its body, and how long it took. Panics when it hangs.
async fn bounded(request: reqwest::RequestBuilder) -> (u16, bool, Value, Duration) {
    const LIMIT: Duration = Duration::from_secs(8);
    let started = Instant::now();
    let response = tokio::time::timeout(LIMIT, request.send())
        .await
        .expect("the request hung behind the locked row")
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response.headers().contains_key("retry-after");
    let body = tokio::time::timeout(LIMIT, response.json::<Value>())
        .await
        .expect("the answer's body hung")
        .unwrap_or(Value::Null);
    (status, retry_after, body, started.elapsed())
}

#[tokio::test]
async fn a_locked_index_row_costs_a_bounded_wait_never_a_hang_or_a_500() {
    let postgres = Postgres::start();
    let cluster = start_cluster(&postgres, 2).await;
    let [a, b] = &cluster.instances[..] else {
        unreachable!()
    };
    let id = create(a, "Hello").await;
    a.wait_idle(&id).await;
    a.wait_index_settled().await;

    // A peer stopped inside an index transaction: the conversation's row stays locked.
    let mut db = PgConnection::connect(&postgres.url()).await.unwrap();
    let mut stuck = db.begin().await.unwrap();
    let locked: String =
        sqlx::query_scalar("SELECT id FROM conversations WHERE id = $1 FOR UPDATE")
            .bind(&id)
            .fetch_one(&mut *stuck)
            .await
            .unwrap();
    assert_eq!(locked, id);

    let path = format!("/api/conversations/{id}");
    let requests = [
        (
            "rename through the owner",
            a.client
                .patch(a.url(&path))
                .json(&json!({ "title": "One" })),
        ),
        (
            "rename through the peer",
            b.client
                .patch(b.url(&path))
                .json(&json!({ "title": "Two" })),
        ),
        ("read through the peer", b.client.get(b.url(&path))),
        (
            "listing on the owner",
            a.client.get(a.url("/api/conversations")),
        ),
        (
            "listing on the peer",
            b.client.get(b.url("/api/conversations")),
        ),
    ];
    for (what, request) in requests {
        let (status, retry_after, body, took) = bounded(request).await;
        assert!(
            status == 200 || (status == 503 && retry_after),
            "{what}: {status} (Retry-After: {retry_after}) after {took:?}: {body}"
        );
    }
    stuck.rollback().await.unwrap();

    // Once the row is free, writes go through the index again.
    let (status, body) = a.patch(&path, json!({ "title": "Three" })).await;
    assert_eq!(status, 200, "{body}");
    let (_, listed) = b.get("/api/conversations").await;
    assert_eq!(listed["conversations"][0]["title"], "Three", "{listed}");
}

#[tokio::test]
async fn a_statement_that_gives_up_waiting_is_answered_503_with_retry_after() {
    use axum::response::IntoResponse;
    use openvaala::http::error::ApiError;
    use openvaala::index::{Index, IndexError, IndexUpdate};
    use openvaala::runtime::RuntimeError;

    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open_postgres(&postgres.url(), &dir.path().join("repairs"))
        .await
        .unwrap();
    let row = crate::cluster::conversation("c_1", "Locked");
    let update = |meta_len| IndexUpdate::Conversation {
        conversation: &row,
        meta_len,
    };
    index.apply(&[update(10)]).await.unwrap();

    let mut db = PgConnection::connect(&postgres.url()).await.unwrap();
    let mut stuck = db.begin().await.unwrap();
    sqlx::query("SELECT id FROM conversations WHERE id = 'c_1' FOR UPDATE")
        .fetch_one(&mut *stuck)
        .await
        .unwrap();
    let started = Instant::now();
    let error = tokio::time::timeout(Duration::from_secs(8), index.apply(&[update(20)]))
        .await
        .expect("the write hung behind the locked row")
        .unwrap_err();
    assert!(matches!(error, IndexError::Busy(_)), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let response = ApiError::from(RuntimeError::from(error)).into_response();
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    stuck.rollback().await.unwrap();

    // A statement that runs too long is cut too, and a transaction left idle is ended.
    let pool = index.postgres().unwrap().pool();
    let slow = sqlx::query("SELECT pg_sleep(30)")
        .execute(pool)
        .await
        .unwrap_err();
    let slow = IndexError::from_postgres(IndexError::Sqlx(slow));
    assert!(matches!(slow, IndexError::Busy(_)), "{slow:?}");
    let idle: String = sqlx::query_scalar("SHOW idle_in_transaction_session_timeout")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(idle, "10s");
}

#[tokio::test]
async fn one_create_sent_to_three_instances_at_once_makes_one_conversation() {
    const ROUNDS: usize = 8;
    let postgres = Postgres::start();
    let cluster = start_cluster(&postgres, 3).await;
    let instances = &cluster.instances;
    let mut created = Vec::new();
    for round in 0..ROUNDS {
        let key = format!("create-{round}");
        let body = json!({ "text": format!("Round {round}") });
        let answers = futures::future::join_all(
            instances
                .iter()
                .map(|server| server.post_with_key("/api/conversations", body.clone(), &key)),
        )
        .await;
        let (status, first) = &answers[0];
        assert_eq!(*status, 201, "round {round}: {answers:?}");
        for answer in &answers[1..] {
            assert_eq!(
                answer, &answers[0],
                "round {round}: every caller gets one answer"
            );
        }
        created.push(first["conversation"]["id"].as_str().unwrap().to_owned());
    }

    // Exactly one conversation per key, whichever instance is asked.
    for server in instances {
        let (status, listed) = server.get("/api/conversations?limit=100").await;
        assert_eq!(status, 200, "{listed}");
        let mut listed: Vec<&str> = listed["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|conversation| conversation["id"].as_str().unwrap())
            .collect();
        listed.sort_unstable();
        let mut expected: Vec<&str> = created.iter().map(String::as_str).collect();
        expected.sort_unstable();
        assert_eq!(listed, expected);
    }

    // A repeat gets the same answer; another body with a used key is refused, as embedded.
    for server in instances {
        let (status, again) = server
            .post_with_key(
                "/api/conversations",
                json!({ "text": "Round 0" }),
                "create-0",
            )
            .await;
        assert_eq!(status, 201, "{again}");
        assert_eq!(again["conversation"]["id"], created[0].as_str());
        let (status, refused) = server
            .post_with_key("/api/conversations", json!({ "text": "Other" }), "create-0")
            .await;
        assert_eq!(status, 422, "{refused}");
        assert_eq!(refused["error"]["code"], "idempotency_key_reused");
    }
}

#[tokio::test]
async fn a_key_claimed_by_a_dead_instance_is_taken_over_and_a_live_claim_is_waited_for() {
    let postgres = Postgres::start();
    let cluster = start_cluster(&postgres, 2).await;
    let [a, b] = &cluster.instances[..] else {
        unreachable!()
    };
    let mut db = PgConnection::connect(&postgres.url()).await.unwrap();
    let claim = |key: &str, instance: &str, age_ms: i64| {
        sqlx::query(
            "INSERT INTO idempotency_claims (key, instance, token, claimed_at)
             VALUES ($1, $2, 'k_test', now() - $3 * interval '1 millisecond')",
        )
        .bind(format!("create:{key}"))
        .bind(instance.to_owned())
        .bind(age_ms)
    };
    let post = |key: &str| {
        a.client
            .post(a.url("/api/conversations"))
            .header("Idempotency-Key", key)
            .json(&json!({ "text": "Claimed" }))
            .send()
    };
    let limit = Duration::from_millis(2 * LEASE_MS + 2_000);

    // The claimant died before answering (its row is gone) a lease ago: the key is free again.
    claim("dead", "i_dead", 2 * LEASE_MS as i64)
        .execute(&mut db)
        .await
        .unwrap();
    let response = tokio::time::timeout(limit, post("dead"))
        .await
        .expect("a dead instance's claim held the key")
        .unwrap();
    assert_eq!(response.status(), 201);

    // A live instance holds the key: the request waits for its answer, and gets it. The
    // answer B gives is a real one (a conversation B created).
    let (status, by_b) = b
        .post("/api/conversations", json!({ "text": "Answered by B" }))
        .await;
    assert_eq!(status, 201, "{by_b}");
    let b_id = instance_id(b).await;
    claim("answered", &b_id, 0).execute(&mut db).await.unwrap();
    let waiting = tokio::spawn(tokio::time::timeout(limit, post("answered")));
    sqlx::query(
        "UPDATE idempotency_claims SET status = 201, response = $1
         WHERE key = 'create:answered'",
    )
    .bind(by_b.to_string())
    .execute(&mut db)
    .await
    .unwrap();
    let response = waiting
        .await
        .unwrap()
        .expect("the wait was unbounded")
        .unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(response.json::<Value>().await.unwrap(), by_b);

    // ... but not forever: after a lease it is told to retry.
    claim("busy", &b_id, 0).execute(&mut db).await.unwrap();
    let started = Instant::now();
    let response = tokio::time::timeout(limit, post("busy"))
        .await
        .expect("the wait was unbounded")
        .unwrap();
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(started.elapsed() >= Duration::from_millis(LEASE_MS));
    // Nothing was created for the keys a live claim held: the one taken over, and B's own.
    let (_, listed) = a.get("/api/conversations").await;
    assert_eq!(
        listed["conversations"].as_array().unwrap().len(),
        2,
        "{listed}"
    );
}
