//! Replica-wide quota budgets (`quota_budgets`, PostgreSQL only): each
//! replica takes grants of calls from a rule's row for a principal in one
//! atomic `UPDATE … RETURNING`, and gives back what it did not use. The
//! database's clock refills the rate bucket, so replicas' clocks need not
//! agree. With SQLite there is one process, and budgets stay in it.

use std::sync::LazyLock;
use std::time::Duration;

use super::db::args;
use super::{Result, Store};

/// Millionths of a call: the rate bucket's unit, so refills stay integers.
const MICRO: i64 = 1_000_000;

/// What one rule limits, as the row is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetSpec {
    /// The rule's key: its label and limits, so a changed rule starts afresh.
    pub rule: String,
    /// A rate: (calls, period, burst).
    pub rate: Option<(u64, Duration, u64)>,
    pub per_day: Option<u64>,
}

/// What a grant gave: calls this replica may admit, and, when it gave none,
/// how long until the budget has one again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub calls: u64,
    pub retry_after: Option<Duration>,
}

/// The database's time in ms.
const NOW: &str = "(extract(epoch from now()) * 1000)::bigint";

/// The grant statement. Parameters: 1 rule, 2 principal, 3 calls wanted,
/// 4 calls already admitted on credit (paid first, even into the red),
/// 5 bucket capacity in millionths (NULL: no rate), 6 calls per period,
/// 7 period in ms, 8 calls per day (NULL: no daily count). Every SET sees
/// the row as locked, so concurrent grants never give the same call twice.
static GRANT: LazyLock<String> = LazyLock::new(|| {
    let rate = format!(
        "(LEAST(?5::bigint::float8, tokens::float8 + GREATEST(0, {NOW} - updated_at)::float8 \
         * ?6::bigint * 1000000.0 / ?7::bigint)::bigint - ?4::bigint * {MICRO})"
    );
    let today = format!("({NOW} / 86400000)");
    let used = format!("(CASE WHEN day = {today} THEN day_used ELSE 0 END + ?4::bigint)");
    let n = format!(
        "LEAST(?3::bigint, \
         CASE WHEN ?5::bigint IS NULL THEN ?3::bigint ELSE GREATEST(0, {rate} / {MICRO}) END, \
         CASE WHEN ?8::bigint IS NULL THEN ?3::bigint ELSE GREATEST(0, ?8::bigint - {used}) END)"
    );
    format!(
        "UPDATE quota_budgets SET granted = {n}, \
         tokens = CASE WHEN ?5::bigint IS NULL THEN 0 ELSE {rate} - {n} * {MICRO} END, \
         day = {today}, day_used = {used} + {n}, updated_at = {NOW} \
         WHERE rule = ?1::text AND principal = ?2::text \
         RETURNING granted, tokens, day_used, {NOW}"
    )
});

static CREATE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO quota_budgets (rule, principal, tokens, granted, day, day_used, updated_at) \
         VALUES (?1::text, ?2::text, COALESCE(?3::bigint, 0), 0, 0, 0, {NOW}) \
         ON CONFLICT (rule, principal) DO NOTHING"
    )
});

static GIVE_BACK: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE quota_budgets SET \
         tokens = CASE WHEN ?4::bigint IS NULL THEN tokens ELSE LEAST(?4::bigint, tokens + ?3::bigint * {MICRO}) END, \
         day_used = CASE WHEN day = ({NOW} / 86400000) THEN GREATEST(0, day_used - ?3::bigint) ELSE day_used END \
         WHERE rule = ?1::text AND principal = ?2::text"
    )
});

impl BudgetSpec {
    fn capacity(&self) -> Option<i64> {
        self.rate
            .map(|(_, _, burst)| (burst.max(1) as i64).saturating_mul(MICRO))
    }

    /// How long until the budget has a call again, from what the grant left.
    fn retry_after(&self, tokens: i64, day_used: i64, now_ms: i64) -> Option<Duration> {
        let rate = self.rate.and_then(|(calls, period, _)| {
            (tokens < MICRO).then(|| {
                let missing = (MICRO - tokens) as f64 / MICRO as f64;
                Duration::from_secs_f64(missing * period.as_secs_f64() / calls.max(1) as f64)
            })
        });
        let day = self.per_day.and_then(|limit| {
            (day_used >= limit as i64)
                .then(|| Duration::from_millis((86_400_000 - now_ms.rem_euclid(86_400_000)) as u64))
        });
        rate.max(day)
    }
}

impl Store {
    /// Whether quota budgets can be shared by replicas (PostgreSQL).
    pub fn shares_budgets(&self) -> bool {
        self.backend() == "postgres"
    }

