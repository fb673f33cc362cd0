-- Tasks that sources serve (forwarded MCP Tasks) are kept too, with the source
-- and the source's task id (NULL for wf's own runs): after a restart such a
-- task reads failed, state lost, as after any restart of its source, rather
-- than "no task". Idempotent: a half-applied run of it can run again.
ALTER TABLE run_tasks ADD COLUMN IF NOT EXISTS source TEXT;
ALTER TABLE run_tasks ADD COLUMN IF NOT EXISTS source_task TEXT;
