//! `metadata.db`: the derived index of conversations for listing, search and status (SQLite
//! through sqlx, WAL mode). Everything here can be rebuilt from the directories by `reindex`;
//! nothing is written here that is not already fsynced in a JSONL file.

pub mod postgres;
pub mod rebuild;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use crate::domain::{Conversation, Session, Turn};
pub use crate::store::state::StoredAnswer;

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

#[derive(Debug, Clone)]
enum Backend {
    Sqlite {
        /// Readers never wait for writers in WAL mode.
        reader: SqlitePool,
        /// One connection: writers queue here, in order, instead of contending for SQLite's
        /// write lock (whose busy handler sleeps in steps of up to 100 ms).
        writer: SqlitePool,
    },
    Postgres(postgres::PgIndex),
}

/// Where an index at `path` notes the conversations it must re-index (see `Index::repairs`).
fn repairs_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".repair");
    path.with_file_name(name)
}

/// Cluster mode: where conversations whose PostgreSQL updates failed are noted, in the shared
/// data directory (any instance's next start re-indexes them).
pub const POSTGRES_REPAIRS: &str = "postgres.repair";

/// The runtime state key that says whether the last run stopped cleanly ("1") with an index
/// that matches the files; anything else makes the next start reconcile.
pub const CLEAN_SHUTDOWN: &str = "clean_shutdown";

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

fn bulk_load_is_sqlite() -> IndexError {
    IndexError::Task("a bulk load is for the embedded SQLite index".to_owned())
}

/// Search rows are numbered `(conversation num << SEQ_BITS) | seq`; the title is seq 0.
const SEQ_BITS: u32 = 24;
/// The most distinct words a search may have: each is one more condition on the index, and
/// SQLite limits how deep a query's expression tree may go.
pub const MAX_SEARCH_WORDS: usize = 32;
/// Only the start of a very long message is indexed for search, to keep the index and its
/// updates small; messages are rarely this long (tool output is not indexed at all).
const MAX_INDEXED_BYTES: usize = 8 * 1024;

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
}

impl Index {
    pub async fn open(path: &Path) -> Result<Index, IndexError> {
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // The index is derived: losing its last transactions in a power cut costs a
            // reconcile, never data, so it does not pay for an fsync per commit.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .pragma("cache_size", "-4000");
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!().run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(3)
            .min_connections(1)
            .idle_timeout(Duration::from_secs(60))
            .connect_with(options.read_only(true))
            .await?;
        Ok(Index {
            backend: Backend::Sqlite { reader, writer },
            out_of_date: Arc::default(),
            repairs: Arc::new(repairs_path(path)),
        })
    }

    /// The cluster's index in PostgreSQL. Conversations whose updates failed are noted in
    /// `repairs` (a file in the shared data directory) for the next start to re-index.
    pub async fn open_postgres(url: &str, repairs: &Path) -> Result<Index, IndexError> {
        Ok(Index {
            backend: Backend::Postgres(postgres::PgIndex::open(url).await?),
            out_of_date: Arc::default(),
            repairs: Arc::new(repairs.to_owned()),
        })
    }

    /// The PostgreSQL index, in cluster mode.
    pub fn postgres(&self) -> Option<&postgres::PgIndex> {
        match &self.backend {
            Backend::Postgres(pg) => Some(pg),
            Backend::Sqlite { .. } => None,
        }
    }

    /// The SQLite pools, or the PostgreSQL index to hand the call to.
    fn sqlite(&self) -> Result<(&SqlitePool, &SqlitePool), &postgres::PgIndex> {
        match &self.backend {
            Backend::Sqlite { reader, writer } => Ok((reader, writer)),
            Backend::Postgres(pg) => Err(pg),
        }
    }

