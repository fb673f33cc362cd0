-- Tasks that sources serve (forwarded MCP Tasks): the source and the source's
-- task id. SQLite has no `ADD COLUMN IF NOT EXISTS`: the columns are added by
-- migrate.rs (`sqlite_columns`), which looks first, so this file is empty.
SELECT 1;
