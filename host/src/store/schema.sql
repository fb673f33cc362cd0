-- wf's state: one SQLite database in the state directory. Every write is a
-- transaction; WAL keeps committed work through a `kill -9`.
CREATE TABLE IF NOT EXISTS drafts (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    document    TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS artifacts (
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    hash        TEXT NOT NULL,
    document    TEXT NOT NULL,
    draft_id    TEXT,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS deployments (
    name             TEXT PRIMARY KEY,
    artifact_name    TEXT NOT NULL,
    artifact_version INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
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
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
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
    attempts    INTEGER NOT NULL DEFAULT 0,
    epoch       INTEGER,
    started_at  INTEGER,
    finished_at INTEGER,
    -- The ErrorCode of a failed node's error (wire name, e.g. `state_lost`).
    error_code  TEXT,
    PRIMARY KEY (run_id, node_id)
);
CREATE TABLE IF NOT EXISTS catalog_snapshots (
    source        TEXT PRIMARY KEY,
    fingerprint   TEXT NOT NULL,
    catalog       TEXT NOT NULL,
    discovered_at INTEGER NOT NULL
);
-- How often each principal called each tool (client-visible name): a
-- principal over its tool budget is listed its most-used tools first.
CREATE TABLE IF NOT EXISTS tool_usage (
    principal  TEXT NOT NULL,
    tool       TEXT NOT NULL,
    calls      INTEGER NOT NULL,
    last_used  INTEGER NOT NULL,
    PRIMARY KEY (principal, tool)
);
-- wf's own runs started as MCP Tasks: the task id, whom it is bound to, and
-- its run, so a client comes back for the result after a restart too.
CREATE TABLE IF NOT EXISTS run_tasks (
    id         TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
