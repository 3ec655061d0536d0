-- Idempotency: the hash of the body a key was first used with, so the same key with another
-- body is refused instead of answered (NULL for answers stored before this column).
ALTER TABLE answers ADD COLUMN body_hash TEXT;

-- Search catch-up after a crash: the bytes of the root session's file that the search rows
-- reflect. A finished message's search row is written after the answer, from a queue a crash
-- can cut; the next start re-indexes every conversation whose file is longer than this.
ALTER TABLE conversations ADD COLUMN root_len INTEGER NOT NULL DEFAULT 0;
