-- Idempotency-Keys being answered in cluster mode. A request with a key claims it here first
-- (the primary key lets exactly one instance hold it), so the same request sent to two
-- instances at once is carried out once; the other waits for the answer. The row goes once
-- the answer is in `answers`; it keeps the answer itself only when the index could not take
-- it. A claim whose instance stopped being seen is taken over after a lease.
CREATE TABLE idempotency_claims (
    key         TEXT PRIMARY KEY,          -- scope-qualified, as in `answers`
    instance    TEXT NOT NULL,             -- the claimant (`instances.id`)
    token       TEXT NOT NULL,             -- this claim, so a late release spares the next
    claimed_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    status      INTEGER,                   -- the answer, once given and not indexed
    response    TEXT,
    body_hash   TEXT
);
