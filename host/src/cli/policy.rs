//! `[policy] files` in a running host (loaded once the catalog is known,
//! reloaded with the config and when a policy file is edited), and `wf policy test FILE REQUESTS`: example
//! requests decided by a policy file against the live catalog.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;
use serde_json::Value;

use super::CommonArgs;
use crate::app::App;
use crate::config::LoadedConfig;
use crate::file_watch::{self, Watch};
use crate::pipeline::policy::{CatalogShape, Policies, PromptShape, ToolShape, test_requests};
use crate::pipeline::quota::Quotas;
use crate::projection::Projection;

/// The name policies go by in the pipeline's `authorize` stage.
pub const POLICIES: &str = "policies";

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Decide example requests (a JSON array of {principal, groups?, tool |
    /// kind+name, arguments?, annotations?, client?}) with the policies of
    /// FILE, validated against the catalog of the config's sources; prints
    /// each decision and the policies that decided it. Exits 1 when FILE
    /// does not load.
    Test {
        file: PathBuf,
        requests: PathBuf,
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// What the policy schema needs of the catalog clients are served.
pub fn catalog_shape(proj: &Projection) -> CatalogShape {
    CatalogShape {
        tools: proj
            .tools
            .iter()
            .map(|t| ToolShape {
                name: t.name.clone(),
                source: t.source.clone(),
                input_schema: t.item.input_schema.clone(),
            })
            .collect(),
        prompts: proj
            .prompts
            .iter()
            .map(|p| PromptShape {
                name: p.name.clone(),
                arguments: prompt_arguments(&p.item),
            })
            .collect(),
    }
}

fn prompt_arguments(prompt: &wf_plugin_api::Prompt) -> Vec<(String, bool)> {
    let v = serde_json::to_value(prompt).unwrap_or(Value::Null);
    v.get("arguments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let name = a.get("name")?.as_str()?.to_string();
            let required = a.get("required").and_then(Value::as_bool) == Some(true);
            Some((name, required))
        })
        .collect()
}

/// The policies of `config` against `app`'s catalog now (`None`: no files).
fn load(app: &App, config: &LoadedConfig) -> Result<Option<Policies>, String> {
    let files = &config.config.policy.files;
    if files.is_empty() {
        return Ok(None);
    }
    let base = config.file.as_deref().and_then(|f| f.parent());
    let shape = catalog_shape(&app.projection());
    Policies::load(files, base, &shape)
        .map(Some)
        .map_err(|e| format!("[policy] {e}"))
}

fn apply(app: &App, policies: Option<Policies>) {
    match policies {
        Some(p) => {
            tracing::info!(policies = p.len(), "policies in force");
            app.pipeline.set_authorizer(POLICIES, Arc::new(p));
        }
        None => app.pipeline.remove_authorizer(POLICIES),
    }
}

/// Where `scope = "replicas"` quotas share their budgets: the store, when
/// it is PostgreSQL.
fn grants(app: &App) -> Option<Arc<dyn crate::pipeline::quota::shared::Grants>> {
    app.store
        .shares_budgets()
        .then(|| app.store.clone() as Arc<dyn crate::pipeline::quota::shared::Grants>)
}

/// Puts `[policy] files` in force once first discovery is done (the schema
/// is the live catalog's), and again at every config reload: a reload whose
/// policies do not load is refused as a whole.
pub async fn install(app: &Arc<App>) -> anyhow::Result<()> {
    let quotas = Quotas::from_config(&app.config.config.quotas, grants(app))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    app.pipeline.set_quotas(Some(quotas));
    // Taken before the files are read: an edit from then on is seen.
    let baseline = file_watch::seen(policy_files(&app.config));
    if !app.config.config.policy.files.is_empty() {
        app.projection_ready().await;
        let loaded = load(app, &app.config).map_err(|e| anyhow::anyhow!("{e}"))?;
        apply(app, loaded);
    }
    let weak = Arc::downgrade(app);
    app.live_config.on_reload(Box::new(move |c| {
        let Some(app) = weak.upgrade() else {
            return Ok(Box::new(|| {}));
        };
        let loaded = load(&app, c)?;
        // Changed rules start with fresh budgets.
        let quotas =
            Quotas::from_config(&c.config.quotas, grants(&app)).map_err(|e| e.to_string())?;
        let same = app
            .live_config
            .with(|now| c.config.quotas == now.config.quotas);
        Ok(Box::new(move || {
            apply(&app, loaded);
            if !same {
                app.pipeline.set_quotas(Some(quotas));
            }
        }))
    }));
    if app.config.config.server.watch_config {
        watch(app, baseline, std::time::Duration::from_millis(300));
    }
    Ok(())
}

/// The config's policy files, relative ones from the config's folder.
fn policy_files(config: &LoadedConfig) -> Vec<PathBuf> {
    let base = config.file.as_deref().and_then(|f| f.parent());
    config
        .config
        .policy
        .files
        .iter()
        .map(|f| match base {
            Some(b) if f.is_relative() => b.join(f),
            _ => f.clone(),
        })
        .collect()
}

/// Watches the policy files on their own (the config watcher sees only the
/// config file), on the host's one poll: after an edit that then holds
/// still for `debounce`, they are loaded again against the catalog of that
/// moment. An edit that does not load is logged, and the policies in force
/// stay. A reload that names other files is the config watcher's: the
/// reload hook above loads them.
fn watch(app: &Arc<App>, baseline: file_watch::Seen, debounce: std::time::Duration) {
    let (alive, weak) = (Arc::downgrade(app), Arc::downgrade(app));
    app.file_watch.add(Watch::new(
        Some(baseline),
        debounce,
        move || Some(alive.upgrade()?.live_config.with(policy_files)),
        move || {
            let app = weak.upgrade()?;
            let config = app.live_config.current();
            if config.config.policy.files.is_empty() {
                return None;
            }
            match load(&app, &config) {
                Ok(loaded) => {
                    tracing::info!("a policy file changed; policies reloaded");
                    apply(&app, loaded);
                }
                Err(e) => tracing::warn!(
                    "a policy file changed but does not load; the policies in force stay: {e}"
                ),
            }
            None
        },
    ));
}

pub async fn run(command: PolicyCommand, log_level: &str) -> anyhow::Result<i32> {
    let PolicyCommand::Test {
        file,
        requests,
        common,
    } = command;
    let requests: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&requests)?).map_err(|e| {
            anyhow::anyhow!("{}: not a JSON array of requests: {e}", requests.display())
        })?;
    let app = App::start(&common.start_options(log_level)).await?;
    let proj = app.projection_ready().await;
    let shape = catalog_shape(&proj);
    let policies = match Policies::load(std::slice::from_ref(&file), None, &shape) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("wf policy test: {e}");
            app.shutdown().await;
            return Ok(1);
        }
    };
    // A tool's annotations come from the catalog unless the request gives them.
    let requests: Vec<Value> = requests
        .into_iter()
        .map(|mut r| {
            let tool = r.get("tool").and_then(Value::as_str).map(str::to_string);
            if let Some(t) = tool.and_then(|t| proj.tool(&t)) {
                if r.get("annotations").is_none()
                    && let Some(a) = t.item.extra.get("annotations")
                {
                    r["annotations"] = a.clone();
                }
                r["source"] = Value::String(t.source.clone());
            }
            r
        })
        .collect();
    for d in test_requests(&policies, &requests) {
        println!("{}", serde_json::to_string(&d)?);
    }
    app.shutdown().await;
    Ok(0)
}
