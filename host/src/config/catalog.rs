//! `[server.catalog]` and a token's `catalog`: how much of the tool catalog
//! a principal's client is shown (catalog mode, budgets).

use serde::{Deserialize, Serialize};

/// How a principal's `tools/list` presents the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogMode {
    /// Every tool the principal may use (within its budgets).
    #[default]
    Full,
    /// The meta-tools `wf_find`, `wf_describe` and `wf_call`, plus pinned tools.
    Search,
    /// `full` up to `auto_threshold` tools, `search` beyond.
    Auto,
}

/// One level of catalog settings; unset fields fall back to the level below
/// (a token's `catalog` over `[server.catalog]` over the defaults).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<CatalogMode>,
    /// `auto`: the most tools listed in full (default 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_threshold: Option<usize>,
    /// The most tools listed (the most used first); the rest stay reachable
    /// through the meta-tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tools: Option<usize>,
    /// The most bytes of tool definitions listed (serialized JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_schema_bytes: Option<usize>,
    /// Globs on client-visible tool names listed beside the meta-tools in
    /// `search` mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Vec<String>>,
    /// Tools a session found with `wf_find` join its `tools/list` (with a
    /// `list_changed` notification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_found: Option<bool>,
    /// The semantic ranker's embeddings endpoint (`[server.catalog]` only;
    /// a token's or group's is ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<EmbeddingsConfig>,
}

/// `[server.catalog] embeddings`: an OpenAI-compatible `/v1/embeddings`
/// endpoint whose vectors `wf_find` blends with its lexical ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// The full URL, e.g. `http://127.0.0.1:11434/v1/embeddings`.
    pub endpoint: String,
    /// The `model` sent with every request (and part of the cache key).
    pub model: String,
    /// The environment variable holding a bearer token, if the endpoint needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// How long a query's embedding may take before `wf_find` answers
    /// lexically (default 1500).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How long one batch of tool texts may take at discovery (default 120000).
    #[serde(default = "default_batch_timeout_ms")]
    pub batch_timeout_ms: u64,
    /// Put before a `wf_find` query when it is embedded, for a model trained
    /// with one (e5: `"query: "`; nomic-embed-text: `"search_query: "`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub query_prefix: String,
    /// Put before each tool's text when it is embedded (e5: `"passage: "`;
    /// nomic-embed-text: `"search_document: "`); part of the cache key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub document_prefix: String,
    /// The lexical ranking's share of a blended score, 0 to 1 (the cosine
    /// has the rest; default 0.2, tuned with all-MiniLM-L6-v2). A stronger
    /// model deserves less: 0.1 with EmbeddingGemma-300M.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lexical_share: Option<f32>,
}

fn default_timeout_ms() -> u64 {
    1_500
}

fn default_batch_timeout_ms() -> u64 {
    120_000
}

pub const DEFAULT_AUTO_THRESHOLD: usize = 40;

impl CatalogConfig {
    /// These settings over `base`: a field set here wins.
    pub fn over(&self, base: &CatalogConfig) -> CatalogConfig {
        CatalogConfig {
            mode: self.mode.or(base.mode),
            auto_threshold: self.auto_threshold.or(base.auto_threshold),
            max_tools: self.max_tools.or(base.max_tools),
            max_schema_bytes: self.max_schema_bytes.or(base.max_schema_bytes),
            pinned: self.pinned.clone().or_else(|| base.pinned.clone()),
            keep_found: self.keep_found.or(base.keep_found),
            embeddings: base.embeddings.clone(),
        }
    }

    pub fn mode(&self) -> CatalogMode {
        self.mode.unwrap_or_default()
    }

    pub fn auto_threshold(&self) -> usize {
        self.auto_threshold.unwrap_or(DEFAULT_AUTO_THRESHOLD)
    }

    /// Whether these settings can ever hide a tool from `tools/list`.
    pub fn restricts(&self) -> bool {
        self.mode() != CatalogMode::Full
            || self.max_tools.is_some()
            || self.max_schema_bytes.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_setting_wins_and_unset_ones_fall_back() {
        let server = CatalogConfig {
            mode: Some(CatalogMode::Auto),
            max_tools: Some(10),
            ..Default::default()
        };
        let token = CatalogConfig {
            mode: Some(CatalogMode::Search),
            ..Default::default()
        };
        let c = token.over(&server);
        assert_eq!(
            (c.mode(), c.max_tools, c.auto_threshold()),
            (CatalogMode::Search, Some(10), 40)
        );
        assert!(!CatalogConfig::default().restricts());
    }
}
