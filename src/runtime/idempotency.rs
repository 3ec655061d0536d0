//! `Idempotency-Key`s: the answer kept for a key and the body hash it was given with, and the
//! claim that makes two concurrent requests with one key wait for each other.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::*;
use crate::store::records::MetaRecord;
use crate::store::state::StoredAnswer;

/// A response that may be replayed for an `Idempotency-Key`: its status and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// An `Idempotency-Key` (qualified by what it is used for) with the hash of the request body
/// it came with: a repeat gets the first answer only when it carries the same body.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestKey {
    pub key: String,
    /// SHA-256 (hex) of the request as the service read it: the same for the same JSON,
    /// whatever its spacing or the order of its fields.
    pub body_hash: String,
}

impl RequestKey {
    pub fn new(key: String, request: &impl Serialize) -> RequestKey {
        use sha2::Digest as _;
        let canonical = serde_json::to_vec(request).expect("requests serialize");
        let digest = sha2::Sha256::digest(&canonical);
        let body_hash = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        RequestKey { key, body_hash }
    }

    /// The answer to a repeat of this key: the first one for the same body (or for an answer
    /// stored before bodies were hashed), 422 for another body.
    pub fn replay(&self, stored: &StoredAnswer) -> Result<Answer, RuntimeError> {
        if stored
            .body_hash
            .as_ref()
            .is_some_and(|hash| *hash != self.body_hash)
        {
            return Err(RuntimeError::IdempotencyKeyReused);
        }
        Ok(Answer {
            status: stored.status,
            body: stored.response.clone(),
        })
    }

    /// The answer as kept for this key.
    pub fn stored(&self, answer: &Answer) -> StoredAnswer {
        StoredAnswer {
            status: answer.status,
            response: answer.body.clone(),
            body_hash: Some(self.body_hash.clone()),
        }
    }

    /// The record that stores the answer for this key.
    pub fn answered(&self, answer: &Answer, at: crate::domain::Timestamp) -> MetaRecord {
        MetaRecord::RequestAnswered {
            key: self.key.clone(),
            status: answer.status,
            response: answer.body.clone(),
            at,
            body_hash: Some(self.body_hash.clone()),
        }
    }
}

/// A claimed idempotency key, released when dropped.
pub(super) struct InFlight {
    shared: Arc<Shared>,
    key: String,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl InFlight {
    /// Waits until no other request with this key is in progress, then holds the key.
    pub(super) async fn claim(shared: &Arc<Shared>, key: &str) -> InFlight {
        let lock = shared
            .creating
            .lock()
            .expect("creating lock")
            .entry(key.to_owned())
            .or_default()
            .clone();
        InFlight {
            shared: shared.clone(),
            key: key.to_owned(),
            _turn: lock.lock_owned().await,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut creating = self.shared.creating.lock().expect("creating lock");
        // The map and this guard hold the lock; anyone more is waiting for it.
        if creating
            .get(&self.key)
            .is_some_and(|lock| Arc::strong_count(lock) <= 2)
        {
            creating.remove(&self.key);
        }
    }
}
