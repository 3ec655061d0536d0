//! Why a runtime operation was refused, and how lower layers' errors become such reasons.

use crate::index::IndexError;
use crate::store::StoreError;

/// Why a runtime operation was refused; the HTTP layer maps each to a status and code.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Invalid(String),
    /// A message's image has the documented shape, but is no image a model can use.
    #[error("{0}")]
    InvalidImage(String),
    /// An MCP server of a create body has the documented shape but breaks a rule.
    #[error("{0}")]
    InvalidMcpServer(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("a turn is running; wait for it to end or interrupt it")]
    TurnRunning,
    #[error("messages are waiting; send or withdraw them first")]
    MessagesWaiting,
    #[error("the message is no longer waiting: the agent has taken it")]
    NotWaiting,
    #[error("a compaction is running; wait for it to end")]
    CompactionRunning,
    #[error("there is nothing to compact: the history is already its summary")]
    NothingToCompact,
    /// A turn runs in the working directory (of any conversation): files are not restored.
    #[error("a turn is running in {0}; wait for it to end or interrupt it")]
    DirectoryBusy(String),
    #[error("{0}")]
    RestoreUnavailable(String),
    /// A retry when the session's latest turn did not fail (the text says how it ended).
    #[error("{0}")]
    NothingToRetry(String),
    /// An approval was answered before: the first answer won, here with its outcome.
    #[error("this approval was already answered ({})", approval_outcome(.0))]
    AlreadyDecided(Box<crate::api::approvals::Approval>),
    #[error("the compaction failed: {0}")]
    CompactionFailed(String),
    #[error(
        "the working directory {0} does not exist; recreate it or repoint the conversation with PATCH {{\"cwd\": …}}"
    )]
    CwdMissing(String),
    /// A working directory no conversation may use (the text says why).
    #[error("{0}")]
    CwdRefused(String),
    /// A file of the conversation holds a damaged line (one that is no torn tail, so it is not
    /// cut by itself): it cannot open until repaired (the text names the file, the line and
    /// the command).
    #[error("{0}")]
    Damaged(String),
    #[error("{0}")]
    ModelUnavailable(String),
    #[error("{0}")]
    AgentUnavailable(String),
    /// A message names a repository command its working directory does not have.
    #[error("{0}")]
    CommandUnknown(String),
    /// A cost limit on a model, or a fallback of it, without a price.
    #[error("{0}")]
    PriceMissing(String),
    /// A `user_message` hook blocks the message; the text says which and why.
    #[error("{0}")]
    MessageBlocked(String),
    #[error(
        "this Idempotency-Key was used for a request with a different body; use a new key for a new request"
    )]
    IdempotencyKeyReused,
    #[error("the service is stopping")]
    ShuttingDown,
    /// A limit is reached (live conversations, open files), or the outcome of the request
    /// cannot be known: the client retries later. The message says which.
    #[error("{0}")]
    Unavailable(String),
    /// Cluster mode: a conversation's files carry this epoch, and the lease taken is not newer
    /// (its row was rebuilt): the lease must be taken again above it. Handled by the registry.
    #[error("the conversation's lease is older than its files; retry")]
    EpochBehind(u64),
    #[error("{0}")]
    Internal(String),
}

/// How an approval ended, in words.
fn approval_outcome(approval: &crate::api::approvals::Approval) -> String {
    let status = serde_json::to_value(approval.status)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default();
    match &approval.resolution {
        Some(resolution) => format!("{status} by {}", resolution.decided_by),
        None => status,
    }
}

impl From<StoreError> for RuntimeError {
    fn from(error: StoreError) -> RuntimeError {
        // Cluster mode: the lease moved on, or the database did not confirm the write. Nothing
        // was acknowledged; the conversation answers from its new owner after a retry.
        if matches!(
            error,
            StoreError::NotOwner { .. } | StoreError::Unconfirmed { .. }
        ) {
            tracing::warn!(%error, "a write was refused by the lease");
            return RuntimeError::Unavailable(format!("not stored: {error}; retry"));
        }
        if let StoreError::Malformed {
            path,
            line,
            message,
        } = &error
        {
            tracing::warn!(%error, "a conversation with a damaged file cannot open");
            return RuntimeError::damaged(path, *line, message);
        }
        if let StoreError::Io { source, .. } = &error
            && let Some(what) = crate::limits::exhausted(source)
        {
            tracing::warn!(%error, "out of {what}");
            return RuntimeError::out_of(what);
        }
        tracing::error!(%error, "store error");
        RuntimeError::Internal(format!("storage error: {error}"))
    }
}

impl From<IndexError> for RuntimeError {
    fn from(error: IndexError) -> RuntimeError {
        match error {
            IndexError::BadCursor => RuntimeError::Invalid("invalid cursor".to_owned()),
            IndexError::BadSearch(message) => RuntimeError::Invalid(message),
            IndexError::Unreachable(reason) => {
                tracing::warn!(%reason, "the PostgreSQL index does not answer");
                RuntimeError::Unavailable(format!(
                    "PostgreSQL does not answer ({reason}); the cluster's index is unavailable, retry when it is back"
                ))
            }
            IndexError::Busy(reason) => {
                tracing::warn!(%reason, "a PostgreSQL statement gave up waiting");
                RuntimeError::Unavailable(format!(
                    "the cluster's index is busy ({reason}); retry shortly"
                ))
            }
            IndexError::Store(error) => error.into(),
            error => {
                if let Some(what) = error.exhausted() {
                    tracing::warn!(%error, "index: out of {what}");
                    return RuntimeError::out_of(what);
                }
                tracing::error!(%error, "index error");
                RuntimeError::Internal(format!("index error: {error}"))
            }
        }
    }
}

impl RuntimeError {
    /// A damaged line of `<data>/conversations/<id>/<file>` (the store's layout), as a client
    /// is told of it: the file, the line and the repair, not where the data directory is.
    fn damaged(path: &std::path::Path, line: usize, message: &str) -> RuntimeError {
        let name = |path: Option<&std::path::Path>| {
            path.and_then(std::path::Path::file_name)
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let id = name(path.parent());
        RuntimeError::Damaged(format!(
            "line {line} of {} is damaged ({message}); the conversation cannot open until it \
             is repaired: stop the service and run `openvaala repair {id}`, which moves the \
             damaged lines aside",
            name(Some(path))
        ))
    }

    /// `Unavailable`: a resource of the machine ran out (files, disk, memory).
    pub(super) fn out_of(what: &str) -> RuntimeError {
        RuntimeError::Unavailable(format!(
            "the service is out of {what} for the moment; retry shortly"
        ))
    }

    /// `Unavailable` when a request failed after part of it was stored: the client cannot know what
    /// happened, so it retries, with the same `Idempotency-Key`.
    pub fn outcome_unknown(error: impl std::fmt::Display) -> RuntimeError {
        tracing::error!(%error, "a request failed after part of it was stored");
        RuntimeError::Unavailable(
            "the request failed midway and may have been stored: retry it with the same Idempotency-Key (one was needed to retry safely)"
                .to_owned(),
        )
    }
}

impl From<crate::checkpoints::RestoreError> for RuntimeError {
    fn from(error: crate::checkpoints::RestoreError) -> RuntimeError {
        use crate::checkpoints::RestoreError;
        match error {
            RestoreError::Busy(cwd) => RuntimeError::DirectoryBusy(cwd),
            RestoreError::NotFound(id) => RuntimeError::NotFound(format!("restore {id}")),
            RestoreError::Unavailable(_) | RestoreError::Invalid(_) => {
                RuntimeError::RestoreUnavailable(error.to_string())
            }
        }
    }
}
