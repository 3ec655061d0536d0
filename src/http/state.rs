//! What every handler and middleware shares: the state the routes run with, the answer counts
//! and the body limit. Kept apart from the route table in `mod.rs`, which calls into the
//! handlers, so that the handlers can use these without using their parent.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;

/// Request bodies larger than this get 413 (images travel inline as base64).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

#[derive(Clone)]
pub struct AppState {
    pub runtime: Runtime,
    /// Cancelled at shutdown so that open event streams end and the server can stop.
    pub streams_done: CancellationToken,
    /// Answers given since the start, for `/api/health`.
    pub answers: Arc<AnswerCounts>,
    /// The named tokens and paired browsers (`/api/tokens`, `/api/session`, `/api/pair`).
    pub tokens: crate::auth::TokenStore,
    /// Push notifications (`/api/push/…`); `None` when the VAPID key could not be made.
    pub push: Option<crate::push::store::PushState>,
}

/// How many answers the routes gave, and how many of them were server errors (5xx): the
/// service's own account, which the fuzzing and load scripts report.
#[derive(Debug, Default)]
pub struct AnswerCounts {
    pub total: AtomicU64,
    pub server_errors: AtomicU64,
}
