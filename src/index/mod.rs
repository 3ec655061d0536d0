//! `metadata.db`: the derived index of conversations for listing, search and status. Everything
//! here can be rebuilt from the directories by `reindex`; nothing is written here that is not
//! already fsynced in a JSONL file.
//!
//! This front is what callers see: one [`Index`] over either backend, the embedded SQLite
//! database (`sqlite.rs`) or the cluster's PostgreSQL one (`postgres.rs`), whose methods mirror
//! each other. The shared types are in `types.rs`, the search and cursor rules in `query.rs`,
//! the notes of what to re-index in `repairs.rs`.

pub mod migrations;
pub mod postgres;
mod query;
pub mod rebuild;
mod repairs;
mod sqlite;
mod types;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::domain::Conversation;
pub use crate::store::state::StoredAnswer;
pub use query::MAX_SEARCH_WORDS;
pub use repairs::{CLEAN_SHUTDOWN, POSTGRES_REPAIRS, note_for_reindex};
pub use types::{ArchivedFilter, IndexError, IndexUpdate, IndexedLens, ListPage, ListQuery};

use postgres::PgIndex;
use sqlite::SqliteIndex;

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(SqliteIndex),
    Postgres(PgIndex),
}

/// Calls the method both backends have under the same name; PostgreSQL's errors pass through
/// [`IndexError::from_postgres`] so that an unreachable database is told apart.
macro_rules! on_backend {
    ($index:expr, $db:ident => $call:expr) => {
        match &$index.backend {
            Backend::Sqlite($db) => $call.await,
            Backend::Postgres($db) => $call.await.map_err(IndexError::from_postgres),
        }
    };
}

/// A cheap `Clone` handle over the connection pools: the embedded SQLite database, or the
/// cluster's PostgreSQL one (`postgres.rs`). Callers see one API either way.
#[derive(Debug, Clone)]
pub struct Index {
    backend: Backend,
    /// An update failed since the index was opened: it no longer matches the files, and only a
    /// reconcile at the next start repairs it. Kept in memory because the write that records
    /// it in the database usually fails for the same reason the update did.
    out_of_date: Arc<AtomicBool>,
    /// The conversations whose updates failed, one id a line, beside the database: the next
    /// start re-indexes them from their files. (The reconcile alone would miss them when a
    /// later update of the same conversation succeeded: its log length would match.)
    repairs: Arc<PathBuf>,
    /// Noted conversations being re-indexed now (taken out of the repairs file, not done yet).
    repairing: Arc<std::sync::atomic::AtomicUsize>,
    /// The conversations this process noted, kept in memory too until they are re-indexed:
    /// the note on disk can fail (the disk is full) or be taken by another instance.
    noted: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// Where an index at `path` notes the conversations it must re-index (see `Index::repairs`).
fn repairs_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".repair");
    path.with_file_name(name)
}

fn bulk_load_is_sqlite() -> IndexError {
    IndexError::Task("a bulk load is for the embedded SQLite index".to_owned())
}

impl Index {
    pub async fn open(path: &Path) -> Result<Index, IndexError> {
        Ok(Index::new(
            Backend::Sqlite(SqliteIndex::open(path).await?),
            repairs_path(path),
        ))
    }

    /// The cluster's index in PostgreSQL. Conversations whose updates failed are noted in
    /// `repairs` (a file in the shared data directory) for the next start to re-index.
    pub async fn open_postgres(url: &str, repairs: &Path) -> Result<Index, IndexError> {
        Ok(Index::new(
            Backend::Postgres(PgIndex::open(url).await?),
            repairs.to_owned(),
        ))
    }

    fn new(backend: Backend, repairs: PathBuf) -> Index {
        Index {
            backend,
            out_of_date: Arc::default(),
            repairs: Arc::new(repairs),
            repairing: Arc::default(),
            noted: Arc::default(),
        }
    }

    /// The PostgreSQL index, in cluster mode.
    pub fn postgres(&self) -> Option<&PgIndex> {
        match &self.backend {
            Backend::Postgres(pg) => Some(pg),
            Backend::Sqlite(_) => None,
        }
    }

