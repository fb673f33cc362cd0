//! Quotas (`[[quotas]]`) as the pipeline's `limit` stage: per principal or
//! group × capability glob, a rate with a burst (a token bucket), a count
//! per UTC day, and calls in progress. Held in this process, or, for a rule
//! with `scope = "replicas"` on PostgreSQL, in one budget every replica
//! takes grants from in batches ([`shared`]), so a call never waits on the
//! database. What a call took from the rules it passed is given back when a
//! later rule refuses it: a refused call counts against nothing.

pub mod shared;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use globset::{Glob, GlobMatcher};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Call, Principal, Refusal, Stage};
use crate::config::{QuotaConfig, QuotaScope};
use crate::store::BudgetSpec;
use shared::{Grants, Shared};

#[derive(Debug, thiserror::Error)]
#[error("quotas[{index}]: {message}")]
pub struct QuotaError {
    index: usize,
    message: String,
}

/// `60/min` as (calls, period).
fn parse_rate(text: &str) -> Result<(u64, Duration), String> {
    let bad = || format!("rate {text:?}: use N/s, N/min, N/hour or N/day (e.g. \"60/min\")");
    let (n, unit) = text.split_once('/').ok_or_else(bad)?;
    let n: u64 = n.trim().parse().map_err(|_| bad())?;
    let period = match unit.trim() {
        "s" | "sec" | "second" => 1,
        "m" | "min" | "minute" => 60,
        "h" | "hour" => 3600,
        "d" | "day" => 86_400,
        _ => return Err(bad()),
    };
    if n == 0 {
        return Err(bad());
    }
    Ok((n, Duration::from_secs(period)))
}

/// A token bucket: `burst` tokens, refilled at `per_period / period`.
#[derive(Debug)]
struct Bucket {
    capacity: f64,
    per_second: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    fn new(calls: u64, period: Duration, burst: u64) -> Self {
        let capacity = burst.max(1) as f64;
        Self {
            capacity,
            per_second: calls as f64 / period.as_secs_f64(),
            state: Mutex::new((capacity, Instant::now())),
        }
    }

    /// Takes a token, or says how long until one is there.
    fn take(&self, now: Instant) -> Result<(), Duration> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(s.1).as_secs_f64();
        s.0 = (s.0 + elapsed * self.per_second).min(self.capacity);
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64((1.0 - s.0) / self.per_second))
    }

    /// Gives back a token taken for a call that a later check refused.
    fn give_back(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0 = (s.0 + 1.0).min(self.capacity);
    }
}

/// Calls counted in the current UTC day.
#[derive(Debug, Default)]
struct Daily {
    state: Mutex<(u64, u64)>,
}

impl Daily {
    fn take(&self, limit: u64, epoch: u64) -> Result<(), Duration> {
        let day = epoch / 86_400;
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.0 != day {
            *s = (day, 0);
        }
        if s.1 >= limit {
            return Err(Duration::from_secs((day + 1) * 86_400 - epoch));
        }
        s.1 += 1;
        Ok(())
    }

    fn give_back(&self, epoch: u64) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.0 == epoch / 86_400 {
            s.1 = s.1.saturating_sub(1);
        }
    }
}

/// One rule's state for one principal.
#[derive(Debug)]
struct Budget {
    bucket: Option<Bucket>,
    daily: Daily,
    running: Option<Arc<Semaphore>>,
    /// The rate and daily count shared by replicas (then `bucket` is `None`
    /// and the daily count unused).
    shared: Option<Arc<Shared>>,
}

/// What one call took from one budget, to give back if a later check refuses it.
enum Took {
    Token(Arc<Budget>),
    Day(Arc<Budget>),
    Shared(Arc<Budget>),
}

impl Took {
    fn give_back(self, epoch: u64) {
        match self {
            Took::Token(b) => {
                if let Some(bucket) = &b.bucket {
                    bucket.give_back();
                }
            }
            Took::Day(b) => b.daily.give_back(epoch),
            Took::Shared(b) => {
                if let Some(s) = &b.shared {
                    s.give_back();
                }
            }
        }
    }
}

