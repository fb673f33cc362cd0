-- The audit trail (docs/operator-manual.md, "Audit trail"): one row per
-- decision and call, written in batches off the call path. `groups`,
-- `policies`, `arguments` and `result` are JSON text. Same text on both
-- backends; the indexes fit `wf audit`'s filters (each newest first).
CREATE TABLE IF NOT EXISTS audit_records (
    id           TEXT PRIMARY KEY,
    at           BIGINT NOT NULL,
    principal    TEXT NOT NULL,
    groups       TEXT NOT NULL,
    client       TEXT,
    transport    TEXT NOT NULL,
    endpoint     TEXT,
    kind         TEXT NOT NULL,
    capability   TEXT NOT NULL,
    source       TEXT,
    target       TEXT,
    decision     TEXT NOT NULL,
    policies     TEXT NOT NULL,
    quota        TEXT,
    outcome      TEXT NOT NULL,
    error        TEXT,
    duration_us  BIGINT NOT NULL,
    bytes_in     BIGINT NOT NULL,
    bytes_out    BIGINT NOT NULL,
    arguments    TEXT,
    result       TEXT,
    trace_id     TEXT,
    run_id       TEXT,
    node_id      TEXT,
    replica      TEXT
);
CREATE INDEX IF NOT EXISTS audit_by_time ON audit_records(at DESC);
CREATE INDEX IF NOT EXISTS audit_by_principal ON audit_records(principal, at DESC);
CREATE INDEX IF NOT EXISTS audit_by_capability ON audit_records(capability, at DESC);
CREATE INDEX IF NOT EXISTS audit_by_source ON audit_records(source, at DESC);
CREATE INDEX IF NOT EXISTS audit_by_outcome ON audit_records(outcome, at DESC);
CREATE INDEX IF NOT EXISTS audit_by_run ON audit_records(run_id);
