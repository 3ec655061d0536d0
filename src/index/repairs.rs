//! What keeps the index honest after a failed update (invariant 3, the index is derived): the
//! conversations to re-index noted beside the database (`metadata.db.repair`, or
//! `postgres.repair` in cluster mode), and the clean-stop mark that lets the next start skip the
//! reconcile only when nothing failed.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::types::IndexError;
use super::{Index, repairs_path};

/// Cluster mode: where conversations whose PostgreSQL updates failed are noted, in the shared
/// data directory (any instance's next start re-indexes them).
pub const POSTGRES_REPAIRS: &str = "postgres.repair";

/// The runtime state key that says whether the last run stopped cleanly ("1") with an index
/// that matches the files; anything else makes the next start reconcile.
pub const CLEAN_SHUTDOWN: &str = "clean_shutdown";

/// Appends conversation ids to a repairs file.
fn note(repairs: &Path, conversation_ids: &[&str]) -> std::io::Result<()> {
    if conversation_ids.is_empty() {
        return Ok(());
    }
    let lines: String = conversation_ids
        .iter()
        .map(|id| format!("{id}\n"))
        .collect();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(repairs)
        .and_then(|mut file| std::io::Write::write_all(&mut file, lines.as_bytes()))
}

/// Notes conversations whose files changed while no service ran (`openvaala repair`), so that
/// the next start re-indexes them into the embedded index even after a clean stop.
pub fn note_for_reindex(
    store: &crate::store::Store,
    conversation_ids: &[&str],
) -> std::io::Result<()> {
    note(&repairs_path(&store.index_path()), conversation_ids)
}

impl Index {
    /// Records that an update of these conversations failed: the next start must re-index them
    /// from their files, even after a clean stop.
    pub async fn mark_out_of_date(&self, conversation_ids: &[&str]) {
        self.out_of_date.store(true, Ordering::SeqCst);
        self.noted
            .lock()
            .expect("the noted set is never poisoned")
            .extend(conversation_ids.iter().map(|id| (*id).to_owned()));
        if let Err(error) = note(&self.repairs, conversation_ids) {
            tracing::error!(%error, path = %self.repairs.display(), "cannot note conversations to re-index");
        }
        let _ = self.set_runtime_state(CLEAN_SHUTDOWN, "0").await;
    }

    /// Whether the last run stopped cleanly with an index that matches the files, so this start
    /// may skip the reconcile: a clean stop was recorded and no conversation is noted for repair.
    pub async fn was_clean_shutdown(&self) -> Result<bool, IndexError> {
        Ok(
            self.runtime_state(CLEAN_SHUTDOWN).await?.as_deref() == Some("1")
                && !self.repairs.exists(),
        )
    }

    /// The conversations noted by `mark_out_of_date` (in earlier runs too), each once.
    pub fn repairs(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&*self.repairs).unwrap_or_default();
        let mut ids: Vec<String> = text.lines().map(str::to_owned).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// How many conversations wait to be re-indexed from their files, or are being re-indexed
    /// now: the index does not agree with the files until this is 0.
    pub fn repairs_pending(&self) -> usize {
        let mut pending: std::collections::HashSet<String> = self.repairs().into_iter().collect();
        pending.extend(self.noted_here());
        pending.len() + self.repairing.load(Ordering::SeqCst)
    }

    /// The conversations this process noted that were not re-indexed yet.
    pub(super) fn noted_here(&self) -> Vec<String> {
        let noted = self.noted.lock().expect("the noted set is never poisoned");
        noted.iter().cloned().collect()
    }

    /// Takes the conversations this process noted, to re-index them (a failure notes them
    /// again; a note made meanwhile is kept for the next repair).
    pub(super) fn take_noted_here(&self) -> Vec<String> {
        let mut noted = self.noted.lock().expect("the noted set is never poisoned");
        noted.drain().collect()
    }

    /// Counts `count` taken conversations as being re-indexed until the guard is dropped.
    pub(super) fn repairing(&self, count: usize) -> Repairing {
        self.repairing.fetch_add(count, Ordering::SeqCst);
        Repairing {
            counter: self.repairing.clone(),
            count,
        }
    }

    /// The noted conversations, moved out of the way first so that notes added meanwhile (by
    /// another instance, in cluster mode) go to a new file and are not lost.
    pub fn take_repairs(&self) -> Result<std::collections::HashSet<String>, IndexError> {
        let taking = self
            .repairs
            .with_extension(format!("taking-{}", std::process::id()));
        match std::fs::rename(&*self.repairs, &taking) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Default::default());
            }
            Err(error) => {
                return Err(IndexError::Task(format!(
                    "cannot take {}: {error}",
                    self.repairs.display()
                )));
            }
        }
        let text = std::fs::read_to_string(&taking).unwrap_or_default();
        let _ = std::fs::remove_file(&taking);
        Ok(text.lines().map(str::to_owned).collect())
    }

    /// Forgets the noted conversations, once they are re-indexed.
    pub fn clear_repairs(&self) -> Result<(), IndexError> {
        match std::fs::remove_file(&*self.repairs) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(IndexError::Task(
                format!("cannot remove {}: {error}", self.repairs.display()),
            )),
            _ => Ok(()),
        }
    }

    /// Records a clean stop, which lets the next start skip the reconcile, unless an update
    /// failed meanwhile. Returns whether it did.
    pub async fn mark_clean_shutdown(&self) -> Result<bool, IndexError> {
        if self.out_of_date.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.set_runtime_state(CLEAN_SHUTDOWN, "1").await?;
        Ok(true)
    }
}

/// Conversations counted as being re-indexed while it lives (`Index::repairing`).
pub(super) struct Repairing {
    counter: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    count: usize,
}

impl Drop for Repairing {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.count, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_clean_stop_after_a_failed_update_still_asks_for_a_reconcile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metadata.db");
        let index = Index::open(&path).await.unwrap();
        let clean = async |index: &Index| index.runtime_state(CLEAN_SHUTDOWN).await.unwrap();
        assert!(index.mark_clean_shutdown().await.unwrap());
        assert_eq!(clean(&index).await.as_deref(), Some("1"));

        index.set_runtime_state(CLEAN_SHUTDOWN, "0").await.unwrap();
        index.clone().mark_out_of_date(&["c_a", "c_b", "c_a"]).await;
        assert_eq!(index.repairs(), ["c_a", "c_b"]);
        assert!(!index.mark_clean_shutdown().await.unwrap());
        assert_eq!(clean(&index).await.as_deref(), Some("0"));
        index.close().await;

        // The noted conversations outlive the run, until they are re-indexed.
        let index = Index::open(&path).await.unwrap();
        assert_eq!(index.repairs(), ["c_a", "c_b"]);
        index.clear_repairs().unwrap();
        assert!(index.repairs().is_empty());
        index.close().await;
    }
}
