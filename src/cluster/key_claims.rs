//! Cluster mode: the rows of `idempotency_claims`, whose primary key lets exactly one instance
//! hold an `Idempotency-Key` (`runtime/key_claims.rs` waits on them and decides). A claim is
//! taken when nobody holds the key, this instance held it before, or its claimant has not
//! been seen for a lease and claimed it more than a lease ago. It ends with its answer (the
//! row goes, or keeps the answer when the index could not take it), or is released when
//! dropped unanswered. Claims no request needs any more are cleared when an instance joins.

use std::time::Duration;

use sqlx::{PgPool, Row};

use crate::index::IndexError;
use crate::store::state::StoredAnswer;

use super::Cluster;

/// This instance's claim of a key; released (in the background) when dropped unanswered.
pub struct KeyClaim {
    pool: PgPool,
    key: String,
    /// Names this claim: a release arriving late never removes the key's next claim.
    token: String,
    answered: bool,
}

/// What the row of a key says now.
pub enum KeyState {
    /// No row: nobody holds the key (answered into the index, or released after a failure).
    Free,
    /// Held by an instance that has not answered yet.
    Held,
    /// Answered, with the answer the index could not take.
    Answered(StoredAnswer),
}

fn from_sqlx(error: sqlx::Error) -> IndexError {
    IndexError::from_postgres(IndexError::Sqlx(error))
}

impl KeyClaim {
    /// Claims `key` when nobody holds it, this instance held it before (a release that did not
    /// reach the database), or its claimant has not been seen for a lease and claimed it more
    /// than a lease ago. `None`: another instance holds it, or answered it.
    pub async fn try_take(cluster: &Cluster, key: &str) -> Result<Option<KeyClaim>, IndexError> {
        let lease = cluster.leases().ttl();
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

    /// The request was answered: the claim ends. `unindexed` is the answer when the index
    /// could not take it (the claim keeps it for the waiters); otherwise the index has it and
    /// the claim goes.
    pub async fn answered(mut self, unindexed: Option<&StoredAnswer>) {
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

/// What the row of `key` says now: free, held unanswered, or answered.
pub async fn key_state(cluster: &Cluster, key: &str) -> Result<KeyState, IndexError> {
    let row =
        sqlx::query("SELECT status, response, body_hash FROM idempotency_claims WHERE key = $1")
            .bind(key)
            .fetch_optional(cluster.pool())
            .await
            .map_err(from_sqlx)?;
    let Some(row) = row else {
        return Ok(KeyState::Free);
    };
    let Some(status) = row.get::<Option<i32>, _>(0) else {
        return Ok(KeyState::Held);
    };
    let response: Option<String> = row.get(1);
    let response =
        serde_json::from_str(response.as_deref().unwrap_or("null")).map_err(IndexError::Corrupt)?;
    Ok(KeyState::Answered(StoredAnswer {
        status: status as u16,
        response,
        body_hash: row.get(2),
    }))
}

/// Clears the idempotency claims no request needs any more: those whose answer the index
/// has, and unanswered ones as old as a dead instance's row (the request that made them is
/// long over; a live claimant would have answered or released them).
pub(super) async fn clear_stale(pool: &PgPool, lease: Duration) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DELETE FROM idempotency_claims WHERE key IN (SELECT key FROM answers)
         OR (status IS NULL AND claimed_at < now() - $1 * interval '1 millisecond')",
    )
    .bind((lease * 20).as_millis() as i64)
    .execute(pool)
    .await?;
    Ok(())
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
