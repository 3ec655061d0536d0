//! `Idempotency-Key`s: the answer kept for a key and the body hash it was given with, and the
//! claim that makes two concurrent requests with one key wait for each other.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::*;
use crate::api::responses::{ConversationCreated, MessageAccepted};
use crate::domain::Message;
use crate::store::records::MetaRecord;
use crate::store::state::{AnswerKind, StoredAnswer};

/// What a request that may be repeated under an `Idempotency-Key` was answered: a repeat with
/// the same body gets the same answer. The HTTP layer picks the status for each kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A conversation was stored with its first message, whose turn runs.
    Created(Box<ConversationCreated>),
    /// A message was taken: it started a turn, or waits.
    Accepted(MessageAccepted),
}

impl Answer {
    /// The message the answer is about.
    pub fn message(&self) -> &Message {
        match self {
            Answer::Created(created) => &created.message,
            Answer::Accepted(accepted) => &accepted.message,
        }
    }

    fn kind(&self) -> AnswerKind {
        match self {
            Answer::Created(_) => AnswerKind::Created,
            Answer::Accepted(_) => AnswerKind::Accepted,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Answer::Created(created) => serde_json::to_value(created),
            Answer::Accepted(accepted) => serde_json::to_value(accepted),
        }
        .expect("an answer is plain JSON")
    }
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

    /// The answer to a repeat of a create: the first one for the same body (or for an answer
    /// stored before bodies were hashed), `IdempotencyKeyReused` for another body.
    pub fn replay_created(&self, stored: &StoredAnswer) -> Result<Answer, RuntimeError> {
        self.replay(stored)
            .map(|created| Answer::Created(Box::new(created)))
    }

    /// The answer to a repeat of a message, as [`RequestKey::replay_created`].
    pub fn replay_accepted(&self, stored: &StoredAnswer) -> Result<Answer, RuntimeError> {
        self.replay(stored).map(Answer::Accepted)
    }

    fn replay<T: DeserializeOwned>(&self, stored: &StoredAnswer) -> Result<T, RuntimeError> {
        self.check_body(stored.body_hash.as_deref())?;
        // The body is made of the types the conversation's own records are read with, so an
        // answer kept by an older version reads as they do.
        T::deserialize(&stored.response).map_err(|error| {
            RuntimeError::Internal(format!(
                "the answer kept for this Idempotency-Key cannot be read: {error}"
            ))
        })
    }

    /// The answer to a repeat of `first`, which was answered `answer` and is kept in memory.
    pub fn repeat(&self, first: &RequestKey, answer: &Answer) -> Result<Answer, RuntimeError> {
        self.check_body(Some(&first.body_hash))?;
        Ok(answer.clone())
    }

    fn check_body(&self, first_hash: Option<&str>) -> Result<(), RuntimeError> {
        if first_hash.is_some_and(|hash| hash != self.body_hash) {
            return Err(RuntimeError::IdempotencyKeyReused);
        }
        Ok(())
    }

    /// The answer as kept for this key.
    pub fn stored(&self, answer: &Answer) -> StoredAnswer {
        StoredAnswer {
            status: answer.kind().recorded_status(),
            response: answer.to_json(),
            body_hash: Some(self.body_hash.clone()),
        }
    }

    /// The record that stores the answer for this key.
    pub fn answered(&self, answer: &Answer, at: crate::domain::Timestamp) -> MetaRecord {
        let stored = self.stored(answer);
        MetaRecord::RequestAnswered {
            key: self.key.clone(),
            status: stored.status,
            response: stored.response,
            at,
            body_hash: stored.body_hash,
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
