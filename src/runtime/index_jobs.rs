//! Index work that no answer waits for (a finished message's search row, a fork's copied rows),
//! run in the background in order, and index failures that mark the index out of date.

use std::sync::Arc;

use super::index_queue::{IndexJob, JobQueue};
use super::*;
use crate::index::{Index, IndexError, IndexUpdate};
use crate::runtime::index_queue::QUEUE_CAPACITY;

/// Search rows written in one transaction at most: one commit for many rows is what lets the
/// single writer keep up with many conversations answering at once.
const BATCH_MAX: usize = 256;

/// Runs background index jobs in order until the runtime is dropped: search rows and marks
/// that follow each other go in batches of up to [`BATCH_MAX`], one transaction each; a
/// fork's copy and a flush go alone, in their place.
pub(super) async fn run_index_jobs(
    index: Index,
    mut jobs: tokio::sync::mpsc::Receiver<IndexJob>,
    queue: Arc<JobQueue>,
) {
    let mut next = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match jobs.recv().await {
                Some(job) => job,
                None => break,
            },
        };
        match job {
            IndexJob::Flush(done) => {
                let _ = done.send(());
                queue.done(1);
            }
            IndexJob::CopySearch {
                from,
                to,
                below_seq,
                root_len,
            } => {
                if let Err(error) = copy_search_rows(&index, &from, &to, below_seq, root_len).await
                {
                    let what = format!("copying the search rows of {from} to its fork {to}");
                    index_failed(&index, &error, &what, &[&to]).await;
                }
                queue.done(1);
            }
            row => {
                let mut batch = vec![row];
                while batch.len() < BATCH_MAX {
                    match jobs.try_recv() {
                        Ok(job) if job.is_row() => batch.push(job),
                        Ok(job) => {
                            next = Some(job);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                write_rows(&index, &batch).await;
                queue.done(batch.len());
            }
        }
    }
}

/// Writes a batch of search rows and marks in one transaction.
async fn write_rows(index: &Index, batch: &[IndexJob]) {
    let updates: Vec<IndexUpdate<'_>> = batch
        .iter()
        .filter_map(|job| match job {
            IndexJob::SearchText {
                conversation_id,
                seq,
                text,
            } => Some(IndexUpdate::SearchText {
                conversation_id,
                seq: *seq,
                text,
            }),
            IndexJob::SearchedThrough {
                conversation_id,
                root_len,
            } => Some(IndexUpdate::SearchedThrough {
                conversation_id,
                root_len: *root_len,
            }),
            IndexJob::CopySearch { .. } | IndexJob::Flush(_) => None,
        })
        .collect();
    if let Err(error) = index.apply(&updates).await {
        let mut ids: Vec<&str> = batch.iter().filter_map(IndexJob::conversation_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let what = format!("a batch of {} search rows", updates.len());
        index_failed(index, &error, &what, &ids).await;
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
    ///
    /// The queue is bounded ([`QUEUE_CAPACITY`]). When it is full the job is not queued and
    /// the actor does not wait: an actor waiting on the index would stall its conversation's
    /// answers and events behind a slow disk, and every conversation with it. The files are
    /// already written and are the truth (invariant 3, the index is derived), so the job is
    /// coalesced into a repair note instead: its conversation is marked out of date, once
    /// however many of its jobs are dropped, and the next start re-indexes it from its files
    /// (as `index_failed` does). No acknowledged write is lost; only its search row waits. A
    /// flush (shutdown) is never dropped: it waits for room.
    pub fn index_later(&self, job: IndexJob) {
        let mut queued_at = self.index_queue.queued_at();
        queued_at.push_back(std::time::Instant::now());
        let job = match self.index_jobs.try_send(job) {
            Ok(()) => return,
            Err(refused) => {
                queued_at.pop_back();
                match refused {
                    tokio::sync::mpsc::error::TrySendError::Full(job) => job,
                    tokio::sync::mpsc::error::TrySendError::Closed(_) => return,
                }
            }
        };
        drop(queued_at);
        self.index_overflow(job);
    }

    /// A job the full queue could not take (see `index_later`). Returns the task that marks
    /// its conversation out of date, when this is its first dropped job.
    fn index_overflow(&self, job: IndexJob) -> Option<tokio::task::JoinHandle<()>> {
        if let IndexJob::Flush(done) = job {
            let sender = self.index_jobs.clone();
            let queue = self.index_queue.clone();
            tokio::spawn(async move {
                if let Ok(permit) = sender.reserve().await {
                    let mut queued_at = queue.queued_at();
                    queued_at.push_back(std::time::Instant::now());
                    permit.send(IndexJob::Flush(done));
                }
            });
            return None;
        }
        let id = job.conversation_id()?.to_owned();
        let first = self
            .index_overflowed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone());
        if !first {
            return None;
        }
        tracing::warn!(
            conversation = %id,
            capacity = QUEUE_CAPACITY,
            "the search index queue is full; the conversation is marked to be re-indexed at the next start"
        );
        let index = self.index.clone();
        Some(tokio::spawn(async move {
            index.mark_out_of_date(&[&id]).await;
        }))
    }

    /// Applies index updates; a failure is logged, not fatal: the files are already safe and
    /// the next start reconciles the index with them.
    pub async fn index_quietly(&self, updates: &[IndexUpdate<'_>]) {
        if updates
            .iter()
            .any(|update| self.forfeited(update.conversation_id()))
        {
            // This instance lost the conversation: its rows are its new owner's to write.
            return;
        }
        if let Err(error) = self.index.apply(updates).await {
            let mut ids: Vec<&str> = updates.iter().map(IndexUpdate::conversation_id).collect();
            ids.dedup();
            index_failed(&self.index, &error, "live update", &ids).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[tokio::test]
    async fn a_job_the_full_queue_drops_marks_its_conversation_for_repair_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        let index = Index::open(&dir.path().join("metadata.db")).await.unwrap();
        let config = Config::from_toml_str("", None).unwrap();
        let runtime = Runtime::new(
            store,
            index.clone(),
            Arc::new(config),
            RuntimeSettings::default(),
        );
        let shared = &runtime.shared;
        let row = |seq| IndexJob::SearchText {
            conversation_id: "c_dropped".to_owned(),
            seq,
            text: "an answer".to_owned(),
        };
        let marking = shared.index_overflow(row(1)).expect("the first drop marks");
        marking.await.unwrap();
        assert_eq!(index.repairs(), vec!["c_dropped".to_owned()]);
        assert!(!index.was_clean_shutdown().await.unwrap());
        // Later drops of the same conversation are coalesced into that one note.
        assert!(shared.index_overflow(row(2)).is_none());
        let searched = IndexJob::SearchedThrough {
            conversation_id: "c_dropped".to_owned(),
            root_len: 10,
        };
        assert!(shared.index_overflow(searched).is_none());
        assert_eq!(index.repairs(), vec!["c_dropped".to_owned()]);
    }

    #[test]
    fn the_queue_reports_its_length_and_its_oldest_jobs_age() {
        let queue = JobQueue::default();
        assert_eq!(
            (queue.pending(), queue.oldest_age()),
            (0, std::time::Duration::ZERO)
        );
        let long_ago = std::time::Instant::now() - std::time::Duration::from_secs(5);
        queue.queued_at().push_back(long_ago);
        queue.queued_at().push_back(std::time::Instant::now());
        assert_eq!(queue.pending(), 2);
        assert!(queue.oldest_age() >= std::time::Duration::from_secs(5));
        queue.done(1);
        assert_eq!(queue.pending(), 1);
        assert!(queue.oldest_age() < std::time::Duration::from_secs(5));
        queue.done(1);
        assert_eq!(queue.oldest_age(), std::time::Duration::ZERO);
    }
}
