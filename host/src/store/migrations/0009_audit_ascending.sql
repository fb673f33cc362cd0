-- The audit trail's time-ordered indexes in ascending order. Every query
-- still reads them newest first (`ORDER BY at DESC`): both backends walk a
-- B-tree backward as cheaply as forward. What changes is the write: a new
-- record is the newest, so in a descending index it went in at the front,
-- page after page split there and left half full; in an ascending one it is
-- appended at the end (docs/performance/http-front.md, "The audit writer,
-- row by row"). Same text on both backends.
DROP INDEX IF EXISTS audit_by_time;
CREATE INDEX IF NOT EXISTS audit_by_time ON audit_records(at);
DROP INDEX IF EXISTS audit_by_principal;
CREATE INDEX IF NOT EXISTS audit_by_principal ON audit_records(principal, at);
DROP INDEX IF EXISTS audit_by_source;
CREATE INDEX IF NOT EXISTS audit_by_source ON audit_records(source, at);
DROP INDEX IF EXISTS audit_by_outcome;
CREATE INDEX IF NOT EXISTS audit_by_outcome ON audit_records(outcome, at) WHERE outcome <> 'ok';