/// One `[[quotas]]` rule.
#[derive(Debug)]
struct Rule {
    label: String,
    principal: Option<String>,
    group: Option<String>,
    tools: GlobMatcher,
    rate: Option<(u64, Duration, u64)>,
    per_day: Option<u64>,
    concurrency: Option<usize>,
    /// With `scope = "replicas"` on PostgreSQL: the shared budget's row and
    /// the batch a replica takes at a time.
    replicas: Option<(Arc<BudgetSpec>, u64)>,
    /// Per principal: each has its own budget under the rule.
    budgets: Mutex<std::collections::HashMap<String, Arc<Budget>>>,
    used: AtomicU64,
    refused: AtomicU64,
}

/// Most principals one rule keeps budgets for; past it, the oldest are
/// forgotten (and start afresh).
const MAX_BUDGETS: usize = 10_000;

impl Rule {
    fn applies(&self, principal: &Principal, name: &str) -> bool {
        let who = match (&self.principal, &self.group) {
            (Some(p), _) => p == principal.name(),
            (None, Some(g)) => principal.member_groups().iter().any(|x| **x == **g),
            (None, None) => true,
        };
        who && self.tools.is_match(name)
    }

    fn budget(&self, principal: &str) -> Arc<Budget> {
        let mut b = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(x) = b.get(principal) {
            return x.clone();
        }
        if b.len() >= MAX_BUDGETS {
            b.clear();
        }
        let shared = self
            .replicas
            .as_ref()
            .map(|(spec, batch)| Arc::new(Shared::new(spec.clone(), principal, *batch)));
        let budget = Arc::new(Budget {
            bucket: self
                .rate
                .filter(|_| shared.is_none())
                .map(|(calls, period, burst)| Bucket::new(calls, period, burst)),
            daily: Daily::default(),
            running: self.concurrency.map(|n| Arc::new(Semaphore::new(n))),
            shared,
        });
        b.insert(principal.to_string(), budget.clone());
        budget
    }
}

/// What a call holds while it runs (its concurrency slots); dropped with it.
#[derive(Debug, Default)]
pub struct Held(Vec<OwnedSemaphorePermit>);

/// The `[[quotas]]` rules of one config.
#[derive(Default)]
pub struct Quotas {
    rules: Vec<Rule>,
    /// Where replica-wide budgets are kept (PostgreSQL), if anywhere.
    grants: Option<Arc<dyn Grants>>,
}

impl std::fmt::Debug for Quotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quotas")
            .field("rules", &self.rules)
            .field("shared", &self.grants.is_some())
            .finish()
    }
}

/// A rule's default batch: a tenth of its burst or daily count, 1 to 100.
fn default_batch(rate: Option<(u64, Duration, u64)>, per_day: Option<u64>) -> u64 {
    let limit = [rate.map(|r| r.2), per_day].into_iter().flatten().min();
    (limit.unwrap_or(1) / 10).clamp(1, 100)
}

impl Quotas {
    /// The rules of a config. `grants` is where rules with `scope =
    /// "replicas"` share their budget (the PostgreSQL store); without it
    /// they hold per process, like the others.
    pub fn from_config(
        rules: &[QuotaConfig],
        grants: Option<Arc<dyn Grants>>,
    ) -> Result<Self, QuotaError> {
        let mut out = Vec::new();
        for (index, q) in rules.iter().enumerate() {
            let err = |message: String| QuotaError { index, message };
            if q.principal.is_some() && q.group.is_some() {
                return Err(err("give `principal` or `group`, not both".into()));
            }
            let glob = q.tools.as_deref().unwrap_or("*");
            let tools = Glob::new(glob)
                .map_err(|e| err(format!("tools {glob:?}: {e}")))?
                .compile_matcher();
            let rate = match &q.rate {
                Some(r) => {
                    let (calls, period) = parse_rate(r).map_err(err)?;
                    Some((calls, period, q.burst.unwrap_or(calls)))
                }
                None => None,
            };
            if rate.is_none() && q.per_day.is_none() && q.concurrency.is_none() {
                return Err(err("give `rate`, `per_day` or `concurrency`".into()));
            }
            if q.concurrency == Some(0) || q.per_day == Some(0) {
                return Err(err("a limit of 0 refuses every call: use a policy".into()));
            }
            let replicas = q.scope == QuotaScope::Replicas;
            if replicas && rate.is_none() && q.per_day.is_none() {
                return Err(err(
                    "scope = \"replicas\" shares a `rate` or `per_day` (calls in progress are per process)"
                        .into(),
                ));
            }
            if q.batch.is_some() && !replicas {
                return Err(err("`batch` is for scope = \"replicas\"".into()));
            }
            if q.batch == Some(0) {
                return Err(err("`batch` must be at least 1".into()));
            }
            let who = match (&q.principal, &q.group) {
                (Some(p), _) => format!("principal {p}"),
                (None, Some(g)) => format!("group {g}"),
                (None, None) => "everyone".into(),
            };
            let label = q
                .name
                .clone()
                .unwrap_or_else(|| format!("quotas[{index}] ({who}, {glob})"));
            let replicas = (replicas && grants.is_some()).then(|| {
                let spec = BudgetSpec {
                    // A changed rule starts with a fresh budget.
                    rule: format!(
                        "{label} rate={} burst={} per_day={}",
                        q.rate.as_deref().unwrap_or("-"),
                        rate.map_or(0, |r| r.2),
                        q.per_day.unwrap_or(0)
                    ),
                    rate,
                    per_day: q.per_day,
                };
                let batch = q.batch.unwrap_or_else(|| default_batch(rate, q.per_day));
                (Arc::new(spec), batch)
            });
            if q.scope == QuotaScope::Replicas && replicas.is_none() {
                tracing::info!(
                    rule = %label,
                    "quota scope \"replicas\" without PostgreSQL: its budget is this process's"
                );
            }
            out.push(Rule {
                label,
                principal: q.principal.clone(),
                group: q.group.clone(),
                tools,
                rate,
                per_day: q.per_day,
                concurrency: q.concurrency,
                replicas,
                budgets: Mutex::default(),
                used: AtomicU64::new(0),
                refused: AtomicU64::new(0),
            });
        }
        Ok(Self { rules: out, grants })
    }

