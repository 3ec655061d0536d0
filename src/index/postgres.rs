//! The index in PostgreSQL, for cluster mode: the same rows as the embedded SQLite index
//! (`sqlite.rs`), written by the same `IndexUpdate`s, with search through `pg_trgm` instead of
//! FTS5. Every instance reads and writes it; like the SQLite one it is derived from the
//! conversation directories and rebuilt by `reindex --database-url`.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::{PgPool, Postgres, QueryBuilder, Row};

use super::query::{
    SNIPPET_CANDIDATES, decode_cursor, encode_cursor, indexed_text, page_snippets, search_terms,
};
use super::types::{ArchivedFilter, IndexError, IndexUpdate, IndexedLens, ListPage, ListQuery};
use crate::domain::Conversation;
use crate::store::Acceptance;
use crate::store::state::StoredAnswer;
use std::sync::Arc;

/// How long a statement may wait for a connection: PostgreSQL being down must become an
/// answer ("unavailable") in seconds, not a request hanging.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Bounds on every statement of the pool, so that an instance that stops in the middle of a
/// transaction (paused, partitioned) costs the others a bounded wait, never a hang:
/// - `lock_timeout` 2 s: a row another session holds is waited for at most this long. Index
///   writes take row locks for milliseconds; waiting longer means the holder is stuck, and
///   the request is better answered 503 (retry) than held.
/// - `statement_timeout` 5 s: no statement of the service runs this long when the database is
///   well (point reads, small upserts, a page of a listing); one that does is stuck behind
///   something, and a client is better told so (503) than kept waiting.
/// - `idle_in_transaction_session_timeout` 10 s: a session that holds a transaction open
///   without sending anything (its instance paused between two statements) is ended by
///   PostgreSQL, and its locks go with it. The service's transactions send their statements
///   back to back, milliseconds apart, so only a stuck instance is cut.
fn with_timeouts(options: PgConnectOptions) -> PgConnectOptions {
    options.options([
        ("lock_timeout", "2s"),
        ("statement_timeout", "5s"),
        ("idle_in_transaction_session_timeout", "10s"),
    ])
}

/// The pool of one instance's connections to the shared database.
#[derive(Debug, Clone)]
pub struct PgIndex {
    pool: PgPool,
}

