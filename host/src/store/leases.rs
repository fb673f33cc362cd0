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

    /// Whether this replica has reached the database for a whole lease
    /// period without a failed beat: only then may it end other replicas'
    /// runs. After an outage every lease has lapsed, and the owners need one
    /// period to renew theirs before anyone takes a lapse for a death.
    fn may_reap(&self) -> bool {
        let since = *self.reachable_since();
        since.is_some_and(|t| t.elapsed() >= self.leases.ttl)
    }

    fn reachable_since(&self) -> std::sync::MutexGuard<'_, Option<std::time::Instant>> {
        self.signals
            .reachable_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
        // The runs whose lease rows had committed before the renewal began:
        // only these can be missing from its answer because they were lost.
        let settled: HashSet<String> = {
            let creating = self.signals.creating();
            self.mine_mut()
                .iter()
                .filter(|id| !creating.contains(*id))
                .cloned()
                .collect()
        };
        let renewed = match self.renew_leases().await {
            Ok(r) => {
                self.reachable_since()
                    .get_or_insert_with(std::time::Instant::now);
                r
            }
            Err(e) => {
                *self.reachable_since() = None;
                return Err(e);
            }
        };
        let held: HashSet<String> = renewed.iter().cloned().collect();
        let (lost, orphans) = {
            let mine = self.mine_mut();
            let lost: Vec<String> = mine
                .iter()
                .filter(|id| settled.contains(*id) && !held.contains(*id))
                .cloned()
                .collect();
            // Leases in this replica's name for runs it does not execute (a
            // replica restarted under the same id): nobody runs them, so they
            // are ended rather than renewed forever. A run that finished
            // meanwhile (in `settled`, its lease dropped since) is none.
            let orphans: Vec<String> = renewed
                .into_iter()
                .filter(|id| !mine.contains(id) && !settled.contains(id))
                .collect();
            (lost, orphans)
        };
        for id in lost {
            tracing::warn!(run = %id, "this replica lost the run's lease: stopping it");
            self.signals.stop(&id);
            self.mine_mut().remove(&id);
        }
        if !orphans.is_empty() {
            self.interrupt(
                &orphans,
                "the replica holding its lease no longer runs it (it restarted)",
            )
            .await?;
            for id in &orphans {
                tracing::warn!(run = %id, "run interrupted: this replica held its lease but no longer runs it");
            }
        }
        if !self.may_reap() {
            return Ok(orphans);
        }
        let mut ended = self.reap_expired().await?;
        for id in &ended {
            tracing::warn!(run = %id, "run interrupted: its replica's lease expired");
        }
        ended.extend(orphans);
        Ok(ended)
    }

    /// The store refused a write for `run_id` because this replica lost its
    /// lease: stop executing it here (as when the heartbeat finds it lost).
    pub fn lost_run(&self, run_id: &str) {
        self.signals.stop(run_id);
        self.mine_mut().remove(run_id);
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{NodeRecord, NodeStatus, RunStatus, StoreError, new_id, test_stores};
    use super::*;

    fn node(id: &str, status: NodeStatus) -> NodeRecord {
        NodeRecord {
            node_id: id.into(),
            capability: "wf.std.sleep".into(),
            status,
            attempts: 1,
            started_at: Some(now_ms()),
            ..Default::default()
        }
    }

    /// The split brain leases exist to prevent: a replica that stalled past
    /// its lease, and whose run another replica ended, writes nothing more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replica_that_lost_the_lease_writes_nothing_for_the_run() {
        for s in test_stores().await {
            let a = s.with_replica(Some("stalled"), LeaseTimes::default());
            a.create_run("r", "wf", &json!({}), &json!({}), "p")
                .await
                .unwrap();
            a.put_node("r", &node("n", NodeStatus::Running))
                .await
                .unwrap();
            a.set_run_sessions("r", &json!({"s": 1})).await.unwrap();
            // It stalls; its lease lapses and another replica ends the run.
            a.db.execute(
                "UPDATE run_leases SET expires_at = 1 WHERE run_id = 'r'",
                args![],
            )
            .await
            .unwrap();
            assert_eq!(a.reap_expired().await.unwrap(), vec!["r".to_string()]);
            let before = a.run("r").await.unwrap();
            // It wakes: every write for the run is refused, and changes nothing.
            let mut done = node("n", NodeStatus::Succeeded);
            done.output = Some(json!(1));
            let refused = a.put_node("r", &done).await;
            assert!(
                matches!(refused, Err(StoreError::LeaseLost(_))),
                "{refused:?}"
            );
            let refused = a.put_node("r", &node("extra", NodeStatus::Cancelled)).await;
            assert!(
                matches!(refused, Err(StoreError::LeaseLost(_))),
                "{refused:?}"
            );
            // A batch is refused whole: the fence rides in its first upsert.
            let both = [
                node("x", NodeStatus::Succeeded),
                node("y", NodeStatus::Failed),
            ];
            let refused = a.put_nodes("r", &both).await;
            assert!(
                matches!(refused, Err(StoreError::LeaseLost(_))),
                "{refused:?}"
            );
            let refused = a.set_run_sessions("r", &json!({"s": 2})).await;
            assert!(
                matches!(refused, Err(StoreError::LeaseLost(_))),
                "{refused:?}"
            );
            let refused = a
                .finish_run("r", RunStatus::Succeeded, Some(&json!({})), None)
                .await;
            assert!(
                matches!(refused, Err(StoreError::LeaseLost(_))),
                "{refused:?}"
            );
            let after = a.run("r").await.unwrap();
            assert_eq!(after.0.status, RunStatus::Interrupted);
            assert_eq!(
                serde_json::to_value(&before).unwrap(),
                serde_json::to_value(&after).unwrap(),
                "nothing written after the lease was lost"
            );
            assert_eq!(a.running_here(), 0, "the run is no longer this replica's");
        }
    }

    /// A replica restarted under the same id finds leases in its name for runs
    /// it does not execute: it ends them rather than renewing them forever.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_in_this_replicas_name_that_it_does_not_run_are_ended() {
        for s in test_stores().await {
            let a = s.with_replica(Some("same-id"), LeaseTimes::default());
            a.create_run("mine", "wf", &json!({}), &json!({}), "p")
                .await
                .unwrap();
            a.create_run("before-restart", "wf", &json!({}), &json!({}), "p")
                .await
                .unwrap();
            a.mine_mut().remove("before-restart");
            let ended = a.heartbeat().await.unwrap();
            assert_eq!(ended, vec!["before-restart".to_string()]);
            assert_eq!(
                a.run("before-restart").await.unwrap().0.status,
                RunStatus::Interrupted
            );
            assert_eq!(a.lease_holder("before-restart").await.unwrap(), None);
            assert_eq!(a.run("mine").await.unwrap().0.status, RunStatus::Running);
            assert_eq!(a.renew_leases().await.unwrap(), vec!["mine".to_string()]);
        }
    }

    /// A renewal that began while a run's lease row was being written does
    /// not return it: that run is not lost. Once the row committed, a renewal
    /// that misses it means it was.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_being_created_is_not_taken_for_lost() {
        for s in test_stores().await {
            let a = s.with_replica(Some("a"), LeaseTimes::default());
            // create_run's state while its INSERTs are in flight.
            a.signals.creating().insert("new".into());
            a.mine_mut().insert("new".into());
            assert!(a.heartbeat().await.unwrap().is_empty());
            assert!(a.mine_mut().contains("new"), "not taken for lost");
            // Committed (as create_run marks it), but no lease row: lost.
            a.signals.creating().remove("new");
            a.heartbeat().await.unwrap();
            assert!(
                !a.mine_mut().contains("new"),
                "a settled run missing is lost"
            );
        }
    }

    /// After an outage every lease has lapsed: a replica takes a lapse for a
    /// death only once it has itself reached the database for a lease period.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn expired_leases_are_reaped_only_after_a_lease_period_of_reachability() {
        for s in test_stores().await {
            let times = LeaseTimes::new(Duration::from_millis(400), Duration::from_millis(100));
            let b = s.with_replica(Some("b"), times);
            b.db.execute(
                "INSERT INTO runs (id, workflow, origin, status, inputs, started_at, host) VALUES ('other', 'wf', '{}', 'running', '{}', 1, 'a')",
                args![],
            )
            .await
            .unwrap();
            b.db.execute(
                "INSERT INTO run_leases (run_id, replica, expires_at) VALUES ('other', 'a', 1)",
                args![],
            )
            .await
            .unwrap();
            assert!(
                b.heartbeat().await.unwrap().is_empty(),
                "just reached the database"
            );
            assert_eq!(b.run("other").await.unwrap().0.status, RunStatus::Running);
            tokio::time::sleep(Duration::from_millis(450)).await;
            assert_eq!(b.heartbeat().await.unwrap(), vec!["other".to_string()]);
            assert_eq!(
                b.run("other").await.unwrap().0.status,
                RunStatus::Interrupted
            );
        }
    }

    /// Replicas starting together on an empty database, and a rolling upgrade
    /// from schema version 3: every one starts, each migration is applied once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_migrating_together_all_start_and_apply_each_version_once() {
        let Ok(url) = std::env::var("WF_TEST_PG_URL") else {
            // test_stores() fails under CI=true without it; SQLite has one writer.
            let _ = test_stores().await;
            return;
        };
        let schema = new_id("wf_mig").replace('-', "_");
        let connect = || Store::connect(&url, 2, Some(&schema), None);
        let started = futures::future::join_all((0..4).map(|_| connect())).await;
        for s in &started {
            assert!(s.is_ok(), "{:?}", s.as_ref().err());
        }
        let s = started.into_iter().next().unwrap().unwrap();
        let versions: Vec<i64> = s
            .migrations()
            .await
            .unwrap()
            .iter()
            .map(|m| m.version)
            .collect();
        assert_eq!(
            versions,
            (1..=super::super::migrate::latest()).collect::<Vec<_>>()
        );
        // Back to version 3, as an older wf left it (later versions forgotten too);
        // then four newer replicas at once.
        s.db.execute("DELETE FROM schema_migrations WHERE version >= 4", args![])
            .await
            .unwrap();
        s.db.execute("ALTER TABLE run_tasks DROP COLUMN source", args![])
            .await
            .unwrap();
        s.db.execute("ALTER TABLE run_tasks DROP COLUMN source_task", args![])
            .await
            .unwrap();
        let again = futures::future::join_all((0..4).map(|_| connect())).await;
        for s in &again {
            assert!(s.is_ok(), "{:?}", s.as_ref().err());
        }
        let applied = s.migrations().await.unwrap();
        assert_eq!(applied.iter().filter(|m| m.version == 4).count(), 1);
        s.db.execute("SELECT source, source_task FROM run_tasks", args![])
            .await
            .unwrap();
        // A half-applied migration (its column there, its record not) runs again.
        s.db.execute("DELETE FROM schema_migrations WHERE version >= 4", args![])
            .await
            .unwrap();
        s.db.execute("ALTER TABLE run_tasks DROP COLUMN source_task", args![])
            .await
            .unwrap();
        connect().await.unwrap();
        // An older wf meeting this schema says which version it needs.
        s.db.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)",
            args![],
        )
        .await
        .unwrap();
        let refused = connect().await.err().expect("a newer schema is refused");
        assert!(
            matches!(refused, StoreError::TooNew { found: 99, .. }),
            "{refused}"
        );
    }
}
