//! Tool usage per principal (`tool_usage`): counts added in batches, read
//! when a budget decides which tools to list.

use std::collections::HashMap;

use super::db::args;
use super::{Result, Store, now_ms};

impl Store {
    /// Adds `calls` to each `(principal, tool)` in one transaction.
    pub async fn add_tool_usage(&self, counts: &[(String, String, u64)]) -> Result<()> {
        let now = now_ms();
        let stmts = counts
            .iter()
            .map(|(p, t, n)| {
                (
                    "INSERT INTO tool_usage (principal, tool, calls, last_used) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (principal, tool) DO UPDATE SET calls = tool_usage.calls + excluded.calls, last_used = excluded.last_used",
                    args![p, t, *n as i64, now],
                )
            })
            .collect();
        self.db.bulk(stmts).await?;
        Ok(())
    }

    /// Every tool `principal` has called, with its count.
    pub async fn tool_usage(&self, principal: &str) -> Result<HashMap<String, u64>> {
        self.db
            .query(
                "SELECT tool, calls FROM tool_usage WHERE principal = ?1",
                args![principal],
            )
            .await?
            .iter()
            .map(|r| Ok((r.text(0)?, r.int(1)? as u64)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_stores;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_add_up_per_principal() {
        for s in test_stores().await {
            s.add_tool_usage(&[("a".into(), "x".into(), 2), ("b".into(), "x".into(), 1)])
                .await
                .unwrap();
            s.add_tool_usage(&[("a".into(), "x".into(), 3)])
                .await
                .unwrap();
            assert_eq!(s.tool_usage("a").await.unwrap().get("x"), Some(&5));
            assert_eq!(s.tool_usage("b").await.unwrap().get("x"), Some(&1));
            assert!(s.tool_usage("c").await.unwrap().is_empty());
        }
    }
}
