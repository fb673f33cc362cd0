//! The semantic ranker's tool vectors (`tool_embeddings`), by model and the
//! hash of the text embedded: written once per changed tool, read at start,
//! and pruned when no tool listed has that text any more.

use std::collections::HashSet;

use super::db::args;
use super::{Result, Store, now_ms};

/// The most vectors read back for one model (the in-memory bound too).
pub const MAX_STORED_VECTORS: i64 = 100_000;
/// The most rows one prune looks at (oldest first) and deletes: a store
/// holding more stale rows than that loses them over several prunes.
pub const PRUNE_SCAN: i64 = 2 * MAX_STORED_VECTORS;
pub const PRUNE_MAX: usize = 5_000;

impl Store {
    /// Every stored vector of `model`, as (hash, hex of little-endian f32s).
    pub async fn tool_embeddings(&self, model: &str) -> Result<Vec<(String, String)>> {
        self.db
            .query(
                "SELECT hash, vector FROM tool_embeddings WHERE model = ?1 ORDER BY created_at DESC LIMIT ?2",
                args![model, MAX_STORED_VECTORS],
            )
            .await?
            .iter()
            .map(|r| Ok((r.text(0)?, r.text(1)?)))
            .collect()
    }

    /// Saves (hash, dimension, hex vector) rows of `model`, in one
    /// transaction; a hash already stored keeps its row.
    pub async fn save_tool_embeddings(
        &self,
        model: &str,
        rows: &[(String, usize, String)],
    ) -> Result<()> {
        let now = now_ms();
        let stmts = rows
            .iter()
            .map(|(hash, dim, vector)| {
                (
                    "INSERT INTO tool_embeddings (model, hash, dim, vector, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (model, hash) DO NOTHING",
                    args![model, hash, *dim as i64, vector, now],
                )
            })
            .collect();
        self.db.bulk(stmts).await?;
        Ok(())
    }

    /// Deletes the stored vectors that are not `model`'s vectors of the
    /// texts hashed in `keep` (other models' vectors go too): at most
    /// `PRUNE_MAX` rows, oldest first, in one transaction. Returns how many
    /// were deleted.
    pub async fn prune_tool_embeddings(
        &self,
        model: &str,
        keep: &HashSet<String>,
    ) -> Result<usize> {
        let rows = self
            .db
            .query(
                "SELECT model, hash FROM tool_embeddings ORDER BY created_at ASC LIMIT ?1",
                args![PRUNE_SCAN],
            )
            .await?;
        let mut stmts = Vec::new();
        for r in &rows {
            let (m, h) = (r.text(0)?, r.text(1)?);
            if m == model && keep.contains(&h) {
                continue;
            }
            stmts.push((
                "DELETE FROM tool_embeddings WHERE model = ?1 AND hash = ?2",
                args![m, h],
            ));
            if stmts.len() >= PRUNE_MAX {
                break;
            }
        }
        if stmts.is_empty() {
            return Ok(0);
        }
        Ok(self.db.bulk(stmts).await?.iter().sum::<u64>() as usize)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_stores;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn vectors_are_kept_per_model_once() {
        for s in test_stores().await {
            let row = |h: &str, v: &str| (h.to_string(), 2, v.to_string());
            s.save_tool_embeddings("m", &[row("h1", "AAAA"), row("h2", "BBBB")])
                .await
                .unwrap();
            s.save_tool_embeddings("m", &[row("h1", "CCCC")])
                .await
                .unwrap();
            let mut got = s.tool_embeddings("m").await.unwrap();
            got.sort();
            assert_eq!(
                got,
                [
                    ("h1".to_string(), "AAAA".to_string()),
                    ("h2".to_string(), "BBBB".to_string())
                ]
            );
            assert!(s.tool_embeddings("other").await.unwrap().is_empty());
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn vectors_no_tool_has_are_pruned() {
        for s in test_stores().await {
            let row = |h: &str| (h.to_string(), 2, "AAAA".to_string());
            s.save_tool_embeddings("m", &[row("h1"), row("h2"), row("h3")])
                .await
                .unwrap();
            s.save_tool_embeddings("old-model", &[row("h1")])
                .await
                .unwrap();
            let keep = ["h1".to_string(), "h3".to_string()].into_iter().collect();
            // h2 (a tool whose text changed) and the other model's row go.
            assert_eq!(s.prune_tool_embeddings("m", &keep).await.unwrap(), 2);
            let mut got: Vec<String> = s
                .tool_embeddings("m")
                .await
                .unwrap()
                .into_iter()
                .map(|(h, _)| h)
                .collect();
            got.sort();
            assert_eq!(got, ["h1", "h3"]);
            assert!(s.tool_embeddings("old-model").await.unwrap().is_empty());
            assert_eq!(s.prune_tool_embeddings("m", &keep).await.unwrap(), 0);
        }
    }
}
