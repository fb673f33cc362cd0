//! The semantic ranker's tool vectors (`tool_embeddings`), by model and the
//! hash of the text embedded: written once per changed tool, read at start.

use super::db::args;
use super::{Result, Store, now_ms};

/// The most vectors read back for one model (the in-memory bound too).
pub const MAX_STORED_VECTORS: i64 = 100_000;

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
}
