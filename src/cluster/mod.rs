//! Cluster mode: several instances behind one address, over one PostgreSQL database and one
//! shared data directory. PostgreSQL holds the index (`index/postgres.rs`) and coordinates:
//! which instances run and where they answer (`instances`), who owns each conversation
//! (`leases.rs`), and list-level events (`notify.rs`). A request for a conversation another
//! instance owns is forwarded there (`forward.rs`); an idle conversation is taken by the
//! instance a request reaches first. Without a database URL none of this exists and the
//! service runs embedded, as before.

pub mod forward;
pub mod leases;
pub mod notify;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::PgPool;

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
}

impl Cluster {
    /// Registers this instance (a fresh id every start) at `addr`.
    pub async fn join(pool: PgPool, addr: String, lease: Duration) -> Result<Cluster, sqlx::Error> {
        let instance = crate::domain::new_id("i");
        sqlx::query("INSERT INTO instances (id, addr) VALUES ($1, $2)")
            .bind(&instance)
            .bind(&addr)
            .execute(&pool)
            .await?;
        Ok(Cluster {
            inner: Arc::new(Inner {
                leases: Leases::new(pool.clone(), instance.clone(), lease),
                instance,
                addr,
                pool,
                http: forward::client(),
                database_answers: AtomicBool::new(true),
            }),
        })
    }

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
            Err(sqlx::Error::RowNotFound) => Err(RouteError::OwnerGone),
            Err(error) => {
                self.inner.database_answers.store(false, Ordering::SeqCst);
                Err(RouteError::Database(error.to_string()))
            }
        }
    }

    /// One round of the background work: renews the leases and this instance's heartbeat.
    /// Returns the conversations whose lease is gone (their actors must stop writing).
    pub async fn tick(&self) -> Vec<String> {
        let renewed = self.inner.leases.renew().await;
        let heartbeat = sqlx::query("UPDATE instances SET seen_at = now() WHERE id = $1")
            .bind(&self.inner.instance)
            .execute(&self.inner.pool)
            .await;
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