    /// Whether some rule shares its budget with other replicas.
    pub fn shares(&self) -> bool {
        self.grants.is_some() && self.rules.iter().any(|r| r.replicas.is_some())
    }

    /// Every replica-wide budget of this process, to return idle grants.
    fn shared_budgets(&self) -> Vec<Arc<Shared>> {
        self.rules
            .iter()
            .filter(|r| r.replicas.is_some())
            .flat_map(|r| {
                let b = r.budgets.lock().unwrap_or_else(PoisonError::into_inner);
                b.values()
                    .filter_map(|x| x.shared.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Gives back the grants no call used for `idle` (every one with
    /// `Duration::ZERO`: at shutdown), so other replicas can use them.
    pub async fn give_back_idle(&self, idle: Duration) {
        let Some(grants) = &self.grants else { return };
        let now = Instant::now();
        for s in self.shared_budgets() {
            s.return_idle(grants.as_ref(), now, idle).await;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Takes what `call` needs from every rule that applies; the first limit
    /// reached refuses it, naming the rule and when it frees, and what the
    /// call took from the rules before is given back.
    pub fn take(&self, call: &Call<'_>) -> Result<Held, Refusal> {
        let mut held = Held::default();
        let mut took: Vec<Took> = Vec::new();
        let now = Instant::now();
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut passed: Vec<&Rule> = Vec::new();
        for rule in &self.rules {
            if !rule.applies(call.principal, call.capability.name) {
                continue;
            }
            if let Err(refusal) = self.take_one(rule, call, now, epoch, &mut held, &mut took) {
                for t in took {
                    t.give_back(epoch);
                }
                return Err(refusal);
            }
            passed.push(rule);
        }
        // Counted once the call passed every rule.
        for rule in passed {
            rule.used.fetch_add(1, Ordering::Relaxed);
            crate::telemetry::metrics::quota(&rule.label, true);
        }
        Ok(held)
    }

    fn take_one(
        &self,
        rule: &Rule,
        call: &Call<'_>,
        now: Instant,
        epoch: u64,
        held: &mut Held,
        took: &mut Vec<Took>,
    ) -> Result<(), Refusal> {
        let budget = rule.budget(call.principal.name());
        let refused = |what: &str, after: Option<Duration>| {
            rule.refused.fetch_add(1, Ordering::Relaxed);
            crate::telemetry::metrics::quota(&rule.label, false);
            let when = after.map_or_else(
                || "when a call in progress ends".to_string(),
                |d| format!("in {} s", d.as_secs().max(1)),
            );
            Refusal {
                stage: Stage::Limit,
                message: format!(
                    "{} {:?}: principal {:?} reached the {what} of quota {:?}; it frees {when}",
                    call.capability.kind.name(),
                    call.capability.name,
                    call.principal.name(),
                    rule.label
                ),
                policy: Some(rule.label.clone()),
                retry_after: Some(after.unwrap_or(Duration::from_secs(1))),
            }
        };
        if let Some(running) = &budget.running {
            match running.clone().try_acquire_owned() {
                Ok(p) => held.0.push(p),
                Err(_) => return Err(refused("concurrency limit", None)),
            }
        }
        if let Some(s) = &budget.shared {
            let grants = self.grants.as_ref().expect("a shared budget has a store");
            return match s.take(grants, now) {
                Ok(()) => {
                    took.push(Took::Shared(budget.clone()));
                    Ok(())
                }
                Err(why) => Err(refused(&why.what(), Some(why.after))),
            };
        }
        if let Some(b) = &budget.bucket {
            if let Err(after) = b.take(now) {
                return Err(refused("rate", Some(after)));
            }
            took.push(Took::Token(budget.clone()));
        }
        if let Some(limit) = rule.per_day {
            if let Err(after) = budget.daily.take(limit, epoch) {
                return Err(refused("daily count", Some(after)));
            }
            took.push(Took::Day(budget.clone()));
        }
        Ok(())
    }
}

/// How long a replica keeps a grant no call uses before giving it back.
pub const GRANT_IDLE: Duration = Duration::from_secs(2);

/// Gives back idle grants every [`GRANT_IDLE`] while `quotas` is in force.
pub fn return_idle_grants(quotas: std::sync::Weak<Quotas>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    rt.spawn(async move {
        let mut tick = tokio::time::interval(GRANT_IDLE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(q) = quotas.upgrade() else { return };
            q.give_back_idle(GRANT_IDLE).await;
        }
    });
}

impl Drop for Quotas {
    /// A replaced config's unused grants go back to the shared budgets.
    fn drop(&mut self) {
        let Some(grants) = self.grants.clone() else {
            return;
        };
        let budgets = self.shared_budgets();
        if budgets.is_empty() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let now = Instant::now();
                for s in budgets {
                    s.return_idle(grants.as_ref(), now, Duration::ZERO).await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{Capability, Entry, Kind, Transport};
    use crate::store::Grant;
    use futures::future::BoxFuture;
    use serde_json::Value;

    fn call<'a>(p: &'a Principal, name: &'a str) -> Call<'a> {
        Call {
            entry: Entry::ToolsCall,
            principal: p,
            capability: Capability {
                kind: Kind::Tool,
                source: "s",
                name,
                annotations: None,
            },
            arguments: &Value::Null,
            client: None,
            client_version: None,
            transport: Transport::Http,
            endpoint: None,
        }
    }

    fn rule(tools: &str, rate: Option<&str>, per_day: Option<u64>) -> QuotaConfig {
        QuotaConfig {
            name: Some(format!("{tools} {rate:?} {per_day:?}")),
            tools: Some(tools.into()),
            rate: rate.map(str::to_string),
            per_day,
            ..Default::default()
        }
    }

    #[test]
    fn a_call_a_later_rule_refuses_takes_nothing_from_the_rules_before() {
        // Rule 0 (rate 3 for every s__* tool) passes; rule 1 (2 a day on
        // s__a) refuses the third s__a: that call must not cost rule 0 a token.
        let q = Quotas::from_config(
            &[
                rule("s__*", Some("3/hour"), None),
                rule("s__a", None, Some(2)),
            ],
            None,
        )
        .unwrap();
        let who = Principal::local();
        assert!(q.take(&call(&who, "s__a")).is_ok());
        assert!(q.take(&call(&who, "s__a")).is_ok());
        for _ in 0..3 {
            let refused = q.take(&call(&who, "s__a")).unwrap_err();
            assert!(
                refused.message.contains("daily count"),
                "{}",
                refused.message
            );
        }
        // One of rule 0's three tokens is left.
        assert!(q.take(&call(&who, "s__b")).is_ok());
        let refused = q.take(&call(&who, "s__b")).unwrap_err();
        assert!(refused.message.contains("rate"), "{}", refused.message);
        assert_eq!(q.rules[0].used.load(Ordering::Relaxed), 3);
        assert_eq!(q.rules[1].refused.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn replicas_scope_needs_a_shared_limit_and_batch_needs_the_scope() {
        let mut r = rule("*", None, None);
        r.concurrency = Some(2);
        r.scope = QuotaScope::Replicas;
        let e = Quotas::from_config(&[r], None).unwrap_err().to_string();
        assert!(e.contains("per process"), "{e}");
        let mut r = rule("*", Some("5/min"), None);
        r.batch = Some(2);
        let e = Quotas::from_config(&[r], None).unwrap_err().to_string();
        assert!(e.contains("batch"), "{e}");
        assert_eq!(
            default_batch(Some((600, Duration::from_secs(60), 600)), None),
            60
        );
        assert_eq!(default_batch(None, Some(5)), 1);
        assert_eq!(
            default_batch(Some((1, Duration::from_secs(1), 5000)), None),
            100
        );
    }

    /// One budget in memory, as the database keeps it: grants pay credit first.
    struct Memory(Mutex<i64>);

    impl Grants for Memory {
        fn take<'a>(
            &'a self,
            _: &'a BudgetSpec,
            _: &'a str,
            want: u64,
            credit: u64,
        ) -> BoxFuture<'a, Result<Grant, String>> {
            let mut left = self.0.lock().unwrap();
            let calls = (want as i64).min((*left - credit as i64).max(0));
            *left -= credit as i64 + calls;
            let g = Grant {
                calls: calls as u64,
                retry_after: (calls == 0).then_some(Duration::from_secs(60)),
            };
            Box::pin(async move { Ok(g) })
        }
        fn give_back<'a>(
            &'a self,
            _: &'a BudgetSpec,
            _: &'a str,
            calls: u64,
        ) -> BoxFuture<'a, Result<(), String>> {
            *self.0.lock().unwrap() += calls as i64;
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn two_replicas_share_one_budget_within_one_batch_each() {
        let budget: Arc<Memory> = Arc::new(Memory(Mutex::new(10)));
        let mut r = rule("*", None, Some(10));
        r.scope = QuotaScope::Replicas;
        r.batch = Some(2);
        let replicas: Vec<Quotas> = (0..2)
            .map(|_| {
                Quotas::from_config(&[r.clone()], Some(budget.clone() as Arc<dyn Grants>)).unwrap()
            })
            .collect();
        assert!(replicas[0].shares());
        let who = Principal::local();
        let mut admitted = 0;
        let mut named = 0;
        for i in 0..40 {
            match replicas[i % 2].take(&call(&who, "s__a")) {
                Ok(_) => admitted += 1,
                Err(e) => {
                    assert_eq!(e.stage, Stage::Limit);
                    named += usize::from(e.policy.as_deref() == r.name.as_deref());
                }
            }
            // Let the grant fetches run.
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        }
        assert!((10..=10 + 2 * 2).contains(&admitted), "{admitted} admitted");
        assert_eq!(named, 40 - admitted, "every refusal names the rule");
        // What the replicas hold unused goes back.
        for q in &replicas {
            q.give_back_idle(Duration::ZERO).await;
        }
        let left = *budget.0.lock().unwrap();
        assert_eq!(
            left,
            10 - admitted as i64,
            "the budget counts exactly the calls admitted"
        );
    }

    #[test]
    fn rates_parse_and_refuse_bad_text() {
        assert_eq!(parse_rate("60/min").unwrap(), (60, Duration::from_secs(60)));
        assert_eq!(parse_rate("5/s").unwrap(), (5, Duration::from_secs(1)));
        assert!(parse_rate("60").is_err());
        assert!(parse_rate("0/min").is_err());
        assert!(parse_rate("x/min").is_err());
    }

    #[test]
    fn a_bucket_gives_its_burst_then_says_when_the_next_token_comes() {
        let b = Bucket::new(5, Duration::from_secs(60), 5);
        let t = Instant::now();
        for _ in 0..5 {
            assert!(b.take(t).is_ok());
        }
        let after = b.take(t).unwrap_err();
        assert!(
            after > Duration::from_secs(11) && after <= Duration::from_secs(12),
            "{after:?}"
        );
        assert!(b.take(t + Duration::from_secs(12)).is_ok());
    }

    #[test]
    fn a_day_counts_until_midnight_utc() {
        let d = Daily::default();
        let noon = 86_400 * 100 + 43_200;
        assert!(d.take(2, noon).is_ok());
        assert!(d.take(2, noon).is_ok());
        assert_eq!(d.take(2, noon).unwrap_err(), Duration::from_secs(43_200));
        assert!(d.take(2, noon + 43_200).is_ok(), "a new day");
    }
}