    /// Takes up to `want` calls from `principal`'s budget under `spec`,
    /// after paying `credit` calls admitted before this grant.
    pub async fn take_grant(
        &self,
        spec: &BudgetSpec,
        principal: &str,
        want: u64,
        credit: u64,
    ) -> Result<Grant> {
        let (calls, period_ms) = spec.rate.map_or((None, None), |(c, p, _)| {
            (Some(c as i64), Some(p.as_millis().max(1) as i64))
        });
        let grant = || {
            args![
                &spec.rule,
                principal,
                want as i64,
                credit as i64,
                spec.capacity(),
                calls,
                period_ms,
                spec.per_day.map(|d| d as i64)
            ]
        };
        let mut row = self.db.query_opt(&GRANT, grant()).await?;
        if row.is_none() {
            self.db
                .execute(&CREATE, args![&spec.rule, principal, spec.capacity()])
                .await?;
            row = self.db.query_opt(&GRANT, grant()).await?;
        }
        let row = row.ok_or_else(|| {
            super::StoreError::Decode("quota_budgets: the budget row is missing".into())
        })?;
        let calls = row.int(0)?.max(0) as u64;
        let retry_after = if calls == 0 {
            spec.retry_after(row.int(1)?, row.int(2)?, row.int(3)?)
        } else {
            None
        };
        Ok(Grant { calls, retry_after })
    }

    /// Gives back `calls` granted to this replica and not used.
    pub async fn give_back(&self, spec: &BudgetSpec, principal: &str, calls: u64) -> Result<()> {
        if calls == 0 {
            return Ok(());
        }
        self.db
            .execute(
                &GIVE_BACK,
                args![&spec.rule, principal, calls as i64, spec.capacity()],
            )
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_waits_for_one_whole_call_or_midnight() {
        let spec = BudgetSpec {
            rule: "r".into(),
            rate: Some((5, Duration::from_secs(60), 5)),
            per_day: Some(10),
        };
        // A quarter of a call left: three quarters of 12 s to wait.
        assert_eq!(
            spec.retry_after(MICRO / 4, 0, 0),
            Some(Duration::from_secs(9))
        );
        // Calls on credit (negative tokens) wait longer.
        assert_eq!(
            spec.retry_after(-MICRO, 0, 0),
            Some(Duration::from_secs(24))
        );
        assert_eq!(spec.retry_after(MICRO, 0, 0), None);
        // The day's count is spent at noon: twelve hours, or the rate if longer.
        assert_eq!(
            spec.retry_after(MICRO, 10, 43_200_000),
            Some(Duration::from_secs(43_200))
        );
    }

    /// Against PostgreSQL (`WF_TEST_PG_URL`): grants, credit, give-back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grants_pay_credit_first_and_stop_at_the_limit_on_postgres() {
        for s in crate::store::test_stores().await {
            if !s.shares_budgets() {
                continue;
            }
            let day = BudgetSpec {
                rule: "day".into(),
                rate: None,
                per_day: Some(5),
            };
            let take = |spec, want, credit| {
                let s = &s;
                async move { s.take_grant(spec, "p", want, credit).await.unwrap() }
            };
            assert_eq!(take(&day, 2, 0).await.calls, 2);
            // One call admitted on credit is paid first: 2 + 1 + 2 = 5.
            assert_eq!(take(&day, 2, 1).await.calls, 2);
            let spent = take(&day, 2, 0).await;
            assert_eq!(spent.calls, 0);
            let wait = spent.retry_after.expect("a spent day says when it frees");
            assert!(
                wait > Duration::ZERO && wait <= Duration::from_secs(86_400),
                "{wait:?}"
            );
            s.give_back(&day, "p", 2).await.unwrap();
            assert_eq!(take(&day, 5, 0).await.calls, 2);

            let rate = BudgetSpec {
                rule: "rate".into(),
                rate: Some((2, Duration::from_secs(3600), 2)),
                per_day: None,
            };
            assert_eq!(take(&rate, 5, 0).await.calls, 2);
            let spent = take(&rate, 1, 0).await;
            assert_eq!(spent.calls, 0);
            let wait = spent.retry_after.unwrap();
            assert!(
                wait > Duration::from_secs(1700) && wait <= Duration::from_secs(1800),
                "{wait:?}"
            );
            s.give_back(&rate, "p", 1).await.unwrap();
            assert_eq!(take(&rate, 1, 0).await.calls, 1);
            // Credit past the budget runs it into the red: two calls' wait.
            let red = s.take_grant(&rate, "q", 1, 3).await.unwrap();
            assert_eq!(red.calls, 0);
            let wait = red.retry_after.unwrap();
            assert!(
                wait > Duration::from_secs(3500) && wait <= Duration::from_secs(3600),
                "{wait:?}"
            );
        }
    }

    #[test]
    fn the_grant_statement_names_every_parameter() {
        for p in 1..=8 {
            assert!(GRANT.contains(&format!("?{p}::")), "?{p}");
        }
        assert!(GRANT.contains("RETURNING granted, tokens, day_used"));
    }
}
