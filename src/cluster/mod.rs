//! Cluster mode: several instances behind one address, over one PostgreSQL database and one
//! shared data directory. PostgreSQL holds the index (`index/postgres.rs`) and coordinates:
//! which instances run and where they answer (`instances`), who owns each conversation
//! (`leases.rs`), list-level events (`notify.rs`), and which instance carries out a request
//! with an `Idempotency-Key` (`key_claims.rs`). A request for a conversation another instance
//! owns is forwarded there (`forward.rs`); an idle conversation is taken by the instance a
//! request reaches first. The loops that keep this going (renewals and the heartbeat, index
//! repairs, the list events of others) start with the service and are joined at its stop
//! (`background.rs`). Without a database URL none of this exists and the service runs
//! embedded, as before.

pub mod background;
pub mod forward;
mod join;
pub mod key_claims;
pub mod leases;
pub mod notify;

use crate::api::events::ListEvent;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::PgPool;

pub use background::Background;
pub use leases::{Claim, Fence, Leases};

/// The default lease: long enough that a busy database does not cost anyone a lease, short
/// enough that a dead instance's conversations are taken over within seconds.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// This instance's place in the cluster. A cheap `Clone` handle.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    instance: String,
    /// Where other instances reach this one (`host:port`).
    addr: String,
    pool: PgPool,
    leases: Leases,
    http: reqwest::Client,
    /// Whether the last statement (a renewal, a heartbeat) reached the database.
    database_answers: AtomicBool,
    /// List-level events for the other instances, sent in order by one task.
    notifications: tokio::sync::mpsc::UnboundedSender<ListEvent>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("instance", &self.inner.instance)
            .field("addr", &self.inner.addr)
            .finish_non_exhaustive()
    }
}

/// Where a request for a conversation is served.
pub enum Route {
    /// Here: this instance owns the conversation (the fence guards its writes).
    Local(Fence),
    /// At the instance that owns it.
    Remote(String),
}

/// Why a request cannot be routed now (503 with this reason).
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("PostgreSQL does not answer ({0}); the service cannot tell who owns this conversation")]
    Database(String),
    #[error(
        "this conversation's owner stopped and its lease has not expired yet; retry in a few seconds"
    )]
    OwnerGone,
    #[error("the conversation could not be taken over here: {0}")]
    TakeOver(String),
    /// Its delete was accepted; its files may still be on their way out.
    #[error("the conversation was deleted")]
    Deleted,
}

impl Cluster {
    pub fn instance_id(&self) -> &str {
        &self.inner.instance
    }

    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    pub fn leases(&self) -> &Leases {
        &self.inner.leases
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// Where the other instances that run now answer (`host:port`).
    pub async fn other_instances(&self) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar("SELECT addr FROM instances WHERE id <> $1 ORDER BY addr")
            .bind(&self.inner.instance)
            .fetch_all(&self.inner.pool)
            .await
    }

