//! wf's own runs started as MCP Tasks (`run_tasks`): written when a task is
//! created, read when wf starts, so a task outlives a restart as its run does.
//! Forwarded upstream tasks are not kept (a restarted source has lost them).

use rusqlite::params;

use super::{Result, Store};

/// A stored task: its id, owner, run, and creation time (ms since the epoch).
pub type RunTaskRow = (String, String, String, i64);

impl Store {
    pub fn save_run_task(
        &self,
        id: &str,
        owner: &str,
        run_id: &str,
        created_ms: i64,
    ) -> Result<()> {
        self.with(|db| {
            db.prepare_cached(
                "INSERT OR REPLACE INTO run_tasks (id, owner, run_id, created_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![id, owner, run_id, created_ms])?;
            Ok(())
        })
    }

    /// The tasks created at `since_ms` or later; older ones are deleted.
    pub fn run_tasks_since(&self, since_ms: i64) -> Result<Vec<RunTaskRow>> {
        self.with(|db| {
            db.prepare_cached("DELETE FROM run_tasks WHERE created_at < ?1")?
                .execute(params![since_ms])?;
            let mut st = db.prepare_cached(
                "SELECT id, owner, run_id, created_at FROM run_tasks ORDER BY created_at, id",
            )?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_kept_until_they_are_too_old() {
        let s = Store::in_memory().unwrap();
        s.save_run_task("wft-1", "alice", "run-1", 100).unwrap();
        s.save_run_task("wft-2", "bob", "run-2", 200).unwrap();
        assert_eq!(
            s.run_tasks_since(0).unwrap(),
            vec![
                ("wft-1".into(), "alice".into(), "run-1".into(), 100),
                ("wft-2".into(), "bob".into(), "run-2".into(), 200),
            ]
        );
        assert_eq!(s.run_tasks_since(150).unwrap().len(), 1);
        // The older one is gone for good.
        assert_eq!(s.run_tasks_since(0).unwrap().len(), 1);
    }
}
