-- wf's own runs started as MCP Tasks: the task id, whom it is bound to, and
-- its run, so a client comes back for the result after a restart too.
-- Same text on both backends.
CREATE TABLE IF NOT EXISTS run_tasks (
    id         TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