    /// The instances seen within `within` (their ids): alive, as far as anyone can tell.
    pub async fn seen_within(
        &self,
        within: Duration,
    ) -> Result<std::collections::HashSet<String>, sqlx::Error> {
        let seen: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM instances WHERE seen_at > now() - $1 * interval '1 millisecond'",
        )
        .bind(within.as_millis() as i64)
        .fetch_all(&self.inner.pool)
        .await?;
        Ok(seen.into_iter().collect())
    }

    /// Conversations the shared index lists `running` that nobody holds a lease of (it
    /// expired, or there never was one): their turn was cut with an owner that died or lost
    /// the lease, and nobody has closed it yet. At most `limit`, oldest id first.
    pub async fn cut_and_unowned(&self, limit: i64) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT c.id FROM conversations c
             LEFT JOIN leases l ON l.conversation_id = c.id
             WHERE c.status = 'running'
               AND (l.conversation_id IS NULL OR (l.expires_at < now() AND NOT l.deleted))
             ORDER BY c.id LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.inner.pool)
        .await
    }

    /// Whether PostgreSQL answered the last time this instance asked.
    pub fn database_answers(&self) -> bool {
        self.inner.database_answers.load(Ordering::SeqCst)
    }

    /// Where a request for `conversation_id` is served: here if this instance owns it or can
    /// take it (`at_least`: the epoch its files carry), else at its owner.
    pub async fn route(&self, conversation_id: &str, at_least: u64) -> Result<Route, RouteError> {
        match self.inner.leases.claim(conversation_id, at_least).await {
            Ok(Claim::Owned(fence)) => {
                self.inner.database_answers.store(true, Ordering::SeqCst);
                Ok(Route::Local(fence))
            }
            Ok(Claim::HeldBy { addr, .. }) if addr == self.inner.addr => {
                // A lease of this instance that it no longer knows of (it lost it and the
                // database has not noticed): it expires soon.
                Err(RouteError::OwnerGone)
            }
            Ok(Claim::HeldBy { addr, .. }) => Ok(Route::Remote(addr)),
            Ok(Claim::Deleted) => Err(RouteError::Deleted),
            Err(sqlx::Error::RowNotFound) => Err(RouteError::OwnerGone),
            Err(error) => {
                self.inner.database_answers.store(false, Ordering::SeqCst);
                Err(RouteError::Database(error.to_string()))
            }
        }
    }

    /// The instance that owns `conversation_id` now, if another one does (its address): a
    /// read of a conversation nobody owns is served from the files, without taking it.
    pub async fn current_owner(&self, conversation_id: &str) -> Result<Option<String>, RouteError> {
        if self.inner.leases.held(conversation_id).is_some() {
            return Ok(None);
        }
        let row = sqlx::query(
            "SELECT instances.addr, leases.deleted FROM leases
             LEFT JOIN instances ON instances.id = leases.owner
             WHERE leases.conversation_id = $1
             AND ((leases.expires_at >= now() AND leases.owner <> $2) OR leases.deleted)",
        )
        .bind(conversation_id)
        .bind(&self.inner.instance)
        .fetch_optional(&self.inner.pool)
        .await
        .map_err(|error| {
            self.inner.database_answers.store(false, Ordering::SeqCst);
            RouteError::Database(error.to_string())
        })?;
        self.inner.database_answers.store(true, Ordering::SeqCst);
        match row {
            Some(row) if sqlx::Row::get::<bool, _>(&row, 1) => Err(RouteError::Deleted),
            Some(row) => {
                let Some(addr) = sqlx::Row::get::<Option<String>, _>(&row, 0) else {
                    // Held by an instance that left the table: nobody serves it now.
                    return Ok(None);
                };
                if addr == self.inner.addr {
                    // An earlier run of this instance at the same address: wait for expiry.
                    return Err(RouteError::OwnerGone);
                }
                Ok(Some(addr))
            }
            None => Ok(None),
        }
    }

    /// Tells the other instances about a list-level event (in order, in the background).
    pub fn notify(&self, event: &ListEvent) {
        let _ = self.inner.notifications.send(event.clone());
    }

    /// The write fence of a conversation this instance owns now.
    pub fn fence(&self, conversation_id: &str) -> Option<Arc<dyn crate::store::WriteFence>> {
        self.inner
            .leases
            .held(conversation_id)
            .map(|fence| Arc::new(fence) as Arc<dyn crate::store::WriteFence>)
    }

    /// Checks that PostgreSQL answers (for `/api/health`).
    pub async fn ping(&self) -> bool {
        let answers = sqlx::query("SELECT 1")
            .execute(&self.inner.pool)
            .await
            .is_ok();
        self.inner.database_answers.store(answers, Ordering::SeqCst);
        answers
    }

    /// One round of the background work: renews the leases and this instance's heartbeat.
    /// Returns the conversations whose lease is gone (their actors must stop writing).
    pub async fn tick(&self) -> Vec<String> {
        let renewed = self.inner.leases.renew().await;
        let heartbeat = self.heartbeat().await;
        let answers = renewed.is_ok() && heartbeat.is_ok();
        self.inner.database_answers.store(answers, Ordering::SeqCst);
        let mut lost = match renewed {
            Ok(lost) => lost,
            Err(error) => {
                tracing::warn!(%error, "cannot renew the leases; writes stop at their deadline");
                Vec::new()
            }
        };
        lost.extend(self.inner.leases.expired());
        lost
    }

    /// Marks this instance as seen. Its row may be gone although it runs (it was paused long
    /// enough for a starting instance to clear it as dead): then it registers again, since
    /// without the row no other instance can forward to it, and its conversations would
    /// answer 503 everywhere else while its leases hold.
    async fn heartbeat(&self) -> Result<(), sqlx::Error> {
        let seen = sqlx::query("UPDATE instances SET seen_at = now() WHERE id = $1")
            .bind(&self.inner.instance)
            .execute(&self.inner.pool)
            .await?;
        if seen.rows_affected() == 0 {
            tracing::warn!(
                instance = %self.inner.instance,
                "this instance's registration was gone (cleared as dead); registering again"
            );
            sqlx::query(
                "INSERT INTO instances (id, addr, lease_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, seen_at = now()",
            )
            .bind(&self.inner.instance)
            .bind(&self.inner.addr)
            .bind(self.inner.leases.ttl().as_millis() as i64)
            .execute(&self.inner.pool)
            .await?;
        }
        Ok(())
    }

    /// How often `tick` runs: a quarter of the lease.
    pub fn tick_interval(&self) -> Duration {
        self.inner.leases.ttl() / 4
    }

    /// Leaves the cluster at a clean stop: every lease expires now, the instance's row goes.
    pub async fn leave(&self) {
        self.inner.leases.release_all().await;
        let left = sqlx::query("DELETE FROM instances WHERE id = $1")
            .bind(&self.inner.instance)
            .execute(&self.inner.pool)
            .await;
        if let Err(error) = left {
            tracing::warn!(%error, "cannot remove this instance from the instances table");
        }
    }
}
