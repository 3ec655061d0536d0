//! Joining the cluster at start: this instance's row in `instances` (the rows of instances long
//! dead, and the idempotency claims no request needs any more, cleared on the way) and the task
//! that sends its list events to the others. Kept out of the front (`cluster/mod.rs`): the
//! modules it calls (`key_claims.rs`) use the front's [`Cluster`], so the front calls none.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sqlx::PgPool;

use super::leases::Leases;
use super::{Cluster, Inner, forward, key_claims, notify};

impl Cluster {
    /// Registers this instance (a fresh id every start) at `addr`. Rows of instances not seen
    /// for a long time (they died) are cleared on the way.
    pub async fn join(pool: PgPool, addr: String, lease: Duration) -> Result<Cluster, sqlx::Error> {
        let instance = crate::domain::new_id("i");
        sqlx::query(
            "DELETE FROM instances WHERE seen_at < now() - $1 * interval '1 millisecond'
             AND id NOT IN (SELECT owner FROM leases WHERE expires_at >= now())",
        )
        .bind((lease * 20).as_millis() as i64)
        .execute(&pool)
        .await?;
        key_claims::clear_stale(&pool, lease).await?;
        sqlx::query("INSERT INTO instances (id, addr, lease_ms) VALUES ($1, $2, $3)")
            .bind(&instance)
            .bind(&addr)
            .bind(lease.as_millis() as i64)
            .execute(&pool)
            .await?;
        let (notifications, mut outgoing) = tokio::sync::mpsc::unbounded_channel();
        let (sender_pool, sender_instance) = (pool.clone(), instance.clone());
        tokio::spawn(async move {
            while let Some(event) = outgoing.recv().await {
                notify::notify(&sender_pool, &sender_instance, &event).await;
            }
        });
        Ok(Cluster {
            inner: Arc::new(Inner {
                notifications,
                leases: Leases::new(pool.clone(), instance.clone(), lease),
                instance,
                addr,
                pool,
                http: forward::client(),
                database_answers: AtomicBool::new(true),
            }),
        })
    }
}
