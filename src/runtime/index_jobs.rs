//! Index work that no answer waits for (a finished message's search row, a fork's copied rows),
//! run in the background in order, and index failures that mark the index out of date.

use std::sync::Arc;

use super::*;
use crate::index::{Index, IndexError, IndexUpdate};

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

/// Runs background index jobs one after another until the runtime is dropped.
pub(super) async fn run_index_jobs(
    index: Index,
    mut jobs: tokio::sync::mpsc::UnboundedReceiver<IndexJob>,
    pending: Arc<std::sync::atomic::AtomicUsize>,
) {
    while let Some(job) = jobs.recv().await {
        // Counted down when this iteration ends, whatever the job was.
        let _done = PendingJob(&pending);
        let (result, what, conversation_id) = match job {
            IndexJob::CopySearch {
                from,
                to,
                below_seq,
                root_len,
            } => (
                copy_search_rows(&index, &from, &to, below_seq, root_len).await,
                format!("copying the search rows of {from} to its fork {to}"),
                to,
            ),
            IndexJob::SearchedThrough {
                conversation_id,
                root_len,
            } => {
                let note = IndexUpdate::SearchedThrough {
                    conversation_id: &conversation_id,
                    root_len,
                };
                (
                    index.apply(std::slice::from_ref(&note)).await,
                    format!("noting how far search covers {conversation_id}"),
                    conversation_id.clone(),
                )
            }
            IndexJob::SearchText {
                conversation_id,
                seq,
                text,
            } => {
                let row = IndexUpdate::SearchText {
                    conversation_id: &conversation_id,
                    seq,
                    text: &text,
                };
                (
                    index.apply(std::slice::from_ref(&row)).await,
                    format!("the search row of message {seq} of {conversation_id}"),
                    conversation_id.clone(),
                )
            }
            IndexJob::Flush(done) => {
                let _ = done.send(());
                continue;
            }
        };
        if let Err(error) = result {
            index_failed(&index, &error, &what, &[&conversation_id]).await;
        }
    }
}

/// A failed index write is logged, not fatal: the files are already safe, and the index is
/// marked so that the next start reconciles it with them.
pub(super) async fn index_failed(
    index: &Index,
    error: &IndexError,
    what: &str,
    conversation_ids: &[&str],
) {
    tracing::error!(%error, what, "index update failed; the next start will re-index the conversation");
    index.mark_out_of_date(conversation_ids).await;
}

/// Copies a fork's search rows in slices of a few hundred messages, one transaction each, so
/// the index's single writer is never held for long: turns and other forks go in between.
pub(super) async fn copy_search_rows(
    index: &Index,
    from: &str,
    to: &str,
    end: u64,
    root_len: u64,
) -> Result<(), IndexError> {
    const SLICE: u64 = 256;
    let mut start = 1;
    while start < end {
        let below = (start + SLICE).min(end);
        let copy = IndexUpdate::CopySearch {
            from_conversation_id: from,
            to_conversation_id: to,
            from_seq: start,
            below_seq: below,
        };
        index.apply(std::slice::from_ref(&copy)).await?;
        start = below;
    }
    let copied = IndexUpdate::SearchedThrough {
        conversation_id: to,
        root_len,
    };
    index.apply(std::slice::from_ref(&copied)).await
}

impl Shared {
    /// Queues index work to run after the current answer.
    pub fn index_later(&self, job: IndexJob) {
        self.index_jobs_pending
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.index_jobs.send(job).is_err() {
            self.index_jobs_pending
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Applies index updates; a failure is logged, not fatal: the files are already safe and
    /// the next start reconciles the index with them.
    pub async fn index_quietly(&self, updates: &[IndexUpdate<'_>]) {
        if let Err(error) = self.index.apply(updates).await {
            let mut ids: Vec<&str> = updates.iter().map(IndexUpdate::conversation_id).collect();
            ids.dedup();
            index_failed(&self.index, &error, "live update", &ids).await;
        }
    }
}

/// Counts a background index job as finished when dropped.
pub(super) struct PendingJob<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for PendingJob<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}
