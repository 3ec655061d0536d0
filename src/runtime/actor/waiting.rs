//! What an actor holds while something outside it works: approvals waiting for a user's
//! answer, a manual compaction's model call.

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::api::approvals::Approval;
use crate::api::responses::CompactOutcome;
use crate::runtime::RuntimeError;
use crate::runtime::approvals::ApprovalOutcome;

/// An approval waiting in this conversation, with the way back to its turn.
pub(super) struct WaitingApproval {
    pub(super) approval: Approval,
    pub(super) arguments: serde_json::Value,
    pub(super) agent: String,
    pub(super) reply: oneshot::Sender<ApprovalOutcome>,
}

/// A manual compaction in progress: its model call runs in a task of its own, so the
/// conversation keeps answering; messages sent meanwhile wait, as they would behind a turn.
pub(super) struct Compacting {
    pub cancel: CancellationToken,
    pub(super) reply: oneshot::Sender<Result<CompactOutcome, RuntimeError>>,
}
