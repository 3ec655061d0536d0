-- The index and the coordination tables of cluster mode (several instances over one
-- PostgreSQL database). The index part is derived from the conversation directories and can
-- always be rebuilt with `openvaala reindex --database-url …`; the coordination part holds no
-- conversation data, only who owns which conversation now.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,
    updated_at  BIGINT NOT NULL,           -- microseconds since the epoch, for ordering
    archived    BOOLEAN NOT NULL,
    status      TEXT NOT NULL,
    meta_len    BIGINT NOT NULL,           -- bytes of metadata.jsonl this row reflects
    root_len    BIGINT NOT NULL DEFAULT 0, -- bytes of the root session's file search reflects
    data        TEXT NOT NULL              -- the Conversation object as JSON
);
CREATE INDEX conversations_by_archived ON conversations (archived, updated_at DESC, id DESC);
CREATE INDEX conversations_by_update ON conversations (updated_at DESC, id DESC);
CREATE INDEX conversations_by_status ON conversations (status);

CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    data            TEXT NOT NULL
);
CREATE INDEX sessions_by_conversation ON sessions (conversation_id);

CREATE TABLE turns (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    status          TEXT NOT NULL,
    started_at      TEXT NOT NULL,
    ended_at        TEXT,
    error           TEXT
);
CREATE INDEX turns_by_conversation ON turns (conversation_id);

-- Answers to requests that carried an Idempotency-Key (scope-qualified key).
CREATE TABLE answers (
    key             TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    status          INTEGER NOT NULL,
    response        TEXT NOT NULL,
    body_hash       TEXT                   -- the first body's hash: another body is refused
);
CREATE INDEX answers_by_conversation ON answers (conversation_id);

-- Titles (seq 0) and finished root messages, for search. pg_trgm's trigram index finds
-- substrings in any script (Chinese has no spaces to split words on), as SQLite's FTS5
-- trigram tokenizer does in the embedded index.
CREATE TABLE search (
    conversation_id TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    text            TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX search_by_text ON search USING gin (text gin_trgm_ops);

CREATE TABLE runtime_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- The running instances and where they answer (forwarded requests go there).
CREATE TABLE instances (
    id          TEXT PRIMARY KEY,
    addr        TEXT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    seen_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Who may write a conversation's files now: an instance owns a conversation only while its
-- lease has not expired (by this database's clock). `epoch` grows with every new owner and
-- is never reset (a released lease expires, its row stays), so records written under an older
-- lease can be told apart from newer ones.
CREATE TABLE leases (
    conversation_id TEXT PRIMARY KEY,
    owner           TEXT NOT NULL,
    epoch           BIGINT NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX leases_by_owner ON leases (owner);
