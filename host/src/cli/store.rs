//! `wf store migrate`: brings the configured store (`[store] url`, or
//! SQLite in the state directory) to this build's schema and says where it is.

use clap::Subcommand;

use super::CommonArgs;
use crate::app::{open_store, state_dir};

#[derive(Subcommand, Debug)]
pub enum StoreCommand {
    /// Apply the schema migrations this wf has (idempotent; also done at
    /// every start). A database newer than this wf is refused.
    Migrate {
        #[command(flatten)]
        common: CommonArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: StoreCommand, log_level: &str) -> anyhow::Result<i32> {
    let StoreCommand::Migrate { common, json } = command;
    let opts = common.start_options(log_level);
    let config = crate::config::LoadedConfig::open(opts.config.as_deref())?;
    let dir = state_dir(&opts, &config);
    if config.config.store.url.is_none() {
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create state dir {}: {e}", dir.display()))?;
    }
    // Opening migrates; then the ledger says what the database has.
    let store = open_store(&config, &dir, None).await?;
    let applied = store.migrations().await?;
    let version = applied.last().map(|m| m.version).unwrap_or(0);
    if json {
        let out = serde_json::json!({
            "backend": store.backend(),
            "location": store.location(),
            "version": version,
            "migrations": applied,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{} store at {}: schema version {version}",
            store.backend(),
            match store.backend() {
                "sqlite" => dir.join("wf.db").display().to_string(),
                _ => store.location(),
            }
        );
        for m in &applied {
            println!("  {:>3}  {}", m.version, m.name);
        }
    }
    Ok(0)
}
