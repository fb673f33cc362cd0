//! wf's own runs started as MCP Tasks (`run_tasks`): written when a task is
//! created, read when wf starts, so a task outlives a restart as its run does.
//! Forwarded upstream tasks are not kept (a restarted source has lost them).

use super::db::args;
use super::{Result, Store};

/// A stored task: its id, owner, run, and creation time (ms since the epoch).
pub type RunTaskRow = (String, String, String, i64);

impl Store {
    pub async fn save_run_task(
        &self,
        id: &str,
        owner: &str,
        run_id: &str,
        created_ms: i64,
    ) -> Result<()> {
        self.db
            .execute(
                "INSERT INTO run_tasks (id, owner, run_id, created_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, run_id = excluded.run_id, created_at = excluded.created_at",
                args![id, owner, run_id, created_ms],
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
                "SELECT id, owner, run_id, created_at FROM run_tasks ORDER BY created_at, id",
                args![],
            )
            .await?
            .iter()
            .map(|r| Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.int(3)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_stores;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_are_kept_until_they_are_too_old() {
        for s in test_stores().await {
            s.save_run_task("wft-1", "alice", "run-1", 100)
                .await
                .unwrap();
            s.save_run_task("wft-2", "bob", "run-2", 200).await.unwrap();
            assert_eq!(
                s.run_tasks_since(0).await.unwrap(),
                vec![
                    ("wft-1".into(), "alice".into(), "run-1".into(), 100),
                    ("wft-2".into(), "bob".into(), "run-2".into(), 200),
                ]
            );
            assert_eq!(s.run_tasks_since(150).await.unwrap().len(), 1);
            // The older one is gone for good.
            assert_eq!(s.run_tasks_since(0).await.unwrap().len(), 1);
        }
    }
}
