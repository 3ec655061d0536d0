-- Each instance's lease time, so that anyone can tell when a silent instance counts as
-- stopped (not seen for its own lease): `reindex --database-url` then removes its row and
-- runs at once, rather than waiting a fixed minute after a kill -9. Rows of instances that
-- predate the column get the default lease.
ALTER TABLE instances ADD COLUMN lease_ms BIGINT NOT NULL DEFAULT 10000;