impl PgIndex {
    /// Connects and brings the schema up to date (migrations run under PostgreSQL's advisory
    /// lock, so instances starting together do not race).
    pub async fn open(url: &str) -> Result<PgIndex, IndexError> {
        let options: PgConnectOptions = url.parse()?;
        // Migrations on a connection of their own, without the timeouts below: waiting for
        // another instance's migration lock, or building an index, may take longer.
        let mut migrating = PgConnection::connect_with(&options).await?;
        super::migrations::postgres().run(&mut migrating).await?;
        migrating.close().await?;
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .min_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .idle_timeout(Duration::from_secs(60))
            .connect_with(with_timeouts(options))
            .await?;
        Ok(PgIndex { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Empties the index tables (not the coordination ones) for a rebuild.
    pub async fn truncate(&self) -> Result<(), IndexError> {
        sqlx::query("TRUNCATE conversations, sessions, turns, answers, search, runtime_state")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

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
        for statement in [
            "DELETE FROM search WHERE conversation_id = $1",
            "DELETE FROM sessions WHERE conversation_id = $1",
            "DELETE FROM turns WHERE conversation_id = $1",
            "DELETE FROM answers WHERE conversation_id = $1",
            "DELETE FROM conversations WHERE id = $1",
        ] {
            sqlx::query(statement).bind(id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn get(&self, id: &str) -> Result<Option<Conversation>, IndexError> {
        let row = sqlx::query("SELECT data FROM conversations WHERE id = $1")
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
        let mut sql = QueryBuilder::<Postgres>::new(
            "SELECT data, updated_at, id FROM conversations WHERE TRUE",
        );
        match query.archived {
            ArchivedFilter::Active => sql.push(" AND NOT archived"),
            ArchivedFilter::Archived => sql.push(" AND archived"),
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
        // The same words as the embedded index takes (no NUL, a bounded number of them).
        let terms = search_terms(query.search.as_deref().unwrap_or_default())?;
        if !terms.is_empty() {
            sql.push(" AND id IN (SELECT conversation_id FROM search WHERE TRUE");
            push_search_terms(&mut sql, &terms);
            sql.push(")");
        }
        sql.push(" ORDER BY updated_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(limit) + 1);
        let rows = sql.build().fetch_all(&self.pool).await?;
        let mut conversations = Vec::with_capacity(rows.len());
        let mut next_cursor = None;
        let mut listed = Vec::new();
        for (position, row) in rows.iter().enumerate() {
            if position == limit as usize {
                let last = &rows[position - 1];
                next_cursor = Some(encode_cursor(last.get(1), last.get(2)));
                break;
            }
            let conversation: crate::domain::Conversation =
                serde_json::from_str(row.get::<&str, _>(0))?;
            listed.push((row.get::<String, _>(2), conversation.title.clone()));
            conversations.push(conversation);
        }
        let snippets = self.snippets(&listed, &terms).await?;
        Ok(ListPage {
            conversations,
            next_cursor,
            snippets,
        })
    }

    /// For the listed conversations (id, title) whose messages (not their title, row 0) match
    /// every term: a snippet of the first such message that says more than the title
    /// (`snippet_beside_title`). One query for the whole page.
    async fn snippets(
        &self,
        listed: &[(String, String)],
        terms: &[&str],
    ) -> Result<std::collections::BTreeMap<String, String>, IndexError> {
        if terms.is_empty() || listed.is_empty() {
            return Ok(std::collections::BTreeMap::new());
        }
        let ids: Vec<String> = listed.iter().map(|(id, _)| id.clone()).collect();
        let mut sql = QueryBuilder::<Postgres>::new(
            "SELECT conversation_id, text FROM (SELECT conversation_id, seq, text, \
             row_number() OVER (PARTITION BY conversation_id ORDER BY seq) AS n FROM search \
             WHERE seq > 0 AND conversation_id = ANY(",
        );
        sql.push_bind(ids).push(")");
        push_search_terms(&mut sql, terms);
        sql.push(") matching WHERE n <= ")
            .push_bind(SNIPPET_CANDIDATES)
            .push(" ORDER BY conversation_id, seq");
        let rows = sql.build().fetch_all(&self.pool).await?;
        Ok(page_snippets(
            listed.iter().map(|(id, title)| (id.clone(), id, title)),
            rows.iter()
                .map(|row| (row.get::<String, _>(0), row.get::<&str, _>(1))),
            terms,
        ))
    }

    pub async fn answer(&self, key: &str) -> Result<Option<StoredAnswer>, IndexError> {
        let row = sqlx::query("SELECT status, response, body_hash FROM answers WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => Ok(Some(StoredAnswer {
                status: row.get::<i32, _>(0) as u16,
                response: serde_json::from_str(row.get::<&str, _>(1))?,
                body_hash: row.get(2),
            })),
            None => Ok(None),
        }
    }

    pub async fn indexed_lens(&self) -> Result<HashMap<String, IndexedLens>, IndexError> {
        let rows = sqlx::query(
            "SELECT id, meta_len, root_len, (data::json)->>'root_session_id' FROM conversations",
        )
        .fetch_all(&self.pool)
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
        let rows = sqlx::query("SELECT id FROM conversations WHERE status = 'running'")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    pub async fn runtime_state(&self, key: &str) -> Result<Option<String>, IndexError> {
        let row = sqlx::query("SELECT value FROM runtime_state WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    pub async fn set_runtime_state(&self, key: &str, value: &str) -> Result<(), IndexError> {
        sqlx::query(
            "INSERT INTO runtime_state (key, value) VALUES ($1, $2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(key)
        .bind(value)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A rebuild needs the data directory to itself: refused while an instance has been seen
    /// lately.
    pub async fn refuse_while_instances_run(&self) -> Result<(), IndexError> {
        // An instance not seen for its own lease has stopped (killed, or its machine gone):
        // its row goes, and its leases have run out with it.
        sqlx::query(
            "DELETE FROM instances WHERE seen_at < now() - lease_ms * interval '1 millisecond'",
        )
        .execute(&self.pool)
        .await?;
        let running: Vec<(String, String, f64)> = sqlx::query_as(
            "SELECT id, addr,
                    EXTRACT(EPOCH FROM seen_at + lease_ms * interval '1 millisecond' - now())::float8
             FROM instances ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        if running.is_empty() {
            return Ok(());
        }
        let named: Vec<String> = running
            .iter()
            .map(|(id, addr, left)| {
                format!(
                    "{id} at {addr} (seen within its lease; it counts as stopped if it stays \
                     silent {:.1} s more)",
                    left.max(0.0)
                )
            })
            .collect();
        Err(IndexError::Task(format!(
            "{} instance(s) of the cluster are running; stop them first: {}",
            running.len(),
            named.join(", ")
        )))
    }

    /// Keeps each conversation's lease epoch at least at what its files carry (after a
    /// rebuild the next owner's epoch must be above them).
    pub async fn raise_epochs(&self, epochs: &[(String, u64)]) -> Result<(), IndexError> {
        let (ids, values): (Vec<&str>, Vec<i64>) = epochs
            .iter()
            .filter(|(_, epoch)| *epoch > 0)
            .map(|(id, epoch)| (id.as_str(), *epoch as i64))
            .unzip();
        sqlx::query(
            "INSERT INTO leases (conversation_id, owner, epoch, expires_at)
             SELECT id, '', epoch, now() FROM unnest($1::text[], $2::bigint[]) AS t(id, epoch)
             ON CONFLICT (conversation_id) DO UPDATE
             SET epoch = GREATEST(leases.epoch, excluded.epoch)",
        )
        .bind(&ids)
        .bind(&values)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Whether the database answers now (for `/api/health`).
    pub async fn ping(&self) -> Result<(), IndexError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

/// Closed epochs as the database lists them (two arrays in epoch order), by epoch.
pub fn closed_epochs(epochs: Vec<i64>, last_commits: Vec<i64>) -> HashMap<u64, u64> {
    epochs
        .into_iter()
        .zip(last_commits)
        .map(|(epoch, last)| (epoch as u64, last as u64))
        .collect()
}

/// Which stamped lines count, per conversation that has a lease row (all of them, or only
/// `only`): its closed epochs with their last accepted commits and the current epoch's; `None`
/// for a deleted conversation. A conversation without a row has nothing to judge by.
pub async fn acceptances(
    pool: &PgPool,
    only: Option<&str>,
) -> Result<HashMap<String, Option<Acceptance>>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT l.conversation_id, l.epoch, l.commits, l.deleted,
            ARRAY(SELECT c.epoch FROM closed_epochs c
                  WHERE c.conversation_id = l.conversation_id ORDER BY c.epoch),
            ARRAY(SELECT c.last_commit FROM closed_epochs c
                  WHERE c.conversation_id = l.conversation_id ORDER BY c.epoch)
         FROM leases l WHERE $1::text IS NULL OR l.conversation_id = $1",
    )
    .bind(only)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(|row| {
            let id: String = row.get(0);
            if row.get::<bool, _>(3) {
                return (id, None);
            }
            let closed = closed_epochs(row.get(4), row.get(5));
            let open = (row.get::<i64, _>(1) as u64, row.get::<i64, _>(2) as u64);
            (id, Some(Acceptance::new(Arc::new(closed), Some(open))))
        })
        .collect())
}

async fn apply_one(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    update: &IndexUpdate<'_>,
) -> Result<(), IndexError> {
    match update {
        IndexUpdate::Conversation {
            conversation,
            meta_len,
        } => {
            // A row only moves forward in its log: an older fact arriving late is ignored.
            let applied = sqlx::query(
                "INSERT INTO conversations (id, updated_at, archived, status, meta_len, data)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at,
                 archived = excluded.archived, status = excluded.status,
                 meta_len = excluded.meta_len, data = excluded.data
                 WHERE excluded.meta_len >= conversations.meta_len",
            )
            .bind(&conversation.id)
            .bind(conversation.updated_at.timestamp_micros())
            .bind(conversation.archived)
            .bind(conversation.status.as_str())
            .bind(*meta_len as i64)
            .bind(serde_json::to_string(conversation)?)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            // The title's search row follows the row (written only when it differs): a rename
            // whose own update was lost (the database away, its repair note lost with a killed
            // instance) is searchable again with the conversation's next update.
            if applied > 0 {
                put_search_row(tx, &conversation.id, 0, &conversation.title).await?;
            }
        }
        IndexUpdate::Title {
            conversation_id,
            title,
        } => put_search_row(tx, conversation_id, 0, title).await?,
        IndexUpdate::Session {
            conversation_id,
            session,
        } => {
            sqlx::query(
                "INSERT INTO sessions (id, conversation_id, data) VALUES ($1, $2, $3)
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
            // A finished turn never changes again.
            sqlx::query(
                "INSERT INTO turns (id, conversation_id, session_id, status, started_at, ended_at, error)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (id) DO UPDATE SET status = excluded.status,
                 ended_at = excluded.ended_at, error = excluded.error
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
                "INSERT INTO answers (key, conversation_id, status, response, body_hash)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING",
            )
            .bind(key)
            .bind(conversation_id)
            .bind(i32::from(*status))
            .bind(serde_json::to_string(response)?)
            .bind(body_hash)
            .execute(&mut **tx)
            .await?;
        }
        IndexUpdate::SearchedThrough {
            conversation_id,
            root_len,
        } => {
            sqlx::query("UPDATE conversations SET root_len = GREATEST(root_len, $1) WHERE id = $2")
                .bind(*root_len as i64)
                .bind(conversation_id)
                .execute(&mut **tx)
                .await?;
        }
        IndexUpdate::SearchText {
            conversation_id,
            seq,
            text,
        } => put_search_row(tx, conversation_id, *seq, text).await?,
        IndexUpdate::CopySearch {
            from_conversation_id,
            to_conversation_id,
            from_seq,
            below_seq,
        } => {
            sqlx::query(
                "INSERT INTO search (conversation_id, seq, text)
                 SELECT $1, seq, text FROM search
                 WHERE conversation_id = $2 AND seq >= $3 AND seq < $4
                 ON CONFLICT (conversation_id, seq) DO UPDATE SET text = excluded.text",
            )
            .bind(to_conversation_id)
            .bind(from_conversation_id)
            .bind((*from_seq).max(1) as i64)
            .bind((*below_seq).min(i64::MAX as u64) as i64)
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(())
}

/// Adds one condition per term (all must match): ILIKE with the trigram index, a substring,
/// case-insensitively, in any script.
fn push_search_terms(sql: &mut QueryBuilder<Postgres>, terms: &[&str]) {
    for term in terms {
        let escaped = term
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        sql.push(" AND text ILIKE ")
            .push_bind(format!("%{escaped}%"));
    }
}

/// Writes (or replaces) the search row of a title (seq 0) or a message; a row that already
/// holds the text is left alone.
async fn put_search_row(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    conversation_id: &str,
    seq: u64,
    text: &str,
) -> Result<(), IndexError> {
    // PostgreSQL's text cannot hold NUL; search never needs it.
    let text = indexed_text(text).replace('\0', "");
    sqlx::query(
        "INSERT INTO search (conversation_id, seq, text) VALUES ($1, $2, $3)
         ON CONFLICT (conversation_id, seq) DO UPDATE SET text = excluded.text
         WHERE search.text <> excluded.text",
    )
    .bind(conversation_id)
    .bind(seq as i64)
    .bind(text)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
