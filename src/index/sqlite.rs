//! The embedded index in SQLite (`metadata.db`, through sqlx, WAL mode), with search through
//! FTS5's trigram tokenizer. Its methods mirror the PostgreSQL index's (`postgres.rs`): the
//! front (`Index`) hands each call to one or the other.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use super::query::{
    SNIPPET_CANDIDATES, decode_cursor, encode_cursor, indexed_text, page_snippets, search_terms,
};
use super::types::{ArchivedFilter, IndexError, IndexUpdate, IndexedLens, ListPage, ListQuery};
use crate::domain::Conversation;
use crate::store::state::StoredAnswer;

/// Search rows are numbered `(conversation num << SEQ_BITS) | seq`; the title is seq 0.
const SEQ_BITS: u32 = 24;

/// The pools of one SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteIndex {
    /// Readers never wait for writers in WAL mode.
    reader: SqlitePool,
    /// One connection: writers queue here, in order, instead of contending for SQLite's
    /// write lock (whose busy handler sleeps in steps of up to 100 ms).
    writer: SqlitePool,
    /// One connection that only copies the WAL back into the database (`checkpoints`). By
    /// default the commit that fills the WAL does it, with its fsyncs, on the one writer
    /// connection that every create and turn end waits for.
    checkpointer: Option<SqlitePool>,
}

/// How often the WAL is copied back into the database, off the writer's path.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

impl SqliteIndex {
    pub async fn open(path: &Path) -> Result<SqliteIndex, IndexError> {
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // The index is derived: losing its last transactions in a power cut costs a
            // reconcile, never data, so it does not pay for an fsync per commit.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .pragma("cache_size", "-4000");
        // No connection checkpoints when its commit fills the WAL: `checkpoints` does, apart.
        let options = options.pragma("wal_autocheckpoint", "0");
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(options.clone())
            .await?;
        super::migrations::sqlite().run(&writer).await?;
        let checkpointer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(options.clone())
            .await?;
        tokio::spawn(checkpoints(checkpointer.clone()));
        let reader = SqlitePoolOptions::new()
            .max_connections(3)
            .min_connections(1)
            .idle_timeout(Duration::from_secs(60))
            .connect_with(options.read_only(true))
            .await?;
        Ok(SqliteIndex {
            reader,
            writer,
            checkpointer: Some(checkpointer),
        })
    }

    /// A fresh index for a bulk load (`reindex`): one connection, no journal, no fsync, a big
    /// page cache. Safe because a crash mid-reindex only means running it again;
    /// `finish_bulk_load` turns it into a normal WAL database.
    pub async fn create_for_bulk_load(path: &Path) -> Result<SqliteIndex, IndexError> {
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
        super::migrations::sqlite().run(&pool).await?;
        // Merging search segments while loading costs more than one merge at the end.
        for setting in [
            "INSERT INTO search (search, rank) VALUES ('automerge', 0)",
            "INSERT INTO search (search, rank) VALUES ('crisismerge', 64)",
        ] {
            sqlx::query(setting).execute(&pool).await?;
        }
        Ok(SqliteIndex {
            reader: pool.clone(),
            writer: pool,
            checkpointer: None,
        })
    }