    /// A fresh index for a bulk load (`reindex`): one connection, no journal, no fsync, a big
    /// page cache. Safe because a crash mid-reindex only means running it again;
    /// `finish_bulk_load` turns it into a normal WAL database.
    pub async fn create_for_bulk_load(path: &Path) -> Result<Index, IndexError> {
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Off)
            .synchronous(SqliteSynchronous::Off)
            .pragma("cache_size", "-131072");
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        sqlx::migrate!().run(&pool).await?;
        // Merging search segments while loading costs more than one merge at the end.
        for setting in [
            "INSERT INTO search (search, rank) VALUES ('automerge', 0)",
            "INSERT INTO search (search, rank) VALUES ('crisismerge', 64)",
        ] {
            sqlx::query(setting).execute(&pool).await?;
        }
        Ok(Index {
            backend: Backend::Sqlite {
                reader: pool.clone(),
                writer: pool,
            },
            out_of_date: Arc::default(),
            repairs: Arc::new(repairs_path(path)),
        })
    }

    /// Ends a bulk load: merges the search index once, restores the merge settings the live
    /// service wants, and switches to WAL.
    pub async fn finish_bulk_load(self) -> Result<(), IndexError> {
        let (_, writer) = self.sqlite().map_err(|_| bulk_load_is_sqlite())?;
        for statement in [
            "INSERT INTO search (search) VALUES ('optimize')",
            "INSERT INTO search (search, rank) VALUES ('automerge', 4)",
            "INSERT INTO search (search, rank) VALUES ('crisismerge', 16)",
        ] {
            sqlx::query(statement).execute(writer).await?;
        }
        sqlx::query("PRAGMA journal_mode = WAL")
            .execute(writer)
            .await?;
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
        let mut nums: HashMap<&str, i64> = HashMap::new();
        let mut next_num = first_num;
        let mut conversations = Vec::new();
        let mut search = Vec::new();
        let mut sessions = Vec::new();
        let mut turns = Vec::new();
        let mut answers = Vec::new();
        let mut root_lens: HashMap<&str, u64> = HashMap::new();
        for update in updates {
            match update {
                IndexUpdate::Conversation {
                    conversation,
                    meta_len,
                } => {
                    nums.insert(&conversation.id, next_num);
                    let data = serde_json::to_string(conversation)?;
                    conversations.push((next_num, *conversation, *meta_len, data));
                    next_num += 1;
                }
                IndexUpdate::Title {
                    conversation_id,
                    title,
                } => {
                    search.extend(
                        search_rowid(nums[conversation_id], 0)
                            .map(|rowid| (rowid, indexed_text(title))),
                    );
                }
                IndexUpdate::SearchText {
                    conversation_id,
                    seq,
                    text,
                } => {
                    search.extend(
                        search_rowid(nums[conversation_id], *seq)
                            .map(|rowid| (rowid, indexed_text(text))),
                    );
                }
                IndexUpdate::Session {
                    conversation_id,
                    session,
                } => {
                    let data = serde_json::to_string(session)?;
                    sessions.push((*conversation_id, *session, data));
                }
                IndexUpdate::Turn {
                    conversation_id,
                    turn,
                } => turns.push((*conversation_id, *turn)),
                // A reindex reads every fork's own files: there is nothing to copy.
                IndexUpdate::CopySearch { .. } => {}
                IndexUpdate::Answer {
                    conversation_id,
                    key,
                    status,
                    response,
                    body_hash,
                } => {
                    let response = serde_json::to_string(response)?;
                    answers.push((*conversation_id, *key, *status, response, *body_hash));
                }
                IndexUpdate::SearchedThrough {
                    conversation_id,
                    root_len,
                } => {
                    root_lens.insert(conversation_id, *root_len);
                }
            }
        }
        let (_, writer) = self.sqlite().map_err(|_| bulk_load_is_sqlite())?;
        let mut tx = writer.begin().await?;
        // SQLite allows 32,766 bound values per statement; these chunks stay well below.
        for chunk in conversations.chunks(1000) {
            let mut sql = QueryBuilder::<Sqlite>::new(
                "INSERT INTO conversations (num, id, updated_at, archived, status, meta_len, root_len, data) ",
            );
            sql.push_values(chunk, |mut row, (num, conversation, meta_len, data)| {
                let root_len = root_lens.get(conversation.id.as_str()).copied();
                row.push_bind(*num)
                    .push_bind(&conversation.id)
                    .push_bind(conversation.updated_at.timestamp_micros())
                    .push_bind(conversation.archived)
                    .push_bind(conversation.status.as_str())
                    .push_bind(*meta_len as i64)
                    .push_bind(root_len.unwrap_or(0) as i64)
                    .push_bind(data);
            });
            sql.build().execute(&mut *tx).await?;
        }
        for chunk in search.chunks(5000) {
            let mut sql = QueryBuilder::<Sqlite>::new("INSERT INTO search (rowid, text) ");
            sql.push_values(chunk, |mut row, (rowid, text)| {
                row.push_bind(*rowid).push_bind(*text);
            });
            sql.build().execute(&mut *tx).await?;
        }
        for chunk in sessions.chunks(3000) {
            let mut sql =
                QueryBuilder::<Sqlite>::new("INSERT INTO sessions (id, conversation_id, data) ");
            sql.push_values(chunk, |mut row, (conversation_id, session, data)| {
                row.push_bind(&session.id)
                    .push_bind(*conversation_id)
                    .push_bind(data);
            });
            sql.build().execute(&mut *tx).await?;
        }
        for chunk in turns.chunks(1000) {
            let mut sql = QueryBuilder::<Sqlite>::new(
                "INSERT INTO turns (id, conversation_id, session_id, status, started_at, ended_at, error) ",
            );
            sql.push_values(chunk, |mut row, (conversation_id, turn)| {
                row.push_bind(&turn.id)
                    .push_bind(*conversation_id)
                    .push_bind(&turn.session_id)
                    .push_bind(turn.status.as_str())
                    .push_bind(turn.started_at.to_rfc3339())
                    .push_bind(turn.ended_at.map(|t| t.to_rfc3339()))
                    .push_bind(&turn.error);
            });
            sql.build().execute(&mut *tx).await?;
        }
        for chunk in answers.chunks(2000) {
            let mut sql = QueryBuilder::<Sqlite>::new(
                "INSERT INTO answers (key, conversation_id, status, response, body_hash) ",
            );
            sql.push_values(
                chunk,
                |mut row, (conversation_id, key, status, response, body_hash)| {
                    row.push_bind(*key)
                        .push_bind(*conversation_id)
                        .push_bind(i64::from(*status))
                        .push_bind(response)
                        .push_bind(*body_hash);
                },
            );
            sql.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(next_num)
    }

    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite { reader, writer } => {
                reader.close().await;
                writer.close().await;
            }
            Backend::Postgres(pg) => pg.close().await,
        }
    }

    /// Records that an update of these conversations failed: the next start must re-index them
    /// from their files, even after a clean stop.
    pub async fn mark_out_of_date(&self, conversation_ids: &[&str]) {
        self.out_of_date.store(true, Ordering::SeqCst);
        if !conversation_ids.is_empty() {
            let lines: String = conversation_ids
                .iter()
                .map(|id| format!("{id}\n"))
                .collect();
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&*self.repairs)
                .and_then(|mut file| std::io::Write::write_all(&mut file, lines.as_bytes()));
            if let Err(error) = appended {
                tracing::error!(%error, path = %self.repairs.display(), "cannot note conversations to re-index");
            }
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

    /// Gives back the page caches of the writer and of every idle reader (SQLite frees what it
    /// can), for a service that has gone idle. The caches fill again as they are used.
    pub async fn release_memory(&self) -> Result<(), IndexError> {
        // Every idle connection has a cache of its own (a busy one is in use anyway).
        let Ok((reader, writer)) = self.sqlite() else {
            // PostgreSQL's memory is the database server's.
            return Ok(());
        };
        let mut idle = Vec::new();
        for pool in [writer, reader] {
            while let Some(connection) = pool.try_acquire() {
                idle.push(connection);
            }
        }
        for connection in &mut idle {
            sqlx::query("PRAGMA shrink_memory")
                .execute(&mut **connection)
                .await?;
        }
        Ok(())
    }

    /// Applies a batch of updates in one transaction. Every update is an idempotent upsert, so
    /// applying the same facts twice (a retry, a reconcile) changes nothing, and an older fact
    /// arriving late never overwrites a newer one: a conversation row only moves forward in its
    /// log (`meta_len`), and a finished turn never changes again.
    pub async fn apply(&self, updates: &[IndexUpdate<'_>]) -> Result<(), IndexError> {
        let writer = match self.sqlite() {
            Ok((_, writer)) => writer,
            Err(pg) => return pg.apply(updates).await.map_err(IndexError::from_postgres),
        };
        let mut tx = writer.begin().await?;
        for update in updates {
            apply_one(&mut tx, update).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn remove_conversation(&self, id: &str) -> Result<(), IndexError> {
        let writer = match self.sqlite() {
            Ok((_, writer)) => writer,
            Err(pg) => {
                return pg
                    .remove_conversation(id)
                    .await
                    .map_err(IndexError::from_postgres);
            }
        };
        let mut tx = writer.begin().await?;
        remove_in(&mut tx, id).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn get(&self, id: &str) -> Result<Option<Conversation>, IndexError> {
        let reader = match self.sqlite() {
            Ok((reader, _)) => reader,
            Err(pg) => return pg.get(id).await.map_err(IndexError::from_postgres),
        };
        let row = sqlx::query("SELECT data FROM conversations WHERE id = ?")
            .bind(id)
            .fetch_optional(reader)
            .await?;
        match row {
            Some(row) => Ok(Some(serde_json::from_str(row.get::<&str, _>(0))?)),
            None => Ok(None),
        }
    }

    /// A page of conversations, newest `updated_at` first.
    pub async fn list(&self, query: &ListQuery) -> Result<ListPage, IndexError> {
        let reader = match self.sqlite() {
            Ok((reader, _)) => reader,
            Err(pg) => return pg.list(query).await.map_err(IndexError::from_postgres),
        };
        let limit = query.limit.clamp(1, 500);
        let mut sql = QueryBuilder::<Sqlite>::new(
            "SELECT data, updated_at, id FROM conversations WHERE 1 = 1",
        );
        match query.archived {
            ArchivedFilter::Active => sql.push(" AND archived = 0"),
            ArchivedFilter::Archived => sql.push(" AND archived = 1"),
            ArchivedFilter::All => &mut sql,
        };
        if let Some(cursor) = &query.cursor {
            let (updated_at, id) = decode_cursor(cursor)?;
            sql.push(" AND (updated_at, id) < (")
                .push_bind(updated_at)
                .push(", ")
                .push_bind(id)
                .push(")");
        }
        let terms = search_terms(query.search.as_deref().unwrap_or_default())?;
        if !terms.is_empty() {
            sql.push(" AND num IN (SELECT rowid >> ")
                .push(SEQ_BITS)
                .push(" FROM search WHERE 1 = 1");
            push_search_terms(&mut sql, &terms);
            sql.push(")");
        }
        sql.push(" ORDER BY updated_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(limit) + 1);
        let rows = sql.build().fetch_all(reader).await?;
        let mut conversations = Vec::with_capacity(rows.len());
        let mut next_cursor = None;
        for (position, row) in rows.iter().enumerate() {
            if position == limit as usize {
                let last = &rows[position - 1];
                next_cursor = Some(encode_cursor(last.get(1), last.get(2)));
                break;
            }
            conversations.push(serde_json::from_str(row.get::<&str, _>(0))?);
        }
        Ok(ListPage {
            conversations,
            next_cursor,
        })
    }

    /// The stored answer to a request with this (scope-qualified) idempotency key.
    pub async fn answer(&self, key: &str) -> Result<Option<StoredAnswer>, IndexError> {
        let reader = match self.sqlite() {
            Ok((reader, _)) => reader,
            Err(pg) => return pg.answer(key).await.map_err(IndexError::from_postgres),
        };
        let row = sqlx::query("SELECT status, response, body_hash FROM answers WHERE key = ?")
            .bind(key)
            .fetch_optional(reader)
            .await?;
        match row {
            Some(row) => Ok(Some(StoredAnswer {
                status: row.get::<i64, _>(0) as u16,
                response: serde_json::from_str(row.get::<&str, _>(1))?,
                body_hash: row.get(2),
            })),
            None => Ok(None),
        }
    }

    /// What the index reflects of each conversation's files: the bytes of its
    /// `metadata.jsonl`, and of its root session's file for search.
    pub async fn indexed_lens(&self) -> Result<HashMap<String, IndexedLens>, IndexError> {
        let reader = match self.sqlite() {
            Ok((reader, _)) => reader,
            Err(pg) => return pg.indexed_lens().await.map_err(IndexError::from_postgres),
        };
        let rows = sqlx::query(
            "SELECT id, meta_len, root_len, json_extract(data, '$.root_session_id') FROM conversations",
        )
        .fetch_all(reader)
        .await?;
        Ok(rows
            .iter()
            .map(|row| {
                let lens = IndexedLens {
                    meta_len: row.get::<i64, _>(1) as u64,
                    root_len: row.get::<i64, _>(2) as u64,
                    root_session_id: row.get::<Option<String>, _>(3).unwrap_or_default(),
                };
                (row.get::<String, _>(0), lens)
            })
            .collect())
    }

    pub async fn running_conversation_ids(&self) -> Result<Vec<String>, IndexError> {
        let reader = match self.sqlite() {
            Ok((reader, _)) => reader,
            Err(pg) => {
                return pg
                    .running_conversation_ids()
                    .await
                    .map_err(IndexError::from_postgres);
            }
        };
        let rows = sqlx::query("SELECT id FROM conversations WHERE status = 'running'")
            .fetch_all(reader)
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    pub async fn runtime_state(&self, key: &str) -> Result<Option<String>, IndexError> {
        let reader = match self.sqlite() {
            Ok((reader, _)) => reader,
            Err(pg) => {
                return pg
                    .runtime_state(key)
                    .await
                    .map_err(IndexError::from_postgres);
            }
        };
        let row = sqlx::query("SELECT value FROM runtime_state WHERE key = ?")
            .bind(key)
            .fetch_optional(reader)
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    pub async fn set_runtime_state(&self, key: &str, value: &str) -> Result<(), IndexError> {
        let writer = match self.sqlite() {
            Ok((_, writer)) => writer,
            Err(pg) => {
                return pg
                    .set_runtime_state(key, value)
                    .await
                    .map_err(IndexError::from_postgres);
            }
        };
        sqlx::query("INSERT INTO runtime_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
            .bind(key)
            .bind(value)
            .execute(writer)
            .await?;
        Ok(())
    }
}

async fn apply_one(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    update: &IndexUpdate<'_>,
) -> Result<(), IndexError> {
    match update {
        IndexUpdate::Conversation {
            conversation,
            meta_len,
        } => {
            sqlx::query(
                "INSERT INTO conversations (id, updated_at, archived, status, meta_len, data) VALUES (?, ?, ?, ?, ?, ?)
                 ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, archived = excluded.archived,
                 status = excluded.status, meta_len = excluded.meta_len, data = excluded.data
                 WHERE excluded.meta_len >= conversations.meta_len",
            )
            .bind(&conversation.id)
            .bind(conversation.updated_at.timestamp_micros())
            .bind(conversation.archived)
            .bind(conversation.status.as_str())
            .bind(*meta_len as i64)
            .bind(serde_json::to_string(conversation)?)
            .execute(&mut **tx)
            .await?;
        }
        IndexUpdate::Title {
            conversation_id,
            title,
        } => {
            put_search_row(tx, conversation_id, 0, title).await?;
        }
        IndexUpdate::Session {
            conversation_id,
            session,
        } => {
            sqlx::query(
                "INSERT INTO sessions (id, conversation_id, data) VALUES (?, ?, ?)
                 ON CONFLICT (id) DO UPDATE SET data = excluded.data",
            )
            .bind(&session.id)
            .bind(conversation_id)
            .bind(serde_json::to_string(session)?)
            .execute(&mut **tx)
            .await?;
        }
        IndexUpdate::Turn {
            conversation_id,
            turn,
        } => {
            sqlx::query(
                "INSERT INTO turns (id, conversation_id, session_id, status, started_at, ended_at, error) VALUES (?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (id) DO UPDATE SET status = excluded.status, ended_at = excluded.ended_at, error = excluded.error
                 WHERE turns.status = 'running'",
            )
            .bind(&turn.id)
            .bind(conversation_id)
            .bind(&turn.session_id)
            .bind(turn.status.as_str())
            .bind(turn.started_at.to_rfc3339())
            .bind(turn.ended_at.map(|t| t.to_rfc3339()))
            .bind(&turn.error)
            .execute(&mut **tx)
            .await?;
        }
        IndexUpdate::Answer {
            conversation_id,
            key,
            status,
            response,
            body_hash,
        } => {
            sqlx::query(
                "INSERT INTO answers (key, conversation_id, status, response, body_hash) VALUES (?, ?, ?, ?, ?)
                 ON CONFLICT (key) DO NOTHING",
            )
            .bind(key)
            .bind(conversation_id)
            .bind(i64::from(*status))
            .bind(serde_json::to_string(response)?)
            .bind(body_hash)
            .execute(&mut **tx)
            .await?;
        }
        IndexUpdate::SearchedThrough {
            conversation_id,
            root_len,
        } => {
            sqlx::query("UPDATE conversations SET root_len = MAX(root_len, ?) WHERE id = ?")
                .bind(*root_len as i64)
                .bind(conversation_id)
                .execute(&mut **tx)
                .await?;
        }
        IndexUpdate::SearchText {
            conversation_id,
            seq,
            text,
        } => {
            put_search_row(tx, conversation_id, *seq, text).await?;
        }
        IndexUpdate::CopySearch {
            from_conversation_id,
            to_conversation_id,
            from_seq,
            below_seq,
        } => {
            let below = (*below_seq).min(1 << SEQ_BITS) as i64;
            sqlx::query(
                "INSERT OR REPLACE INTO search (rowid, text)
                 SELECT (target.num << ?1) | (search.rowid & ((1 << ?1) - 1)), search.text
                 FROM search, conversations AS source, conversations AS target
                 WHERE source.id = ?2 AND target.id = ?3
                 AND search.rowid >= (source.num << ?1) + ?4 AND search.rowid < (source.num << ?1) + ?5",
            )
            .bind(SEQ_BITS)
            .bind(from_conversation_id)
            .bind(to_conversation_id)
            .bind((*from_seq).max(1) as i64)
            .bind(below)
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(())
}

/// Writes (or replaces) the search row of a title (seq 0) or a message.
async fn put_search_row(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    conversation_id: &str,
    seq: u64,
    text: &str,
) -> Result<(), IndexError> {
    if seq >= 1 << SEQ_BITS {
        return Ok(());
    }
    sqlx::query(
        "INSERT OR REPLACE INTO search (rowid, text)
         SELECT (num << ?) | ?, ? FROM conversations WHERE id = ?",
    )
    .bind(SEQ_BITS)
    .bind(seq as i64)
    .bind(indexed_text(text))
    .bind(conversation_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The search rowid of a conversation's title (seq 0) or message. Messages past the 16.7
/// millionth of a conversation are not indexed for search rather than spill into the next
/// conversation's range.
fn search_rowid(num: i64, seq: u64) -> Option<i64> {
    (seq < 1 << SEQ_BITS).then_some((num << SEQ_BITS) | seq as i64)
}

pub(crate) fn indexed_text(text: &str) -> &str {
    if text.len() <= MAX_INDEXED_BYTES {
        return text;
    }
    &text[..crate::text::floor_char_boundary(text, MAX_INDEXED_BYTES)]
}

async fn remove_in(tx: &mut sqlx::Transaction<'_, Sqlite>, id: &str) -> Result<(), IndexError> {
    sqlx::query(
        "DELETE FROM search WHERE rowid BETWEEN
         (SELECT num << ? FROM conversations WHERE id = ?) AND
         (SELECT (num << ?) | ? FROM conversations WHERE id = ?)",
    )
    .bind(SEQ_BITS)
    .bind(id)
    .bind(SEQ_BITS)
    .bind((1i64 << SEQ_BITS) - 1)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    for statement in [
        "DELETE FROM sessions WHERE conversation_id = ?",
        "DELETE FROM turns WHERE conversation_id = ?",
        "DELETE FROM answers WHERE conversation_id = ?",
        "DELETE FROM conversations WHERE id = ?",
    ] {
        sqlx::query(statement).bind(id).execute(&mut **tx).await?;
    }
    Ok(())
}

/// The distinct whitespace-separated words of a search, in order. A NUL byte is refused:
/// SQLite ends a text at it, so `"\0a"` would become an empty pattern that matches every
/// conversation. So is a search of more than [`MAX_SEARCH_WORDS`] words.
pub(crate) fn search_terms(search: &str) -> Result<Vec<&str>, IndexError> {
    if search.contains('\0') {
        return Err(IndexError::BadSearch(
            "q must not contain a NUL character".to_owned(),
        ));
    }
    let mut terms: Vec<&str> = Vec::new();
    for term in search.split_whitespace() {
        if !terms.contains(&term) {
            terms.push(term);
        }
    }
    if terms.len() > MAX_SEARCH_WORDS {
        return Err(IndexError::BadSearch(format!(
            "q has {} different words; a search may have at most {MAX_SEARCH_WORDS}",
            terms.len()
        )));
    }
    Ok(terms)
}

/// Adds one condition per term (all must match, case-insensitively). Terms of three
/// characters or more use the trigram index, each as one quoted phrase (so FTS5 syntax in a
/// word is searched for as text); shorter ones fall back to LIKE.
fn push_search_terms(sql: &mut QueryBuilder<Sqlite>, terms: &[&str]) {
    for term in terms {
        if term.chars().count() >= 3 {
            sql.push(" AND search MATCH ")
                .push_bind(format!("\"{}\"", term.replace('"', "\"\"")));
        } else {
            let escaped = term
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            sql.push(" AND text LIKE ")
                .push_bind(format!("%{escaped}%"))
                .push(" ESCAPE '\\'");
        }
    }
}

pub(crate) fn encode_cursor(updated_at: i64, id: String) -> String {
    format!("{updated_at}.{id}")
}

pub(crate) fn decode_cursor(cursor: &str) -> Result<(i64, String), IndexError> {
    let (updated_at, id) = cursor.split_once('.').ok_or(IndexError::BadCursor)?;
    let updated_at = updated_at.parse().map_err(|_| IndexError::BadCursor)?;
    Ok((updated_at, id.to_owned()))
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

    #[tokio::test]
    async fn searches_up_to_the_word_limit_run_and_longer_or_nul_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("metadata.db")).await.unwrap();
        let search = |q: String| ListQuery {
            archived: ArchivedFilter::All,
            search: Some(q),
            limit: 10,
            cursor: None,
        };
        let mut words: Vec<String> = (0..MAX_SEARCH_WORDS / 2)
            .map(|n| format!("word{n}"))
            .collect();
        words.extend((0..MAX_SEARCH_WORDS / 2).map(|n| format!("{n}")));
        assert!(index.list(&search(words.join(" "))).await.is_ok());
        words.push("one-more".to_owned());
        assert!(matches!(
            index.list(&search(words.join(" "))).await,
            Err(IndexError::BadSearch(_))
        ));
        // Repeated words count once.
        let repeated = vec!["same"; 500].join(" ");
        assert!(index.list(&search(repeated)).await.is_ok());
        for q in ["\0a", "a\0", "\0"] {
            assert!(matches!(
                index.list(&search(q.to_owned())).await,
                Err(IndexError::BadSearch(_))
            ));
        }
        index.close().await;
    }
}
