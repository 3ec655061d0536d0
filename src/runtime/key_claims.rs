//! Cluster mode: an `Idempotency-Key` claimed across instances. The in-process claim
//! (`idempotency::InFlight`) orders the requests of one instance; the same request sent to two
//! instances at once needs one place that says who carries it out: a row of
//! `idempotency_claims` in PostgreSQL, whose primary key lets exactly one instance hold a key.
//! The others wait (at most one lease) for its answer, and get it as a repeat would.
//!
//! A claim ends with its answer: the row goes once the answer is in the index (`answers`),
//! or keeps the answer when the index could not take it. A claim that fails (nothing stored)
//! is released, and a waiter carries the request out itself, as embedded. A claim whose
//! instance has not been seen for a lease, and which is older than a lease, is taken over: a
//! dead instance does not keep a key forever.

use std::time::{Duration, Instant};

use sqlx::{PgPool, Row};

use crate::cluster::Cluster;
use crate::index::{Index, IndexError};
use crate::store::state::StoredAnswer;

use super::RuntimeError;

/// How often a waiter looks whether the claimant has answered.
const POLL: Duration = Duration::from_millis(50);

/// This instance's claim of a key; released (in the background) when dropped unanswered.
pub(super) struct KeyClaim {
    pool: PgPool,
    key: String,
    /// Names this claim: a release arriving late never removes the key's next claim.
    token: String,
    answered: bool,
}

/// The outcome of claiming a key.
pub(super) enum Claimed {
    /// This instance carries the request out.
    Mine(KeyClaim),
    /// Another request with the key was answered: this answer (the caller checks the body).
    Answered(StoredAnswer),
}

fn from_sqlx(error: sqlx::Error) -> RuntimeError {
    IndexError::from_postgres(IndexError::Sqlx(error)).into()
}

impl KeyClaim {
    /// Claims `key` for this instance, or waits for the answer of the instance that holds it:
    /// at most one lease, then 503 (the client retries with the same key).
    pub(super) async fn take(
        cluster: &Cluster,
        index: &Index,
        key: &str,
    ) -> Result<Claimed, RuntimeError> {
        let lease = cluster.leases().ttl();
        let deadline = Instant::now() + lease;
        loop {
            if let Some(claim) = try_claim(cluster, key, lease).await? {
                // A claimant that finished between the caller's look at the index and this
                // claim left its answer there.
                if let Some(stored) = index.answer(key).await? {
                    return Ok(Claimed::Answered(stored));
                }
                return Ok(Claimed::Mine(claim));
            }
            let row = sqlx::query(
                "SELECT status, response, body_hash FROM idempotency_claims WHERE key = $1",
            )
            .bind(key)
            .fetch_optional(cluster.pool())
            .await
            .map_err(from_sqlx)?;
            match row {
                Some(row) => {
                    if let Some(status) = row.get::<Option<i32>, _>(0) {
                        let response: Option<String> = row.get(1);
                        let response = serde_json::from_str(response.as_deref().unwrap_or("null"))
                            .map_err(|error| RuntimeError::from(IndexError::Corrupt(error)))?;
                        return Ok(Claimed::Answered(StoredAnswer {
                            status: status as u16,
                            response,
                            body_hash: row.get(2),
                        }));
                    }
                }
                // Answered into the index, or released after a failure, since the claim above.
                None => {
                    if let Some(stored) = index.answer(key).await? {
                        return Ok(Claimed::Answered(stored));
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(RuntimeError::Unavailable(
                    "a request with this Idempotency-Key is still being answered by another instance; retry with the same key"
                        .to_owned(),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The request was answered: the claim ends. `unindexed` is the answer when the index
    /// could not take it (the claim keeps it for the waiters); otherwise the index has it and
    /// the claim goes.
    pub(super) async fn answered(mut self, unindexed: Option<&StoredAnswer>) {
        self.answered = true;
        let ended = match unindexed {
            None => {
                sqlx::query("DELETE FROM idempotency_claims WHERE key = $1 AND token = $2")
                    .bind(&self.key)
                    .bind(&self.token)
                    .execute(&self.pool)
                    .await
            }
            Some(stored) => {
                sqlx::query(
                    "UPDATE idempotency_claims SET status = $3, response = $4, body_hash = $5
                     WHERE key = $1 AND token = $2",
                )
                .bind(&self.key)
                .bind(&self.token)
                .bind(i32::from(stored.status))
                .bind(stored.response.to_string())
                .bind(&stored.body_hash)
                .execute(&self.pool)
                .await
            }
        };
        if let Err(error) = ended {
            // Waiters on other instances answer 503 until the claim is taken over; a retry
            // that reaches this instance is answered from its memory or the index.
            tracing::warn!(%error, key = %self.key, "cannot end an idempotency claim");
        }
    }
}

/// Claims `key` when nobody holds it, this instance held it before (a release that did not
/// reach the database), or its claimant has not been seen for a lease and claimed it more
/// than a lease ago. `None`: another instance holds it, or answered it.
async fn try_claim(
    cluster: &Cluster,
    key: &str,
    lease: Duration,
) -> Result<Option<KeyClaim>, RuntimeError> {
    let token = crate::domain::new_id("k");
    let claimed = sqlx::query(
        "INSERT INTO idempotency_claims (key, instance, token) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET instance = excluded.instance, token = excluded.token,
             claimed_at = now()
         WHERE idempotency_claims.status IS NULL
           AND (idempotency_claims.instance = excluded.instance
                OR (idempotency_claims.claimed_at < now() - $4 * interval '1 millisecond'
                    AND NOT EXISTS (
                        SELECT 1 FROM instances WHERE instances.id = idempotency_claims.instance
                        AND instances.seen_at >= now() - $4 * interval '1 millisecond')))
         RETURNING key",
    )
    .bind(key)
    .bind(cluster.instance_id())
    .bind(&token)
    .bind(lease.as_millis() as i64)
    .fetch_optional(cluster.pool())
    .await
    .map_err(from_sqlx)?;
    Ok(claimed.map(|_| KeyClaim {
        pool: cluster.pool().clone(),
        key: key.to_owned(),
        token,
        answered: false,
    }))
}

impl Drop for KeyClaim {
    /// A claim that ends without an answer (the request failed, nothing was stored) is
    /// released, so a waiter or a retry carries the request out.
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (pool, key, token) = (self.pool.clone(), self.key.clone(), self.token.clone());
        runtime.spawn(async move {
            let released =
                sqlx::query("DELETE FROM idempotency_claims WHERE key = $1 AND token = $2")
                    .bind(&key)
                    .bind(&token)
                    .execute(&pool)
                    .await;
            if let Err(error) = released {
                // Taken over when this instance claims the key again, or stops.
                tracing::warn!(%error, %key, "cannot release an idempotency claim");
            }
        });
    }
}
