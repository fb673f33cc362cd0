//! `wf audit`: the audit trail, filtered, as a table, JSON lines or CSV
//! (docs/operator-manual.md, "Audit trail"). With `[store] url`, every
//! replica's records.

use clap::{Args, ValueEnum};

use super::CommonArgs;
use crate::app::{open_store, state_dir};
use crate::audit::query;
use crate::store::AuditFilter;

#[derive(Debug, Clone, Copy, Default, ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Jsonl,
    Csv,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// From this time on: 2026-12-01, 2026-12-01T09:00:00Z, Unix ms, or an age (15m, 2h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Before this time (same forms as --since).
    #[arg(long)]
    pub until: Option<String>,
    #[arg(long)]
    pub principal: Option<String>,
    /// Records of principals in this group.
    #[arg(long)]
    pub group: Option<String>,
    /// A glob over the capability's name (`github__*`).
    #[arg(long)]
    pub capability: Option<String>,
    #[arg(long)]
    pub source: Option<String>,
    /// ok, tool_error, protocol_error, cancelled, timed_out, denied, limited.
    #[arg(long)]
    pub outcome: Option<String>,
    /// allow, deny, held, limited.
    #[arg(long)]
    pub decision: Option<String>,
    /// A workflow run's id.
    #[arg(long)]
    pub run: Option<String>,
    /// tool, resource, prompt, completion, subscription, node, admin, console.
    #[arg(long)]
    pub kind: Option<String>,
    /// Newest first, at most this many.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

impl AuditArgs {
    fn filter(&self, now_ms: i64) -> anyhow::Result<AuditFilter> {
        let time = |t: &Option<String>, flag: &str| -> anyhow::Result<Option<i64>> {
            t.as_deref()
                .map(|t| query::parse_time(t, now_ms).map_err(|e| anyhow::anyhow!("--{flag} {e}")))
                .transpose()
        };
        Ok(AuditFilter {
            since: time(&self.since, "since")?,
            until: time(&self.until, "until")?,
            principal: self.principal.clone(),
            group: self.group.clone(),
            capability: self.capability.clone(),
            source: self.source.clone(),
            outcome: self.outcome.clone(),
            decision: self.decision.clone(),
            run: self.run.clone(),
            kind: self.kind.clone(),
            limit: Some(self.limit),
        })
    }
}

pub async fn run(args: AuditArgs, log_level: &str) -> anyhow::Result<i32> {
    let filter = args.filter(crate::store::now_ms())?;
    let opts = args.common.start_options(log_level);
    let config = crate::config::LoadedConfig::open(opts.config.as_deref())?;
    let dir = state_dir(&opts, &config);
    let store = open_store(&config, &dir, None).await?;
    let records = store.audit(&filter).await?;
    let text = match args.format {
        Format::Table => query::table(&records),
        Format::Jsonl => query::json_lines(&records),
        Format::Csv => query::csv(&records),
    };
    print!("{text}");
    if !config.config.audit.enabled {
        eprintln!(
            "note: [audit] enabled = false in {}: nothing new is recorded",
            config.file_label()
        );
    }
    Ok(0)
}
