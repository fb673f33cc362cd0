//! A budget shared by replicas (`[[quotas]] scope = "replicas"`): the
//! database holds one rate bucket and daily count per rule and principal;
//! each replica takes grants of `batch` calls from it and admits calls from
//! its grant in process. The next grant is fetched in the background when
//! the grant runs low, so no call waits on the database.
//!
//! A replica with no grant yet (a new principal, or its fetch still in
//! flight) admits up to one batch on credit, paid from its next grant even
//! into the red: across replicas the budget is overrun by at most one batch
//! per replica, and only until the database says it is spent (then each
//! refuses until the time it named). When the database cannot be reached,
//! a replica admits no more than that credit. Grants left unused for a
//! while, and at shutdown, go back.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::store::{BudgetSpec, Grant, Store};

/// Where replica-wide grants come from: the PostgreSQL store (a fake in tests).
pub trait Grants: Send + Sync + 'static {
    /// Up to `want` calls, after paying `credit` calls admitted before.
    fn take<'a>(
        &'a self,
        spec: &'a BudgetSpec,
        principal: &'a str,
        want: u64,
        credit: u64,
    ) -> BoxFuture<'a, Result<Grant, String>>;
    /// Returns `calls` not used.
    fn give_back<'a>(
        &'a self,
        spec: &'a BudgetSpec,
        principal: &'a str,
        calls: u64,
    ) -> BoxFuture<'a, Result<(), String>>;
}

impl Grants for Store {
    fn take<'a>(
        &'a self,
        spec: &'a BudgetSpec,
        principal: &'a str,
        want: u64,
        credit: u64,
    ) -> BoxFuture<'a, Result<Grant, String>> {
        Box::pin(async move {
            self.take_grant(spec, principal, want, credit)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn give_back<'a>(
        &'a self,
        spec: &'a BudgetSpec,
        principal: &'a str,
        calls: u64,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            Store::give_back(self, spec, principal, calls)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// Why a shared budget refused a call, and when to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub after: Duration,
    pub why: Why,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The database said the budget is spent.
    Spent,
    /// This replica's credit is used and its next grant is not there yet.
    Waiting,
    /// The last grant could not be fetched.
    Unreachable(String),
}

impl Refused {
    /// The limit reached, as the refusal names it.
    pub fn what(&self) -> String {
        match &self.why {
            Why::Spent => "replica-wide budget".into(),
            Why::Waiting => "replica-wide budget (this replica's share is being fetched)".into(),
            Why::Unreachable(e) => {
                format!("replica-wide budget (the store holding it cannot be reached: {e})")
            }
        }
    }
}

/// How long a refusal waits when the database named no time.
const RETRY: Duration = Duration::from_secs(1);

/// One replica's side of one principal's shared budget under one rule.
#[derive(Debug, Default)]
struct State {
    /// Calls granted and not used; below zero, calls admitted on credit.
    local: i64,
    /// The database said the budget is spent: refuse until then.
    spent_until: Option<Instant>,
    /// The last fetch failed: refuse (past the credit) with its error.
    failed: Option<(String, Instant)>,
    /// A fetch is in flight.
    fetching: bool,
    /// When a call last took from this budget.
    used_at: Option<Instant>,
}

/// What [`State::decide`] says of one call.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Admit { fetch: bool },
    Refuse { refused: Refused, fetch: bool },
}

impl State {
    /// Admits from the grant, else on credit, else refuses; says whether to
    /// fetch the next grant now. Pure, so the grant logic is unit-tested.
    fn decide(&mut self, batch: u64, now: Instant) -> Step {
        let batch = batch as i64;
        let start = |s: &mut Self| !std::mem::replace(&mut s.fetching, true);
        if self.local > 0 {
            self.local -= 1;
            self.used_at = Some(now);
            // Fetch ahead at half the batch, so the grant never runs dry.
            let fetch = self.local * 2 < batch && start(self);
            return Step::Admit { fetch };
        }
        if let Some(until) = self.spent_until.filter(|t| *t > now) {
            return Step::Refuse {
                refused: Refused {
                    after: until - now,
                    why: Why::Spent,
                },
                fetch: false,
            };
        }
        if self.local > -batch && self.failed.as_ref().is_none_or(|(_, t)| *t <= now) {
            self.local -= 1;
            self.used_at = Some(now);
            let fetch = start(self);
            return Step::Admit { fetch };
        }
        let why = match &self.failed {
            Some((e, _)) => Why::Unreachable(e.clone()),
            None => Why::Waiting,
        };
        let fetch = start(self);
        Step::Refuse {
            refused: Refused { after: RETRY, why },
            fetch,
        }
    }

    /// What a fetch brings: the grant (after `credit` was paid), or an error.
    fn apply(&mut self, credit: u64, got: Result<Grant, String>, now: Instant) {
        self.fetching = false;
        match got {
            Ok(g) => {
                self.local += credit as i64 + g.calls as i64;
                self.failed = None;
                self.spent_until = (g.calls == 0).then(|| now + g.retry_after.unwrap_or(RETRY));
            }
            Err(e) => self.failed = Some((e, now + RETRY)),
        }
    }
}

/// One principal's shared budget under one rule, on this replica.
#[derive(Debug)]
pub struct Shared {
    spec: Arc<BudgetSpec>,
    principal: String,
    batch: u64,
    state: Mutex<State>,
}

