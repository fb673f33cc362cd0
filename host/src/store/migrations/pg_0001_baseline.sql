-- wf's state on PostgreSQL, shared by every replica: the same tables as
-- SQLite's baseline, with 64-bit integers (millisecond times).
CREATE TABLE IF NOT EXISTS drafts (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    document    TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS artifacts (
    name        TEXT NOT NULL,
    version     BIGINT NOT NULL,
    hash        TEXT NOT NULL,
    document    TEXT NOT NULL,
    draft_id    TEXT,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS deployments (
    name             TEXT PRIMARY KEY,
    artifact_name    TEXT NOT NULL,
    artifact_version BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    FOREIGN KEY (artifact_name, artifact_version) REFERENCES artifacts(name, version)
);
CREATE TABLE IF NOT EXISTS runs (
    id           TEXT PRIMARY KEY,
    workflow     TEXT NOT NULL,
    origin       TEXT NOT NULL,
    status       TEXT NOT NULL,
    inputs       TEXT NOT NULL,
    outputs      TEXT,
    error        TEXT,
    sessions     TEXT,
    started_at   BIGINT NOT NULL,
    finished_at  BIGINT,
    -- The process executing the run (pid:start), so a second wf on the same
    -- state dir can tell a live run from an interrupted one.
    host         TEXT,
    -- Who started it: the principal's name (never a token); NULL before wf
    -- recorded principals.
    principal    TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs(started_at DESC);
CREATE TABLE IF NOT EXISTS node_runs (
    run_id      TEXT NOT NULL REFERENCES runs(id),
    node_id     TEXT NOT NULL,
    capability  TEXT NOT NULL,
    status      TEXT NOT NULL,
    args        TEXT,
    output      TEXT,
    error       TEXT,
    attempts    BIGINT NOT NULL DEFAULT 0,
    epoch       BIGINT,
    started_at  BIGINT,
    finished_at BIGINT,
    -- The ErrorCode of a failed node's error (wire name, e.g. `state_lost`).
    error_code  TEXT,
    PRIMARY KEY (run_id, node_id)
);
CREATE TABLE IF NOT EXISTS catalog_snapshots (
    source        TEXT PRIMARY KEY,
    fingerprint   TEXT NOT NULL,
    catalog       TEXT NOT NULL,
    discovered_at BIGINT NOT NULL
);
-- How often each principal called each tool (client-visible name): a
-- principal over its tool budget is listed its most-used tools first.
CREATE TABLE IF NOT EXISTS tool_usage (
    principal  TEXT NOT NULL,
    tool       TEXT NOT NULL,
    calls      BIGINT NOT NULL,
    last_used  BIGINT NOT NULL,
    PRIMARY KEY (principal, tool)
);