    /// Ends a bulk load: merges the search index once, restores the merge settings the live
    /// service wants, and switches to WAL.
    pub async fn finish_bulk_load(&self) -> Result<(), IndexError> {
        let writer = &self.writer;
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
        let mut tx = self.writer.begin().await?;
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
        self.reader.close().await;
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.close().await;
        }
        self.writer.close().await;
    }

    /// Gives back the page caches of the writer and of every idle reader (SQLite frees what it
    /// can), for a service that has gone idle. The caches fill again as they are used.
    pub async fn release_memory(&self) -> Result<(), IndexError> {
        // Every idle connection has a cache of its own (a busy one is in use anyway).
        let mut idle = Vec::new();
        for pool in [&self.writer, &self.reader] {
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
        let writer = &self.writer;
        let mut tx = writer.begin().await?;
        for update in updates {
            apply_one(&mut tx, update).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn remove_conversation(&self, id: &str) -> Result<(), IndexError> {
        let writer = &self.writer;
        let mut tx = writer.begin().await?;
        remove_in(&mut tx, id).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn get(&self, id: &str) -> Result<Option<Conversation>, IndexError> {
        let reader = &self.reader;
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
        let reader = &self.reader;
        let limit = query.limit.clamp(1, 500);
        let mut sql = QueryBuilder::<Sqlite>::new(
            "SELECT data, updated_at, id, num FROM conversations WHERE 1 = 1",
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
        let mut listed = HashMap::new();
        for (position, row) in rows.iter().enumerate() {
            if position == limit as usize {
                let last = &rows[position - 1];
                next_cursor = Some(encode_cursor(last.get(1), last.get(2)));
                break;
            }
            let conversation: crate::domain::Conversation =
                serde_json::from_str(row.get::<&str, _>(0))?;
            listed.insert(
                row.get::<i64, _>(3),
                (row.get::<String, _>(2), conversation.title.clone()),
            );
            conversations.push(conversation);
        }
        let snippets = self.snippets(&listed, &terms).await?;
        Ok(ListPage {
            conversations,
            next_cursor,
            snippets,
        })
    }

    /// For the listed conversations (`num` → id and title) whose messages (not their title,
    /// row 0) match every term: a snippet of the first such message that says more than the
    /// title (`snippet_beside_title`). One query for the whole page.
    async fn snippets(
        &self,
        listed: &HashMap<i64, (String, String)>,
        terms: &[&str],
    ) -> Result<std::collections::BTreeMap<String, String>, IndexError> {
        if terms.is_empty() || listed.is_empty() {
            return Ok(std::collections::BTreeMap::new());
        }
        let mut sql = QueryBuilder::<Sqlite>::new("SELECT num, text FROM (SELECT rowid >> ");
        sql.push(SEQ_BITS)
            .push(" AS num, rowid, text, row_number() OVER (PARTITION BY rowid >> ")
            .push(SEQ_BITS)
            .push(" ORDER BY rowid) AS n FROM search WHERE (rowid & ")
            .push((1i64 << SEQ_BITS) - 1)
            .push(") > 0 AND (rowid >> ")
            .push(SEQ_BITS)
            .push(") IN (");
        let mut nums = sql.separated(", ");
        for num in listed.keys() {
            nums.push_bind(*num);
        }
        sql.push(")");
        push_search_terms(&mut sql, terms);
        sql.push(") WHERE n <= ")
            .push_bind(SNIPPET_CANDIDATES)
            .push(" ORDER BY rowid");
        let rows = sql.build().fetch_all(&self.reader).await?;
        Ok(page_snippets(
            listed.iter().map(|(num, (id, title))| (*num, id, title)),
            rows.iter()
                .map(|row| (row.get::<i64, _>(0), row.get::<&str, _>(1))),
            terms,
        ))
    }

    /// The stored answer to a request with this (scope-qualified) idempotency key.
    pub async fn answer(&self, key: &str) -> Result<Option<StoredAnswer>, IndexError> {
        let reader = &self.reader;
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
        let reader = &self.reader;
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
        let reader = &self.reader;
        let rows = sqlx::query("SELECT id FROM conversations WHERE status = 'running'")
            .fetch_all(reader)
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    pub async fn runtime_state(&self, key: &str) -> Result<Option<String>, IndexError> {
        let reader = &self.reader;
        let row = sqlx::query("SELECT value FROM runtime_state WHERE key = ?")
            .bind(key)
            .fetch_optional(reader)
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    pub async fn set_runtime_state(&self, key: &str, value: &str) -> Result<(), IndexError> {
        let writer = &self.writer;
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

/// Copies the WAL back into the database every `CHECKPOINT_EVERY` until the pool is closed.
/// A passive checkpoint never waits for the writer or a reader: it copies what it can, and the
/// writer starts the WAL over once all of it was copied. A checkpoint's fsyncs (the WAL, then
/// the database) thus no longer hold up the writer and everything queued behind it.
async fn checkpoints(checkpointer: SqlitePool) {
    let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if checkpointer.is_closed() {
            return;
        }
        if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&checkpointer)
            .await
        {
            if checkpointer.is_closed() {
                return;
            }
            tracing::warn!(%error, "a checkpoint of the index failed; the next one retries");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits leave their pages in the WAL (the writer does not checkpoint); the background
    /// checkpointer copies them into the database file soon after, without being asked.
    #[tokio::test]
    async fn the_wal_is_copied_back_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metadata.db");
        let index = SqliteIndex::open(&path).await.unwrap();
        let value = "x".repeat(2_000);
        for n in 0..200 {
            index
                .set_runtime_state(&format!("k{n}"), &value)
                .await
                .unwrap();
        }
        let written = 200 * 2_000;
        let database_len = || std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let copied = tokio::time::timeout(Duration::from_secs(10), async {
            while database_len() < written {
                tokio::time::sleep(CHECKPOINT_EVERY / 10).await;
            }
        })
        .await;
        assert!(
            copied.is_ok(),
            "the database file holds {} bytes",
            database_len()
        );
        assert_eq!(
            index.runtime_state("k199").await.unwrap().as_deref(),
            Some(value.as_str())
        );
        index.close().await;
    }
}
