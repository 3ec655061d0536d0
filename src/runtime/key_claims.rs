//! Cluster mode: an `Idempotency-Key` claimed across instances. The in-process claim
//! (`idempotency::InFlight`) orders the requests of one instance; the same request sent to two
//! instances at once needs one place that says who carries it out: a row of
//! `idempotency_claims` in PostgreSQL (`cluster::key_claims`), whose primary key lets exactly
//! one instance hold a key. The others wait (at most one lease) for its answer, and get it as
//! a repeat would.
//!
//! A claim ends with its answer: the row goes once the answer is in the index (`answers`),
//! or keeps the answer when the index could not take it. A claim that fails (nothing stored)
//! is released, and a waiter carries the request out itself, as embedded. A claim whose
//! instance has not been seen for a lease, and which is older than a lease, is taken over: a
//! dead instance does not keep a key forever.

use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::cluster::key_claims::{KeyClaim, KeyState, key_state};
use crate::index::Index;
use crate::store::state::StoredAnswer;

use super::RuntimeError;

/// How often a waiter looks whether the claimant has answered.
const POLL: Duration = Duration::from_millis(50);

/// The outcome of claiming a key.
pub(super) enum Claimed {
    /// This instance carries the request out.
    Mine(KeyClaim),
    /// Another request with the key was answered: this answer (the caller checks the body).
    Answered(StoredAnswer),
}

/// Claims `key` for this instance, or waits for the answer of the instance that holds it: at
/// most one lease, then `Unavailable` (the client retries with the same key).
pub(super) async fn claim_key(
    cluster: &Cluster,
    index: &Index,
    key: &str,
) -> Result<Claimed, RuntimeError> {
    let deadline = Instant::now() + cluster.leases().ttl();
    loop {
        if let Some(claim) = KeyClaim::try_take(cluster, key).await? {
            // A claimant that finished between the caller's look at the index and this claim
            // left its answer there.
            if let Some(stored) = index.answer(key).await? {
                return Ok(Claimed::Answered(stored));
            }
            return Ok(Claimed::Mine(claim));
        }
        match key_state(cluster, key).await? {
            KeyState::Answered(stored) => return Ok(Claimed::Answered(stored)),
            KeyState::Held => {}
            // Answered into the index, or released after a failure, since the claim above.
            KeyState::Free => {
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