    /// A fresh index for a bulk load (`reindex`): one connection, no journal, no fsync, a big
    /// page cache. Safe because a crash mid-reindex only means running it again;
    /// `finish_bulk_load` turns it into a normal WAL database.
    pub async fn create_for_bulk_load(path: &Path) -> Result<Index, IndexError> {
        Ok(Index::new(
            Backend::Sqlite(SqliteIndex::create_for_bulk_load(path).await?),
            repairs_path(path),
        ))
    }

    /// Ends a bulk load: merges the search index once, restores the merge settings the live
    /// service wants, switches to WAL and closes the index.
    pub async fn finish_bulk_load(self) -> Result<(), IndexError> {
        let Backend::Sqlite(db) = &self.backend else {
            return Err(bulk_load_is_sqlite());
        };
        db.finish_bulk_load().await?;
        self.close().await;
        Ok(())
    }

    /// Inserts conversations into a fresh index with multi-row statements (a round trip per
    /// few hundred rows instead of several per conversation). The rows are those `apply`
    /// writes for the same updates; conversations are numbered from `first_num`. Returns the
    /// next free number.
    pub async fn bulk_insert(
        &self,
        updates: &[IndexUpdate<'_>],
        first_num: i64,
    ) -> Result<i64, IndexError> {
        let Backend::Sqlite(db) = &self.backend else {
            return Err(bulk_load_is_sqlite());
        };
        db.bulk_insert(updates, first_num).await
    }

    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite(db) => db.close().await,
            Backend::Postgres(pg) => pg.close().await,
        }
    }

    /// Gives back the page caches of the writer and of every idle reader (SQLite frees what it
    /// can), for a service that has gone idle. The caches fill again as they are used.
    pub async fn release_memory(&self) -> Result<(), IndexError> {
        match &self.backend {
            Backend::Sqlite(db) => db.release_memory().await,
            // PostgreSQL's memory is the database server's.
            Backend::Postgres(_) => Ok(()),
        }
    }

    /// Applies a batch of updates in one transaction. Every update is an idempotent upsert, so
    /// applying the same facts twice (a retry, a reconcile) changes nothing, and an older fact
    /// arriving late never overwrites a newer one: a conversation row only moves forward in its
    /// log (`meta_len`), and a finished turn never changes again.
    pub async fn apply(&self, updates: &[IndexUpdate<'_>]) -> Result<(), IndexError> {
        on_backend!(self, db => db.apply(updates))
    }

    pub async fn remove_conversation(&self, id: &str) -> Result<(), IndexError> {
        on_backend!(self, db => db.remove_conversation(id))
    }

    pub async fn get(&self, id: &str) -> Result<Option<Conversation>, IndexError> {
        on_backend!(self, db => db.get(id))
    }

    /// A page of conversations, newest `updated_at` first.
    pub async fn list(&self, query: &ListQuery) -> Result<ListPage, IndexError> {
        on_backend!(self, db => db.list(query))
    }

    /// The stored answer to a request with this (scope-qualified) idempotency key.
    pub async fn answer(&self, key: &str) -> Result<Option<StoredAnswer>, IndexError> {
        on_backend!(self, db => db.answer(key))
    }

    /// What the index reflects of each conversation's files: the bytes of its
    /// `metadata.jsonl`, and of its root session's file for search.
    pub async fn indexed_lens(&self) -> Result<HashMap<String, IndexedLens>, IndexError> {
        on_backend!(self, db => db.indexed_lens())
    }

    pub async fn running_conversation_ids(&self) -> Result<Vec<String>, IndexError> {
        on_backend!(self, db => db.running_conversation_ids())
    }

    pub async fn runtime_state(&self, key: &str) -> Result<Option<String>, IndexError> {
        on_backend!(self, db => db.runtime_state(key))
    }

    pub async fn set_runtime_state(&self, key: &str, value: &str) -> Result<(), IndexError> {
        on_backend!(self, db => db.set_runtime_state(key, value))
    }
}
