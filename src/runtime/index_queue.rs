//! The queue of background index work: the jobs, and how many wait and for how long.

/// Index work that runs in the background, in order.
#[derive(Debug)]
pub enum IndexJob {
    /// A finished message's search row (see `IndexUpdate::SearchText`). Written moments after
    /// the message is stored; a row for a conversation deleted meanwhile is not written.
    SearchText {
        conversation_id: String,
        seq: u64,
        text: String,
    },
    /// A fork's search rows, copied from its source's (see `IndexUpdate::CopySearch`).
    CopySearch {
        from: String,
        to: String,
        /// The first `seq` not copied: the fork's end, fixed when it was made.
        below_seq: u64,
        /// The length of the fork's root session file: once copied, search covers it.
        root_len: u64,
    },
    /// Search covers a conversation's root session file up to here (see
    /// `IndexUpdate::SearchedThrough`); queued behind the rows it vouches for.
    SearchedThrough {
        conversation_id: String,
        root_len: u64,
    },
    /// Answers once every job queued before it is done (at shutdown).
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Jobs waiting at most: past it a new job is not queued (see `Shared::index_later`). Each
/// holds a message's text, so this also bounds the memory the backlog takes.
pub(super) const QUEUE_CAPACITY: usize = 2048;

/// When each queued job was queued, oldest first: how many wait and how long the oldest has
/// (shown by `/api/health`). Kept in step with the channel: pushed before a job is sent,
/// popped once it is done.
#[derive(Default)]
pub(super) struct JobQueue {
    queued_at: std::sync::Mutex<std::collections::VecDeque<std::time::Instant>>,
}

impl JobQueue {
    pub(super) fn queued_at(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::VecDeque<std::time::Instant>> {
        self.queued_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn pending(&self) -> usize {
        self.queued_at().len()
    }

    /// How long the oldest job not finished yet has waited (zero when none waits).
    pub(super) fn oldest_age(&self) -> std::time::Duration {
        self.queued_at()
            .front()
            .map_or(std::time::Duration::ZERO, std::time::Instant::elapsed)
    }

    pub(super) fn done(&self, jobs: usize) {
        let mut queued_at = self.queued_at();
        for _ in 0..jobs {
            queued_at.pop_front();
        }
    }
}

impl IndexJob {
    /// A search row or a search mark: written with its neighbours in one transaction.
    pub(super) fn is_row(&self) -> bool {
        matches!(
            self,
            IndexJob::SearchText { .. } | IndexJob::SearchedThrough { .. }
        )
    }

    pub(super) fn conversation_id(&self) -> Option<&str> {
        match self {
            IndexJob::SearchText {
                conversation_id, ..
            }
            | IndexJob::SearchedThrough {
                conversation_id, ..
            } => Some(conversation_id),
            IndexJob::CopySearch { to, .. } => Some(to),
            IndexJob::Flush(_) => None,
        }
    }
}
