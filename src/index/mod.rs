//! `metadata.db`: the derived index of conversations for listing, search and status (SQLite
//! through sqlx, WAL mode). Everything here can be rebuilt from the directories by `reindex`;
//! nothing is written here that is not already fsynced in a JSONL file.

pub mod rebuild;

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

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
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("background task failed: {0}")]
    Task(String),
}

/// A cheap `Clone` handle over the connection pool.
#[derive(Debug, Clone)]
pub struct Index {
    pool: SqlitePool,
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
    },
    SearchText {
        conversation_id: &'a str,
        item_id: &'a str,
        text: &'a str,
    },
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
            .pragma("cache_size", "-2000");
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .idle_timeout(Duration::from_secs(60))
            .connect_with(options)
            .await?;
        sqlx::migrate!().run(&pool).await?;
        Ok(Index { pool })
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Applies a batch of updates in one transaction. Every update is an idempotent upsert, so
    /// applying the same facts twice (a retry, a reconcile) changes nothing, and an older fact
    /// arriving late never overwrites a newer one: a conversation row only moves forward in its
    /// log (`meta_len`), and a finished turn never changes again.
    pub async fn apply(&self, updates: &[IndexUpdate<'_>]) -> Result<(), IndexError> {
        let mut tx = self.pool.begin().await?;
        for update in updates {
            apply_one(&mut tx, update).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn remove_conversation(&self, id: &str) -> Result<(), IndexError> {
        let mut tx = self.pool.begin().await?;
        remove_in(&mut tx, id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes everything the index knows about a conversation before it is written again.
    pub async fn clear_conversation(&self, id: &str) -> Result<(), IndexError> {
        self.remove_conversation(id).await
    }

    pub async fn get(&self, id: &str) -> Result<Option<Conversation>, IndexError> {
        let row = sqlx::query("SELECT data FROM conversations WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => Ok(Some(serde_json::from_str(row.get::<&str, _>(0))?)),
            None => Ok(None),
        }
    }

    /// A page of conversations, newest `updated_at` first.
    pub async fn list(&self, query: &ListQuery) -> Result<ListPage, IndexError> {
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
        if let Some(search) = query
            .search
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            sql.push(" AND id IN (SELECT conversation_id FROM search_rows WHERE rowid IN (SELECT rowid FROM search WHERE 1 = 1");
            push_search_terms(&mut sql, search);
            sql.push("))");
        }
        sql.push(" ORDER BY updated_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(limit) + 1);
        let rows = sql.build().fetch_all(&self.pool).await?;
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
    pub async fn answer(&self, key: &str) -> Result<Option<(u16, Value)>, IndexError> {
        let row = sqlx::query("SELECT status, response FROM answers WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => {
                let status: i64 = row.get(0);
                let response = serde_json::from_str(row.get::<&str, _>(1))?;
                Ok(Some((status as u16, response)))
            }
            None => Ok(None),
        }
    }

    /// How many bytes of each conversation's `metadata.jsonl` the index reflects.
    pub async fn meta_lens(&self) -> Result<HashMap<String, u64>, IndexError> {
        let rows = sqlx::query("SELECT id, meta_len FROM conversations")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|row| (row.get::<String, _>(0), row.get::<i64, _>(1) as u64))
            .collect())
    }

    pub async fn running_conversation_ids(&self) -> Result<Vec<String>, IndexError> {
        let rows = sqlx::query("SELECT id FROM conversations WHERE status = 'running'")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    pub async fn count(&self) -> Result<u64, IndexError> {
        let row = sqlx::query("SELECT count(*) FROM conversations")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.get::<i64, _>(0) as u64)
    }

    pub async fn runtime_state(&self, key: &str) -> Result<Option<String>, IndexError> {
        let row = sqlx::query("SELECT value FROM runtime_state WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    pub async fn set_runtime_state(&self, key: &str, value: &str) -> Result<(), IndexError> {
        sqlx::query("INSERT INTO runtime_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
            .bind(key)
            .bind(value)
            .execute(&self.pool)
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
            replace_search_row(tx, conversation_id, "", title).await?;
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
        } => {
            sqlx::query(
                "INSERT INTO answers (key, conversation_id, status, response) VALUES (?, ?, ?, ?)
                 ON CONFLICT (key) DO NOTHING",
            )
            .bind(key)
            .bind(conversation_id)
            .bind(i64::from(*status))
            .bind(serde_json::to_string(response)?)
            .execute(&mut **tx)
            .await?;
        }
        IndexUpdate::SearchText {
            conversation_id,
            item_id,
            text,
        } => {
            replace_search_row(tx, conversation_id, item_id, text).await?;
        }
    }
    Ok(())
}

/// Replaces the search row of one title (`item_id` "") or message.
async fn replace_search_row(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    conversation_id: &str,
    item_id: &str,
    text: &str,
) -> Result<(), IndexError> {
    let old =
        sqlx::query("SELECT rowid FROM search_rows WHERE conversation_id = ? AND item_id = ?")
            .bind(conversation_id)
            .bind(item_id)
            .fetch_optional(&mut **tx)
            .await?;
    if let Some(row) = old {
        let rowid: i64 = row.get(0);
        sqlx::query("DELETE FROM search WHERE rowid = ?")
            .bind(rowid)
            .execute(&mut **tx)
            .await?;
        sqlx::query("DELETE FROM search_rows WHERE rowid = ?")
            .bind(rowid)
            .execute(&mut **tx)
            .await?;
    }
    let inserted = sqlx::query("INSERT INTO search_rows (conversation_id, item_id) VALUES (?, ?)")
        .bind(conversation_id)
        .bind(item_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("INSERT INTO search (rowid, text) VALUES (?, ?)")
        .bind(inserted.last_insert_rowid())
        .bind(text)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn remove_in(tx: &mut sqlx::Transaction<'_, Sqlite>, id: &str) -> Result<(), IndexError> {
    sqlx::query("DELETE FROM search WHERE rowid IN (SELECT rowid FROM search_rows WHERE conversation_id = ?)")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    for statement in [
        "DELETE FROM search_rows WHERE conversation_id = ?",
        "DELETE FROM sessions WHERE conversation_id = ?",
        "DELETE FROM turns WHERE conversation_id = ?",
        "DELETE FROM answers WHERE conversation_id = ?",
        "DELETE FROM conversations WHERE id = ?",
    ] {
        sqlx::query(statement).bind(id).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Adds one condition per whitespace-separated term (all must match, case-insensitively).
/// Terms of three characters or more use the trigram index; shorter ones fall back to LIKE.
fn push_search_terms(sql: &mut QueryBuilder<Sqlite>, search: &str) {
    for term in search.split_whitespace() {
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

fn encode_cursor(updated_at: i64, id: String) -> String {
    format!("{updated_at}.{id}")
}

fn decode_cursor(cursor: &str) -> Result<(i64, String), IndexError> {
    let (updated_at, id) = cursor.split_once('.').ok_or(IndexError::BadCursor)?;
    let updated_at = updated_at.parse().map_err(|_| IndexError::BadCursor)?;
    Ok((updated_at, id.to_owned()))
}
