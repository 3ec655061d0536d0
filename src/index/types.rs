//! The types the index's front and both backends share: its error, the updates written to it,
//! and the list queries and pages read from it.

use serde_json::Value;

use crate::domain::{Conversation, Session, Turn};

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index database: {0}")]
    Sqlx(#[from] sqlx::Error),
    #[error("index migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("index row is corrupt: {0}")]
    Corrupt(#[from] serde_json::Error),
    #[error("invalid cursor")]
    BadCursor,
    /// Cluster mode: PostgreSQL does not answer.
    #[error("PostgreSQL does not answer ({0})")]
    Unreachable(String),
    /// Cluster mode: a statement gave up waiting (a lock another session holds, its time
    /// bound): the database answers but something in it is stuck for now.
    #[error("PostgreSQL is busy ({0})")]
    Busy(String),
    /// A search the index cannot run as asked (a NUL byte, too many words).
    #[error("{0}")]
    BadSearch(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("background task failed: {0}")]
    Task(String),
}

impl IndexError {
    /// An error of the PostgreSQL index: one that says the database cannot be reached becomes
    /// `Unreachable` (the service answers 503 with the reason, never a 500).
    pub fn from_postgres(error: IndexError) -> IndexError {
        match error {
            IndexError::Sqlx(
                error @ (sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::WorkerCrashed),
            ) => IndexError::Unreachable(error.to_string()),
            IndexError::Sqlx(sqlx::Error::Database(error))
                if error.code().is_some_and(|code| {
                    // Class 08 (connection exception), 57P (operator intervention: shutdown).
                    code.starts_with("08") || code.starts_with("57P")
                }) =>
            {
                IndexError::Unreachable(error.to_string())
            }
            IndexError::Sqlx(sqlx::Error::Database(error))
                if error.code().is_some_and(|code| {
                    // 55P03 lock_timeout, 57014 statement_timeout (query canceled), 25P03
                    // idle_in_transaction_session_timeout, 40001 serialization failure,
                    // 40P01 deadlock: the statement may simply be tried again.
                    matches!(&*code, "55P03" | "57014" | "25P03" | "40001" | "40P01")
                }) =>
            {
                IndexError::Busy(error.to_string())
            }
            other => other,
        }
    }

    /// Which resource of the machine the failure says ran out (files, disk, memory, the
    /// database's connections), if any: such a failure passes.
    pub fn exhausted(&self) -> Option<&'static str> {
        match self {
            IndexError::Sqlx(sqlx::Error::Io(error)) => crate::limits::exhausted(error),
            IndexError::Sqlx(sqlx::Error::PoolTimedOut) => Some("database connections"),
            IndexError::Sqlx(sqlx::Error::Database(error)) => {
                // SQLite's primary result code is the low byte of the extended one.
                let code = error.code()?.parse::<i32>().ok()? & 0xff;
                match code {
                    14 => Some("open files"), // SQLITE_CANTOPEN: no descriptor left to open with
                    13 => Some("disk space"), // SQLITE_FULL
                    7 => Some("memory"),      // SQLITE_NOMEM
                    _ => None,
                }
            }
            IndexError::Store(crate::store::StoreError::Io { source, .. }) => {
                crate::limits::exhausted(source)
            }
            _ => None,
        }
    }
}

/// One change to the index. A batch of them is applied in one transaction.
#[derive(Debug)]
pub enum IndexUpdate<'a> {
    Conversation {
        conversation: &'a Conversation,
        meta_len: u64,
    },
    /// The title's search row (replaced whenever the title changes).
    Title {
        conversation_id: &'a str,
        title: &'a str,
    },
    Session {
        conversation_id: &'a str,
        session: &'a Session,
    },
    Turn {
        conversation_id: &'a str,
        turn: &'a Turn,
    },
    Answer {
        conversation_id: &'a str,
        key: &'a str,
        status: u16,
        response: &'a Value,
        body_hash: Option<&'a str>,
    },
    /// The search rows now reflect the root session's file up to `root_len` bytes: every
    /// finished message stored before that point has its row. Written after those rows (the
    /// live path queues it behind them), so a crash in between leaves it behind the file and
    /// the next start re-indexes the conversation.
    SearchedThrough {
        conversation_id: &'a str,
        root_len: u64,
    },
    /// A finished message of the root session, by its `seq`.
    SearchText {
        conversation_id: &'a str,
        seq: u64,
        text: &'a str,
    },
    /// A fork's messages: the source's search rows with `from_seq <= seq < below_seq` copied
    /// to the fork, whose history holds the same items with the same seqs.
    CopySearch {
        from_conversation_id: &'a str,
        to_conversation_id: &'a str,
        from_seq: u64,
        below_seq: u64,
    },
}

impl IndexUpdate<'_> {
    /// The conversation whose rows the update writes.
    pub fn conversation_id(&self) -> &str {
        match self {
            IndexUpdate::Conversation { conversation, .. } => &conversation.id,
            IndexUpdate::Title {
                conversation_id, ..
            }
            | IndexUpdate::Session {
                conversation_id, ..
            }
            | IndexUpdate::Turn {
                conversation_id, ..
            }
            | IndexUpdate::Answer {
                conversation_id, ..
            }
            | IndexUpdate::SearchText {
                conversation_id, ..
            }
            | IndexUpdate::SearchedThrough {
                conversation_id, ..
            } => conversation_id,
            IndexUpdate::CopySearch {
                to_conversation_id, ..
            } => to_conversation_id,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArchivedFilter {
    #[default]
    Active,
    Archived,
    All,
}

#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub archived: ArchivedFilter,
    pub search: Option<String>,
    pub limit: u32,
    pub cursor: Option<String>,
}

/// What the index reflects of one conversation's files (see `Index::indexed_lens`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedLens {
    pub meta_len: u64,
    pub root_len: u64,
    pub root_session_id: String,
}

#[derive(Debug)]
pub struct ListPage {
    pub conversations: Vec<Conversation>,
    pub next_cursor: Option<String>,
    /// With a search: for each listed conversation whose messages matched (not only its
    /// title), a piece of the first matching message (`query::snippet`).
    pub snippets: std::collections::BTreeMap<String, String>,
}
