//! Quotas (`[[quotas]]`) as the pipeline's `limit` stage: per principal or
//! group × capability glob, a rate with a burst (a token bucket), a count
//! per UTC day, and calls in progress. Held in this process: with several
//! replicas each has its own budget (a replica-wide budget is not built yet).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use globset::{Glob, GlobMatcher};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Call, Principal, Refusal, Stage};
use crate::config::QuotaConfig;

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
}

/// One rule's state for one principal.
#[derive(Debug)]
struct Budget {
    bucket: Option<Bucket>,
    daily: Daily,
    running: Option<Arc<Semaphore>>,
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
        let budget = Arc::new(Budget {
            bucket: self
                .rate
                .map(|(calls, period, burst)| Bucket::new(calls, period, burst)),
            daily: Daily::default(),
            running: self.concurrency.map(|n| Arc::new(Semaphore::new(n))),
        });
        b.insert(principal.to_string(), budget.clone());
        budget
    }
}

/// What a call holds while it runs (its concurrency slots); dropped with it.
#[derive(Debug, Default)]
pub struct Held(Vec<OwnedSemaphorePermit>);

/// The `[[quotas]]` rules of one config.
#[derive(Debug, Default)]
pub struct Quotas {
    rules: Vec<Rule>,
}

impl Quotas {
    pub fn from_config(rules: &[QuotaConfig]) -> Result<Self, QuotaError> {
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
            let who = match (&q.principal, &q.group) {
                (Some(p), _) => format!("principal {p}"),
                (None, Some(g)) => format!("group {g}"),
                (None, None) => "everyone".into(),
            };
            out.push(Rule {
                label: q
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("quotas[{index}] ({who}, {glob})")),
                principal: q.principal.clone(),
                group: q.group.clone(),
                tools,
                rate,
                per_day: q.per_day,
                concurrency: q.concurrency,
                budgets: Mutex::default(),
                used: AtomicU64::new(0),
                refused: AtomicU64::new(0),
            });
        }
        Ok(Self { rules: out })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Takes what `call` needs from every rule that applies; the first limit
    /// reached refuses it, naming the rule and when it frees.
    pub fn take(&self, call: &Call<'_>) -> Result<Held, Refusal> {
        let mut held = Held::default();
        let now = Instant::now();
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        for rule in &self.rules {
            if !rule.applies(call.principal, call.capability.name) {
                continue;
            }
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
            if let Some(b) = &budget.bucket
                && let Err(after) = b.take(now)
            {
                return Err(refused("rate", Some(after)));
            }
            if let Some(limit) = rule.per_day
                && let Err(after) = budget.daily.take(limit, epoch)
            {
                return Err(refused("daily count", Some(after)));
            }
            rule.used.fetch_add(1, Ordering::Relaxed);
            crate::telemetry::metrics::quota(&rule.label, true);
        }
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
