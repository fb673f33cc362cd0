//! `wf check`: validates the config and the plugins without serving. Every
//! problem is one `file: key: reason` line on stderr; any problem exits 1.
//!
//! Always: the config, the plugin files, each source's kind and `${VAR}`s,
//! and a trial of the plugins' default sources (what a plugin serves with no
//! config), whose bad capabilities are named. `--deep` also tries every
//! configured source: created in a throwaway state directory and discovered
//! once, bounded by `server.discovery_timeout_ms`, so plugin config errors,
//! missing commands, unreachable URLs and invalid catalogs show up here
//! instead of at serve time. `--call` (implies `--deep`) also calls each
//! tool of each `wasm` source once (check_calls.rs): traps, limits hit and
//! results that depart from their output schema are problems.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::CheckArgs;
use super::check_calls::{CALLED_KIND, Called, call_tools};
use crate::app::load_config_and_plugins;
use crate::catalog::probe::{Trial, missing_command, trial, trial_catalogs_then};
use crate::config::{LoadedConfig, SourceConfig};
use crate::plugins::PluginSet;
use crate::sources::desired_sources;

pub async fn run(mut args: CheckArgs, log_level: &str) -> anyhow::Result<i32> {
    args.deep |= args.call;
    let (config, set, _events, _rx) =
        match load_config_and_plugins(&args.common.start_options(log_level)) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("wf check: {e:#}");
                return Ok(1);
            }
        };
    let mut problems = Vec::new();
    let sources = match config.sources() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("wf check: {e}");
            return Ok(1);
        }
    };
    for r in &set.refused {
        problems.push(format!(
            "{}: refused plugin: {}",
            r.file.display(),
            r.reason
        ));
    }
    let file = config.file_label();
    // The sources worth a trial: enabled, with a plugin, settings expanded.
    let mut to_try = BTreeMap::new();
    for (name, sc) in desired_sources(sources.clone(), &set) {
        let (origin, key) = origin(&config, &set, &sources, &name, &sc);
        if !sc.enabled {
            continue;
        }
        let Some(plugin) = set.for_kind(&sc.kind) else {
            problems.push(format!(
                "{origin}: {key}.kind: no loaded plugin serves kind {:?} (loaded kinds: {})",
                sc.kind,
                set.kinds().join(", ")
            ));
            continue;
        };
        let settings = match crate::sources::settings::effective(&sc, &key, &plugin.manifest) {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("{origin}: {e}"));
                continue;
            }
        };
        let configured = sources.contains_key(&name);
        if !configured || args.deep {
            if let Some(why) = missing_command(&settings, &config.base_dir()) {
                problems.push(format!("{origin}: {key}.command: {why}"));
                continue;
            }
            to_try.insert(name, sc);
        }
    }
    let timeout = Duration::from_millis(config.config.server.discovery_timeout_ms);
    // With --call: the sandboxed sources whose tools are called (each call
    // bounded like a discovery).
    let called_sources: Vec<String> = to_try
        .iter()
        .filter(|(_, sc)| args.call && sc.kind == CALLED_KIND)
        .map(|(name, _)| name.clone())
        .collect();
    let (tried, snapshot, called) =
        trial_catalogs_then(to_try.clone(), &config, &set, timeout, async |sources| {
            call_tools(sources, &called_sources, timeout).await
        })
        .await?;
    for t in &tried {
        let Some(sc) = to_try.get(&t.source) else {
            continue;
        };
        let (origin, key) = origin(&config, &set, &sources, &t.source, sc);
        problems.extend(trial_problems(t, &origin, &key, sc));
        let of_source = called.iter().filter(|c| c.source == t.source);
        problems
            .extend(of_source.filter_map(|c| Some(format!("{origin}: {key}: {}", c.problem()?))));
    }
    if args.call {
        print_called(&called, to_try.len() - called_sources.len());
    }
    problems.extend(oauth_problems(&config).await);
    problems.extend(catalog_problems(&config));
    problems.extend(endpoint_problems(&config, &snapshot, args.deep));
    // Warnings never fail the check: each is a choice an operator may make.
    for w in crate::config::sizing::warnings(&config.config.server) {
        eprintln!("{file}: {}: warning: {}", w.key, w.message);
    }
    // A `[plugins.<name>]` table is keyed by a manifest name: one that names
    // no loaded plugin is most likely a typo (it may also be a plugin not
    // installed yet).
    for name in config.config.plugins.plugin.keys() {
        if !set.loaded.iter().any(|p| &p.manifest.name == name) {
            let loaded: Vec<&str> = set
                .loaded
                .iter()
                .map(|p| p.manifest.name.as_str())
                .collect();
            let hint = crate::config::did_you_mean(name, loaded.iter().copied())
                .map(|n| format!(" (did you mean {n:?}?)"))
                .unwrap_or_default();
            eprintln!(
                "{file}: plugins.{name}: warning: no loaded plugin is named {name:?}{hint}; loaded: {}",
                loaded.join(", ")
            );
        }
    }
    if problems.is_empty() {
        println!(
            "ok: {file}: {} configured sources, {} plugins loaded, {} sources tried{}",
            sources.len(),
            set.loaded.len(),
            tried.len(),
            if args.deep {
                ""
            } else {
                " (--deep tries every source)"
            }
        );
        Ok(0)
    } else {
        for p in &problems {
            eprintln!("{p}");
        }
        eprintln!("wf check: {} problem(s)", problems.len());
        Ok(1)
    }
}

