//! Tool usage per principal (`tool_usage`): counts added in batches, read
//! when a budget decides which tools to list.

use std::collections::HashMap;

use rusqlite::params;

use super::{Result, Store, now_ms};

impl Store {
    /// Adds `calls` to each `(principal, tool)` in one transaction.
    pub fn add_tool_usage(&self, counts: &[(String, String, u64)]) -> Result<()> {
        self.with(|db| {
            let tx = db.transaction()?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO tool_usage (principal, tool, calls, last_used) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (principal, tool) DO UPDATE SET calls = calls + excluded.calls, last_used = excluded.last_used",
                )?;
                let now = now_ms();
                for (p, t, n) in counts {
                    st.execute(params![p, t, *n as i64, now])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Every tool `principal` has called, with its count.
    pub fn tool_usage(&self, principal: &str) -> Result<HashMap<String, u64>> {
        self.with(|db| {
            let mut st =
                db.prepare_cached("SELECT tool, calls FROM tool_usage WHERE principal = ?1")?;
            let rows = st.query_map(params![principal], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
            })?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_principal() {
        let s = Store::in_memory().unwrap();
        s.add_tool_usage(&[("a".into(), "x".into(), 2), ("b".into(), "x".into(), 1)])
            .unwrap();
        s.add_tool_usage(&[("a".into(), "x".into(), 3)]).unwrap();
        assert_eq!(s.tool_usage("a").unwrap().get("x"), Some(&5));
        assert_eq!(s.tool_usage("b").unwrap().get("x"), Some(&1));
        assert!(s.tool_usage("c").unwrap().is_empty());
    }
}
