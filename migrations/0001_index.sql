-- metadata.db is derived from the conversation directories and can always be rebuilt with
-- `openvaala reindex`. It only speeds up listing, search and status.

CREATE TABLE conversations (
    num         INTEGER PRIMARY KEY,       -- a small integer key; search rows are numbered from it
    id          TEXT NOT NULL UNIQUE,
    updated_at  INTEGER NOT NULL,          -- microseconds since the epoch, for ordering
    archived    INTEGER NOT NULL,
    status      TEXT NOT NULL,
    meta_len    INTEGER NOT NULL,          -- bytes of metadata.jsonl this row reflects
    data        TEXT NOT NULL              -- the Conversation object as JSON
);
CREATE INDEX conversations_by_archived ON conversations (archived, updated_at DESC, id DESC);
CREATE INDEX conversations_by_update ON conversations (updated_at DESC, id DESC);
CREATE INDEX conversations_by_status ON conversations (status);

CREATE TABLE sessions (
    id              TEXT PRIMARY KEY NOT NULL,
    conversation_id TEXT NOT NULL,
    data            TEXT NOT NULL
);
CREATE INDEX sessions_by_conversation ON sessions (conversation_id);

CREATE TABLE turns (
    id              TEXT PRIMARY KEY NOT NULL,
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
    key             TEXT PRIMARY KEY NOT NULL,
    conversation_id TEXT NOT NULL,
    status          INTEGER NOT NULL,
    response        TEXT NOT NULL
);
CREATE INDEX answers_by_conversation ON answers (conversation_id);

-- Full-text search over titles and message text. The trigram tokenizer finds substrings in any
-- script (Chinese has no spaces to split words on). A row's rowid says whose text it is:
-- (conversation num << 24) | item seq, with seq 0 for the title, so a conversation's rows are
-- one rowid range (replaced or deleted without a scan) and a match names its conversation.
CREATE VIRTUAL TABLE search USING fts5 (text, tokenize = 'trigram', columnsize = 0);

CREATE TABLE runtime_state (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
