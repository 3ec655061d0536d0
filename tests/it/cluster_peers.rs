//! Cluster mode among peers: what one instance must not cost the others. The same request
//! sent to several instances is carried out once; an instance whose registration was lost
//! registers again; a peer stuck inside a transaction costs a bounded wait, never a hang.

use std::time::{Duration, Instant};

use serde_json::json;
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