impl Shared {
    pub fn new(spec: Arc<BudgetSpec>, principal: &str, batch: u64) -> Self {
        Self {
            spec,
            principal: principal.to_string(),
            batch: batch.max(1),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one call; fetches the next grant in the background when due.
    pub fn take(self: &Arc<Self>, grants: &Arc<dyn Grants>, now: Instant) -> Result<(), Refused> {
        let step = self.state().decide(self.batch, now);
        let (fetch, out) = match step {
            Step::Admit { fetch } => (fetch, Ok(())),
            Step::Refuse { refused, fetch } => (fetch, Err(refused)),
        };
        if fetch {
            self.fetch(grants.clone());
        }
        out
    }

    /// A call taken and then refused by a later check: its call goes back.
    pub fn give_back(&self) {
        self.state().local += 1;
    }

    fn fetch(self: &Arc<Self>, grants: Arc<dyn Grants>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.state().fetching = false;
            return;
        };
        let me = self.clone();
        rt.spawn(async move {
            let credit = (-me.state().local).max(0) as u64;
            let got = grants.take(&me.spec, &me.principal, me.batch, credit).await;
            if let Err(e) = &got {
                tracing::warn!(rule = %me.spec.rule, principal = %me.principal, "quota grant: {e}");
            }
            me.state().apply(credit, got, Instant::now());
        });
    }

    /// Gives back the grant if no call used it for `idle`.
    pub async fn return_idle(&self, grants: &dyn Grants, now: Instant, idle: Duration) {
        let calls = {
            let mut s = self.state();
            let idle_enough = s
                .used_at
                .is_none_or(|t| now.saturating_duration_since(t) >= idle);
            if s.fetching || s.local <= 0 || !idle_enough {
                return;
            }
            std::mem::take(&mut s.local) as u64
        };
        match grants.give_back(&self.spec, &self.principal, calls).await {
            Ok(()) if idle.is_zero() => {
                tracing::info!(rule = %self.spec.rule, principal = %self.principal, calls, "quota grant given back")
            }
            Ok(()) => {
                tracing::debug!(rule = %self.spec.rule, principal = %self.principal, calls, "quota grant given back")
            }
            Err(e) => {
                tracing::warn!(rule = %self.spec.rule, principal = %self.principal, "quota grant not given back: {e}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(calls: u64) -> Result<Grant, String> {
        Ok(Grant {
            calls,
            retry_after: (calls == 0).then_some(Duration::from_secs(30)),
        })
    }

    #[test]
    fn a_cold_replica_admits_one_batch_on_credit_and_fetches_once() {
        let mut s = State::default();
        let t = Instant::now();
        assert_eq!(s.decide(3, t), Step::Admit { fetch: true });
        assert_eq!(s.decide(3, t), Step::Admit { fetch: false });
        assert_eq!(s.decide(3, t), Step::Admit { fetch: false });
        // The credit (one batch) is used and the grant is not there yet.
        let Step::Refuse { refused, fetch } = s.decide(3, t) else {
            panic!("admitted past the credit");
        };
        assert_eq!(refused.why, Why::Waiting);
        assert!(!fetch, "one fetch at a time");
        // The grant pays the three calls on credit and brings three more.
        s.apply(3, grant(3), t);
        assert_eq!(s.local, 3);
        assert!(matches!(s.decide(3, t), Step::Admit { .. }));
    }

    #[test]
    fn the_next_grant_is_fetched_at_half_the_batch() {
        let mut s = State {
            local: 4,
            ..State::default()
        };
        let t = Instant::now();
        assert_eq!(s.decide(4, t), Step::Admit { fetch: false });
        assert_eq!(s.decide(4, t), Step::Admit { fetch: false });
        // 1 left of 4: below half, fetch (once).
        assert_eq!(s.decide(4, t), Step::Admit { fetch: true });
        assert_eq!(s.decide(4, t), Step::Admit { fetch: false });
        s.apply(0, grant(4), t);
        assert_eq!(s.local, 4);
    }

    #[test]
    fn a_spent_budget_refuses_until_the_time_the_database_named() {
        let mut s = State::default();
        let t = Instant::now();
        assert_eq!(s.decide(2, t), Step::Admit { fetch: true });
        // The database had nothing: the call on credit was charged to it.
        s.apply(1, grant(0), t);
        let Step::Refuse { refused, fetch } = s.decide(2, t + Duration::from_secs(10)) else {
            panic!("admitted a spent budget");
        };
        assert_eq!(refused.why, Why::Spent);
        assert_eq!(refused.after, Duration::from_secs(20));
        assert!(!fetch);
        // Past that time: on credit again, and a fetch.
        assert_eq!(
            s.decide(2, t + Duration::from_secs(31)),
            Step::Admit { fetch: true }
        );
    }

    #[test]
    fn an_unreachable_store_admits_no_more_than_the_credit() {
        let mut s = State::default();
        let t = Instant::now();
        assert_eq!(s.decide(1, t), Step::Admit { fetch: true });
        s.apply(1, Err("connection refused".into()), t);
        // Credit not paid: still owed, so nothing more on credit.
        assert_eq!(s.local, -1);
        let Step::Refuse { refused, fetch } = s.decide(1, t + RETRY) else {
            panic!("admitted past the credit with the store down");
        };
        assert_eq!(refused.why, Why::Unreachable("connection refused".into()));
        assert!(fetch, "tries again");
        assert!(refused.what().contains("connection refused"));
    }

    #[test]
    fn a_call_given_back_is_not_counted() {
        let s = Shared::new(
            Arc::new(BudgetSpec {
                rule: "r".into(),
                rate: None,
                per_day: Some(5),
            }),
            "p",
            2,
        );
        s.state().local = 1;
        let t = Instant::now();
        assert!(matches!(s.state().decide(2, t), Step::Admit { .. }));
        s.give_back();
        assert_eq!(s.state().local, 1);
    }
}
