//! `wf tools pin|diff|approve` (issue 54): the tool pins for a person at a
//! terminal. Each discovers the sources once (as `wf check --deep` does, in
//! a throwaway state directory) and compares with `tools.lock` beside the
//! config; a running `wf serve` watches that file and applies it at once.

use std::sync::Arc;
use std::time::Duration;

use clap::Subcommand;

use super::CommonArgs;
use crate::app::load_config_and_plugins;
use crate::sources::tool_pins::{ToolLock, actions};
use crate::sources::{Sources, desired_sources};

#[derive(Subcommand, Debug)]
pub enum ToolsCommand {
    /// Record the definitions every source (or each SOURCE) serves now in
    /// tools.lock beside the config: from then on a change is held until approved.
    Pin {
        sources: Vec<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Show, per pinned tool, what changed since its pin: the description's
    /// line diff and every other field that differs. Exits 1 when something changed.
    Diff {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Accept changes: NAME is `source.tool`, or a source for all of its changes.
    Approve {
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
}

pub async fn run(command: ToolsCommand, log_level: &str) -> anyhow::Result<i32> {
    let common = match &command {
        ToolsCommand::Pin { common, .. }
        | ToolsCommand::Diff { common, .. }
        | ToolsCommand::Approve { common, .. } => common.clone(),
    };
    let (config, plugins, _events, _rx) =
        load_config_and_plugins(&common.start_options(log_level))?;
    let path = ToolLock::path_for(config.file.as_deref())?;
    let desired: std::collections::BTreeMap<_, _> = desired_sources(config.sources()?, &plugins)
        .into_iter()
        .filter(|(_, sc)| sc.enabled)
        .collect();
    let scratch = tempfile::tempdir()?;
    let sources = Arc::new(Sources::new(None));
    sources.apply(desired, &config, &plugins, scratch.path());
    let timeout = Duration::from_millis(config.config.server.discovery_timeout_ms);
    sources.discover_all(sources.list(), timeout).await;
    let mut failed = 0;
    for e in sources.list() {
        let st = e.status();
        if let Some(err) = &st.error {
            eprintln!("wf tools: source {}: {err}", e.name);
            failed += 1;
        }
    }
    let catalogs = sources.unheld_catalogs();
    sources.shutdown(Duration::from_secs(5)).await;
    let code = match command {
        ToolsCommand::Pin { sources: only, .. } => {
            for (s, n) in actions::pin(&path, &catalogs, &only)? {
                println!("pinned {s}: {n} tools");
            }
            println!("wrote {}", path.display());
            0
        }
        ToolsCommand::Diff { json, .. } => {
            let diffs = actions::diff(&path, &catalogs)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&diffs)?);
            } else if diffs.is_empty() {
                println!("no changes since the pins");
            } else {
                print!("{}", actions::render(&diffs));
            }
            i32::from(!diffs.is_empty())
        }
        ToolsCommand::Approve { names, .. } => {
            for r in actions::approve(&path, &catalogs, &names)? {
                println!("approved {r}");
            }
            0
        }
    };
    // A source that could not be discovered was neither pinned nor compared.
    Ok(if failed > 0 { 1 } else { code })
}
