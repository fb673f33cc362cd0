-- Who executes each unfinished run: the replica holding its lease renews
-- `expires_at` while it runs; a lease left to expire means the replica is
-- gone, and another marks the run interrupted. Same text on both backends.
CREATE TABLE IF NOT EXISTS run_leases (
    run_id      TEXT PRIMARY KEY,
    replica     TEXT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_leases_by_expiry ON run_leases(expires_at);
CREATE INDEX IF NOT EXISTS run_leases_by_replica ON run_leases(replica);