/// One stdout line per called source: how its tools answered.
fn print_called(called: &[Called], not_called: usize) {
    let mut by_source: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for c in called {
        let n = by_source.entry(c.source.as_str()).or_default();
        match (&c.outcome, c.problem()) {
            (_, Some(_)) => n.2 += 1,
            (super::check_calls::Outcome::ToolError(_), None) => n.1 += 1,
            _ => n.0 += 1,
        }
    }
    for (source, (ok, refused, bad)) in by_source {
        println!(
            "called: {source}: {} tools: {ok} answered, {refused} failed in their own words, {bad} with a problem",
            ok + refused + bad
        );
    }
    if not_called > 0 {
        println!(
            "called: {not_called} other source(s) not called: only {CALLED_KIND} sources are (sandboxed)"
        );
    }
}

/// `[endpoints.NAME]` over the tried sources' catalogs (every source with
/// `--deep`): an endpoint that selects nothing, a transform whose tool does
/// not exist or lacks an argument it fixes, an alias that collides.
fn endpoint_problems(
    config: &LoadedConfig,
    snapshot: &crate::catalog::Snapshot,
    deep: bool,
) -> Vec<String> {
    if config.config.endpoints.is_empty() {
        return Vec::new();
    }
    let file = config.file_label();
    if !deep {
        eprintln!("{file}: endpoints: checked against the sources' tools with --deep");
        return Vec::new();
    }
    let endpoints = match crate::surfaces::endpoints::compile(&config.config) {
        Ok(e) => e,
        Err(e) => return vec![format!("{file}: {e}")],
    };
    let rules = crate::projection::NameRules {
        max_len: config.config.server.max_name_len,
    };
    let naming = crate::projection::Naming::from_config(config);
    let proj = std::sync::Arc::new(crate::projection::Projection::build_with(
        snapshot, rules, &naming,
    ));
    let mut out = Vec::new();
    for (name, e) in endpoints.iter() {
        for f in crate::surfaces::endpoints::findings(e, &proj) {
            out.push(format!("{file}: endpoints.{name}: {f}"));
        }
    }
    out
}

/// `[server.catalog]`: its settings and the semantic ranker's, read as
/// `wf serve` reads them (the endpoint is not called).
fn catalog_problems(config: &LoadedConfig) -> Vec<String> {
    let file = config.file_label();
    let server = &config.config.server;
    let mut problems = Vec::new();
    if let Err(e) = crate::server::mcp::catalog_view::CatalogView::from_config(server) {
        problems.push(format!("{file}: {e}"));
    }
    if let Some(e) = &server.catalog.embeddings
        && let Err(e) = crate::catalog::embed::Embedder::new(e)
    {
        problems.push(format!("{file}: server.catalog.{e}"));
    }
    problems
}

