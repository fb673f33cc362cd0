-- Replica-wide quota budgets (`[[quotas]] scope = "replicas"`, docs/
-- operator-manual.md "Quotas"): one row per rule and principal, from which
-- each replica takes grants of calls in batches. `tokens` is the rate
-- bucket in millionths of a call (negative while calls a replica admitted
-- on credit are paid back); `day`/`day_used` count calls in the current UTC
-- day; `granted` is the last grant, for the statement that took it. Only
-- PostgreSQL uses it (with SQLite budgets are per process); the table is on
-- both backends so their schemas stay in step. Same text on both.
CREATE TABLE IF NOT EXISTS quota_budgets (
    rule        TEXT NOT NULL,
    principal   TEXT NOT NULL,
    tokens      BIGINT NOT NULL,
    granted     BIGINT NOT NULL,
    day         BIGINT NOT NULL,
    day_used    BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (rule, principal)
);
