//! The tasks clients started (`run_tasks`): written when a task is created,
//! read when wf starts. A run's task outlives a restart as its run does; a
//! task a source served (forwarded) is kept with its source, so that after a
//! restart it reads failed, state lost (a restarted source has lost it),
//! rather than "no task".

use super::db::args;
use super::{Result, Store};

/// A stored task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunTaskRow {
    pub id: String,
    pub owner: String,
    /// Its run ("" for a source's task).
    pub run_id: String,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// A source's task: the source and the source's own task id.
    pub source: Option<(String, String)>,
}

impl Store {
    pub async fn save_run_task(&self, row: &RunTaskRow) -> Result<()> {
        let (source, source_task) = match &row.source {
            Some((s, t)) => (Some(s.as_str()), Some(t.as_str())),
            None => (None, None),
        };
        self.db
            .execute(
                "INSERT INTO run_tasks (id, owner, run_id, created_at, source, source_task)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, run_id = excluded.run_id,
                   created_at = excluded.created_at, source = excluded.source,
                   source_task = excluded.source_task",
                args![
                    row.id.as_str(),
                    row.owner.as_str(),
                    row.run_id.as_str(),
                    row.created_ms,
                    source,
                    source_task
                ],
            )
            .await?;
        Ok(())
    }

    /// The tasks created at `since_ms` or later; older ones are deleted.
    pub async fn run_tasks_since(&self, since_ms: i64) -> Result<Vec<RunTaskRow>> {
        self.db
            .execute(
                "DELETE FROM run_tasks WHERE created_at < ?1",
                args![since_ms],
            )
            .await?;
        self.db
            .query(
                "SELECT id, owner, run_id, created_at, source, source_task FROM run_tasks
                 ORDER BY created_at, id",
                args![],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(RunTaskRow {
                    id: r.text(0)?,
                    owner: r.text(1)?,
                    run_id: r.text(2)?,
                    created_ms: r.int(3)?,
                    source: r.opt_text(4).zip(r.opt_text(5)),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_stores;

    use super::RunTaskRow;

    fn row(
        id: &str,
        owner: &str,
        run_id: &str,
        ms: i64,
        source: Option<(&str, &str)>,
    ) -> RunTaskRow {
        RunTaskRow {
            id: id.into(),
            owner: owner.into(),
            run_id: run_id.into(),
            created_ms: ms,
            source: source.map(|(s, t)| (s.into(), t.into())),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_are_kept_until_they_are_too_old() {
        for s in test_stores().await {
            let rows = [
                row("wft-1", "alice", "run-1", 100, None),
                row("wft-2", "bob", "", 200, Some(("fix", "up-7"))),
            ];
            for r in &rows {
                s.save_run_task(r).await.unwrap();
            }
            assert_eq!(s.run_tasks_since(0).await.unwrap(), rows.to_vec());
            assert_eq!(s.run_tasks_since(150).await.unwrap().len(), 1);
            // The older one is gone for good.
            assert_eq!(s.run_tasks_since(0).await.unwrap().len(), 1);
        }
    }
}
