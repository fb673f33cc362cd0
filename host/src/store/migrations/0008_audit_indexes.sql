-- The audit trail's indexes, fewer and smaller: every index costs each
-- written row a B-tree insert (docs/performance/http-front.md, "The audit
-- insert"). Same text on both backends.
--
-- `capability` is filtered by a glob (`LIKE ... ESCAPE`), which a plain
-- B-tree index does not serve (SQLite's LIKE is case-insensitive; PostgreSQL
-- needs text_pattern_ops): those queries already walked `audit_by_time`.
DROP INDEX IF EXISTS audit_by_capability;
-- Almost every record is `ok`: only the others are indexed, and a query for
-- another outcome says `outcome <> 'ok'` so the planner takes this index. A
-- query for `ok` walks `audit_by_time`, where most rows match.
DROP INDEX IF EXISTS audit_by_outcome;
CREATE INDEX IF NOT EXISTS audit_by_outcome ON audit_records(outcome, at DESC) WHERE outcome <> 'ok';
-- Only workflow nodes' records carry a run.
DROP INDEX IF EXISTS audit_by_run;
CREATE INDEX IF NOT EXISTS audit_by_run ON audit_records(run_id) WHERE run_id IS NOT NULL;
