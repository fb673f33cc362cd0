//! Run leases (`run_leases`): the replica that executes a run holds a row
//! whose `expires_at` its heartbeat pushes forward. A lease left to expire
//! means that replica is gone (killed, partitioned, frozen): another replica
//! claims the row (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so reapers never
//! wait on each other or on a renewal) and marks the run `interrupted`.
//! Runs are not resumed elsewhere.

use std::collections::HashSet;
use std::time::Duration;

use super::db::{Row, args};
use super::{DROP_LEASE, INTERRUPT_NODES, INTERRUPT_RUN, Result, Store, now_ms};

/// How long a lease lasts without renewal, and how often it is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimes {
    pub ttl: Duration,
    pub heartbeat: Duration,
}

impl Default for LeaseTimes {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(15),
            heartbeat: Duration::from_secs(5),
        }
    }
}

impl LeaseTimes {
    /// `heartbeat` is kept under a third of `ttl`, so two missed beats
    /// never lose a lease.
    pub fn new(ttl: Duration, heartbeat: Duration) -> Self {
        let ttl = ttl.max(Duration::from_millis(300));
        Self {
            ttl,
            heartbeat: heartbeat.clamp(Duration::from_millis(100), ttl / 3),
        }
    }

    pub fn ttl_ms(&self) -> i64 {
        self.ttl.as_millis() as i64
    }
}

const WHY: &str = "the replica running it stopped renewing its lease";

impl Store {
    pub fn lease_times(&self) -> LeaseTimes {
        self.leases
    }

    /// Pushes this replica's leases forward; returns the runs it still
    /// holds. A run of this replica missing from the answer was lost (its
    /// lease expired and another replica ended it): stop executing it.
    pub async fn renew_leases(&self) -> Result<Vec<String>> {
        Ok(self
            .db
            .query(
                "UPDATE run_leases SET expires_at = ?2 WHERE replica = ?1 RETURNING run_id",
                args![&self.host, now_ms() + self.leases.ttl_ms()],
            )
            .await?
            .iter()
            .filter_map(|r| r.opt_text(0))
            .collect())
    }

    /// Ends the runs whose lease expired: `interrupted`, lease dropped.
    /// Returns their ids.
    pub async fn reap_expired(&self) -> Result<Vec<String>> {
        let now = now_ms();
        let then = move |r: &Row| {
            let id = r.opt_text(0).unwrap_or_default();
            vec![
                (INTERRUPT_RUN, args![&id, now, WHY]),
                (INTERRUPT_NODES, args![&id, now]),
                (DROP_LEASE, args![&id]),
            ]
        };
        Ok(self
            .db
            .select_then(
                "SELECT run_id FROM run_leases WHERE expires_at < ?1 ORDER BY run_id",
                "SELECT run_id FROM run_leases WHERE expires_at < ?1 ORDER BY run_id FOR UPDATE SKIP LOCKED",
                args![now],
                &then,
            )
            .await?
            .iter()
            .filter_map(|r| r.opt_text(0))
            .collect())
    }

    /// One beat: renews this replica's leases, ends the runs whose leases
    /// expired, and announces on [`Store::stopped_runs`] the runs this
    /// replica executes but no longer holds. Returns the runs it ended.
    pub async fn heartbeat(&self) -> Result<Vec<String>> {
        let held: HashSet<String> = self.renew_leases().await?.into_iter().collect();
        let lost: Vec<String> = self
            .mine_mut()
            .iter()
            .filter(|id| !held.contains(*id))
            .cloned()
            .collect();
        for id in lost {
            tracing::warn!(run = %id, "this replica lost the run's lease: stopping it");
            self.signals.stop(&id);
            self.mine_mut().remove(&id);
        }
        let ended = self.reap_expired().await?;
        for id in &ended {
            tracing::warn!(run = %id, "run interrupted: its replica's lease expired");
        }
        Ok(ended)
    }

    /// Runs this replica must stop executing (see [`Store::heartbeat`]).
    pub fn stopped_runs(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        self.signals.stop.as_ref().map(|s| s.subscribe())
    }

    /// Asks the replica executing `run_id` to cancel it: through PostgreSQL
    /// (`NOTIFY wf_cancel`) when another replica holds its lease. Whether a
    /// replica holds it (false: not running anywhere, or SQLite, where runs
    /// are cancelled in process).
    pub async fn request_cancel(&self, run_id: &str) -> Result<bool> {
        if self.signals.stop(run_id) {
            return Ok(true);
        }
        if self.backend() != "postgres" || self.lease_holder(run_id).await?.is_none() {
            return Ok(false);
        }
        self.db
            .execute("SELECT pg_notify('wf_cancel', ?1)", args![run_id])
            .await?;
        Ok(true)
    }

    /// The replica holding `run_id`'s lease, if any.
    pub async fn lease_holder(&self, run_id: &str) -> Result<Option<String>> {
        Ok(self
            .db
            .query_opt(
                "SELECT replica FROM run_leases WHERE run_id = ?1",
                args![run_id],
            )
            .await?
            .and_then(|r| r.opt_text(0)))
    }
}