/// `[server.oauth]`: the settings, the groups' globs, and the issuer's
/// metadata and keys, fetched as `wf serve` would.
async fn oauth_problems(config: &LoadedConfig) -> Vec<String> {
    let file = config.file_label();
    let server = &config.config.server;
    let mut problems = Vec::new();
    if let Err(e) = crate::server::identity::principals::AccessRules::from_config(server) {
        problems.push(format!("{file}: {e}"));
    }
    let Some(oauth) = &server.oauth else {
        return problems;
    };
    let v = match crate::server::identity::oauth::OAuthVerifier::new(oauth) {
        Ok(v) => v,
        Err(e) => {
            problems.push(format!("{file}: {e}"));
            return problems;
        }
    };
    match v.fetch_keys().await {
        Ok(0) => problems.push(format!(
            "{file}: server.oauth.issuer: {}: its JWKS has no signing key wf can use",
            v.issuer()
        )),
        Ok(n) => println!(
            "oauth: {}: metadata and {n} signing key(s) fetched; resource metadata at {}",
            v.issuer(),
            v.metadata_url()
        ),
        Err(e) => problems.push(format!("{file}: server.oauth.issuer: {e}")),
    }
    problems
}

/// The lines a trial adds: why the source failed, and each capability left out.
fn trial_problems(t: &Trial, origin: &str, key: &str, sc: &SourceConfig) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = &t.error {
        // An upstream that cannot be reached is a matter of its `url`.
        let at = if sc.settings.contains_key("url") && !e.starts_with("could not be created") {
            format!("{key}.url")
        } else {
            key.to_string()
        };
        out.push(format!("{origin}: {at}: {e}"));
    }
    for r in &t.rejected {
        out.push(format!("{origin}: {key}: {r}"));
    }
    out
}

/// Where a source comes from, for `file: key:` prefixes: the config file and
/// `sources.<name>` (or `mcpServers.<name>`), or, for a plugin's default
/// source, the plugin's file and `default source <name>`.
fn origin(
    config: &LoadedConfig,
    plugins: &PluginSet,
    configured: &BTreeMap<String, SourceConfig>,
    name: &str,
    sc: &SourceConfig,
) -> (String, String) {
    if configured.contains_key(name) {
        let table = if config.config.mcp_servers.contains_key(name) {
            "mcpServers"
        } else {
            "sources"
        };
        return (config.file_label(), format!("{table}.{name}"));
    }
    let file = plugins
        .for_kind(&sc.kind)
        .map(|p| p.file.display().to_string())
        .unwrap_or_else(|| config.file_label());
    (file, format!("default source {name}"))
}

/// The trials of the loaded plugins' default sources (those the config does
/// not name), for `wf plugins`: what each plugin serves with no config.
pub async fn default_source_trials(
    config: &LoadedConfig,
    plugins: &PluginSet,
) -> anyhow::Result<Vec<Trial>> {
    let configured = config.sources()?;
    let defaults: BTreeMap<_, _> = desired_sources(configured.clone(), plugins)
        .into_iter()
        .filter(|(name, sc)| !configured.contains_key(name) && sc.enabled)
        .collect();
    let timeout = Duration::from_millis(config.config.server.discovery_timeout_ms);
    Ok(trial(defaults, config, plugins, timeout).await?)
}

/// For `wf plugins --json`: per default source, its capabilities left out.
pub fn left_out_json(trials: &[Trial]) -> Value {
    trials
        .iter()
        .filter(|t| !t.rejected.is_empty())
        .map(|t| serde_json::json!({"source": t.source, "capabilities": t.rejected}))
        .collect()
}

/// For `wf plugins`: the capabilities of default sources left out, and why.
pub fn print_left_out(trials: &[Trial]) {
    let n: usize = trials.iter().map(|t| t.rejected.len()).sum();
    if n == 0 {
        return;
    }
    println!("capabilities left out ({n}):");
    for t in trials {
        for r in &t.rejected {
            println!("  {}: {r}", t.source);
        }
    }
}
