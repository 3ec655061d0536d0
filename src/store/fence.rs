//! Cluster mode seen from the store: the right to write a conversation (`WriteFence`), the
//! stamp each line is written with, and which stamped lines count (`Acceptance`).
//!
//! A lease alone cannot stop a writer that was paused past it from appending afterwards (a
//! lease is checked before a write, and the write can come much later). So in cluster mode a
//! line counts only once the coordinator has accepted its stamp `(epoch, commit)`, atomically
//! against the epoch, after the line was fsynced; when another instance takes the
//! conversation, the old epoch is closed at its last accepted commit. A reader takes a stamped
//! line only if its commit is at most the last accepted one of its epoch: what a stale writer
//! appends later is never read, wherever it lands in the file. The store only asks; how the
//! coordinator accepts (PostgreSQL) is `cluster::leases`.

use std::collections::HashMap;
use std::sync::Arc;

/// The right to write one conversation's files in cluster mode.
pub trait WriteFence: Send + Sync + std::fmt::Debug {
    /// The epoch every line is stamped with.
    fn epoch(&self) -> u64;
    /// Whether the lease still holds by this instance's clock: a cheap early refusal. Safety
    /// does not rest on it; `commit` decides.
    fn holds(&self) -> bool;
    /// The commit number for the next append (each append takes the next one).
    fn next_commit(&self) -> u64;
    /// Makes the lines stamped `(epoch, commit)` count. Called after they are durable; the
    /// write is acknowledged only when this succeeds.
    fn commit(&self, commit: u64) -> Result<(), FenceError>;
    /// Marks the conversation deleted, accepted like a commit: only then may its files go.
    fn commit_delete(&self) -> Result<(), FenceError>;
    /// Which stamped lines count, as far as this owner knows (its own commits included).
    fn acceptance(&self) -> Acceptance;
}

/// Why a fenced write was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// Another instance has taken the conversation (or it was deleted): the write does not
    /// count and never will.
    #[error("another instance owns the conversation now (this instance's lease ended)")]
    Lost,
    /// The coordinator did not answer: the write may or may not count. The owner stops, and
    /// whoever loads the conversation next learns which.
    #[error("the coordinator did not confirm the write ({0})")]
    Unknown(String),
}

/// What a fenced line carries besides its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub epoch: u64,
    /// `None` for lines that need no acceptance: a conversation's first files, which appear
    /// at once by a rename when whole.
    pub commit: Option<u64>,
}

impl Stamp {
    pub fn epoch_only(epoch: u64) -> Stamp {
        Stamp {
            epoch,
            commit: None,
        }
    }
}

/// Which stamped lines of one conversation count. The default knows nothing (embedded mode,
/// or a database that lost its rows): then a line is skipped only if its epoch is older than
/// a line before it.
#[derive(Debug, Clone, Default)]
pub struct Acceptance {
    /// Epochs another owner has closed, each with its last accepted commit.
    closed: Arc<HashMap<u64, u64>>,
    /// The current epoch and its last accepted commit.
    open: Option<(u64, u64)>,
}

/// How a reader treats one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    Rejected,
    /// Nothing is known of its epoch: the order of epochs decides.
    Unknown,
}

impl Acceptance {
    pub fn new(closed: Arc<HashMap<u64, u64>>, open: Option<(u64, u64)>) -> Acceptance {
        Acceptance { closed, open }
    }

    /// Whether the line stamped `(epoch, commit)` counts.
    pub fn judge(&self, epoch: u64, commit: Option<u64>) -> Verdict {
        let Some(commit) = commit else {
            return Verdict::Unknown;
        };
        let last = match self.open {
            Some((open, last)) if open == epoch => Some(last),
            Some((open, _)) if epoch > open => return Verdict::Rejected,
            _ => self.closed.get(&epoch).copied(),
        };
        match last {
            Some(last) if commit <= last => Verdict::Accepted,
            Some(_) => Verdict::Rejected,
            None => Verdict::Unknown,
        }
    }

    /// Whether anything is known (cluster mode with its coordinator's rows).
    pub fn is_known(&self) -> bool {
        self.open.is_some() || !self.closed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_counts_up_to_its_epochs_last_accepted_commit() {
        let acceptance = Acceptance::new(Arc::new(HashMap::from([(3, 5), (4, 0)])), Some((6, 2)));
        assert_eq!(acceptance.judge(3, Some(5)), Verdict::Accepted);
        assert_eq!(acceptance.judge(3, Some(6)), Verdict::Rejected);
        assert_eq!(acceptance.judge(4, Some(1)), Verdict::Rejected);
        assert_eq!(acceptance.judge(6, Some(2)), Verdict::Accepted);
        assert_eq!(acceptance.judge(6, Some(3)), Verdict::Rejected);
        assert_eq!(acceptance.judge(7, Some(1)), Verdict::Rejected);
        assert_eq!(acceptance.judge(2, Some(9)), Verdict::Unknown);
        assert_eq!(acceptance.judge(3, None), Verdict::Unknown);
        assert_eq!(Acceptance::default().judge(3, Some(1)), Verdict::Unknown);
    }
}
