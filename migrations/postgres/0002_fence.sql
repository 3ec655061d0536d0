-- The write fence of cluster mode. A lease says who may write; it does not stop a writer that
-- was paused past its lease from appending afterwards. So a write counts only once PostgreSQL
-- has accepted it, atomically against the epoch: every append is stamped `(epoch, commit)`,
-- and `commit_write` moves `leases.commits` to it only while the lease is still that epoch.
-- When a new owner takes the conversation, the old epoch's last accepted commit is kept in
-- `closed_epochs`; readers take a stamped line only if its commit is at most that number.

ALTER TABLE leases ADD COLUMN commits BIGINT NOT NULL DEFAULT 0;
-- A deleted conversation keeps its row, marked: no instance may take it again, and a delete
-- is itself accepted against the epoch before any file is removed.
ALTER TABLE leases ADD COLUMN deleted BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE closed_epochs (
    conversation_id TEXT NOT NULL,
    epoch           BIGINT NOT NULL,
    last_commit     BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, epoch)
);

-- Takes a conversation for `claimant` if nobody holds it (or its lease expired, or the
-- claimant holds it already), in one atomic step: the old epoch is closed at its last accepted
-- commit and the new one starts at commit 0. Returns the outcome (`owned`, `held`, `deleted`),
-- the epoch, the owner, and every closed epoch of the conversation with its last commit.
CREATE FUNCTION claim_lease(
    claimed_id TEXT, claimant TEXT, at_least BIGINT, ttl_ms BIGINT
) RETURNS TABLE (
    outcome TEXT, new_epoch BIGINT, holder TEXT, closed BIGINT[], last_commits BIGINT[]
) AS $$
DECLARE
    current_row leases%ROWTYPE;
    next_epoch BIGINT;
BEGIN
    LOOP
        SELECT * INTO current_row FROM leases l
        WHERE l.conversation_id = claimed_id FOR UPDATE;
        IF NOT FOUND THEN
            BEGIN
                INSERT INTO leases (conversation_id, owner, epoch, commits, expires_at)
                VALUES (claimed_id, claimant, at_least + 1, 0,
                        now() + ttl_ms * interval '1 millisecond');
                next_epoch := at_least + 1;
                EXIT;
            EXCEPTION WHEN unique_violation THEN
                -- Another claim inserted the row first: look at it again.
            END;
        ELSIF current_row.deleted THEN
            RETURN QUERY SELECT 'deleted'::TEXT, current_row.epoch, current_row.owner,
                '{}'::BIGINT[], '{}'::BIGINT[];
            RETURN;
        ELSIF current_row.expires_at < now() OR current_row.owner = claimant THEN
            INSERT INTO closed_epochs (conversation_id, epoch, last_commit)
            VALUES (claimed_id, current_row.epoch, current_row.commits)
            ON CONFLICT DO NOTHING;
            next_epoch := GREATEST(current_row.epoch, at_least) + 1;
            UPDATE leases l SET owner = claimant, epoch = next_epoch, commits = 0,
                expires_at = now() + ttl_ms * interval '1 millisecond'
            WHERE l.conversation_id = claimed_id;
            EXIT;
        ELSE
            RETURN QUERY SELECT 'held'::TEXT, current_row.epoch, current_row.owner,
                '{}'::BIGINT[], '{}'::BIGINT[];
            RETURN;
        END IF;
    END LOOP;
    RETURN QUERY SELECT 'owned'::TEXT, next_epoch, claimant,
        ARRAY(SELECT c.epoch FROM closed_epochs c
              WHERE c.conversation_id = claimed_id ORDER BY c.epoch),
        ARRAY(SELECT c.last_commit FROM closed_epochs c
              WHERE c.conversation_id = claimed_id ORDER BY c.epoch);
END;
$$ LANGUAGE plpgsql;
