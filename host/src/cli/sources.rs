//! `wf sources` and `wf source add|update|remove|enable|disable`: the admin
//! surface's source operations for a person at a terminal. Edits are written
//! to the config file (comments kept); a running `wf serve` applies them.

use serde_json::{Map, Value, json};

use super::{CommonArgs, SourceCommand, SourceTableArgs, SourcesArgs};
use crate::app::load_config_and_plugins;
use crate::config::{Edit, LoadedConfig};
use crate::sources::desired_sources;

pub fn list(args: SourcesArgs, log_level: &str) -> anyhow::Result<i32> {
    let (config, plugins, _events, _rx) =
        load_config_and_plugins(&args.common.start_options(log_level))?;
    let configured = config.sources()?;
    let names: Vec<String> = configured.keys().cloned().collect();
    let all = desired_sources(configured, &plugins);
    let rows: Vec<Value> = all
        .iter()
        .map(|(name, sc)| {
            let plugin = plugins.for_kind(&sc.kind).map(|p| p.manifest.name.clone());
            let problem = plugin.is_none().then(|| format!("no loaded plugin serves kind {:?}", sc.kind));
            // Setting names only: values may be secrets.
            let keys: Vec<&String> = sc.settings.keys().collect();
            // Open sessions live in a running `wf serve`: see the admin tool list_sources.
            let session = json!({"scope": sc.session, "idle_ms": sc.session_idle_ms, "max_sessions": sc.max_sessions});
            json!({"name": name, "kind": sc.kind, "enabled": sc.enabled, "plugin": plugin, "default": !names.contains(name), "settings": keys, "session": session, "problem": problem})
        })
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    println!(
        "{:<24} {:<8} {:<8} {:<18} settings",
        "source", "kind", "enabled", "plugin"
    );
    for r in &rows {
        let plugin = r["plugin"].as_str().unwrap_or("-");
        let settings: Vec<&str> = r["settings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let note = r["problem"]
            .as_str()
            .map(|p| format!("  ! {p}"))
            .unwrap_or_default();
        println!(
            "{:<24} {:<8} {:<8} {:<18} {}{note}",
            r["name"].as_str().unwrap_or(""),
            r["kind"].as_str().unwrap_or(""),
            r["enabled"].to_string(),
            plugin,
            settings.join(", ")
        );
    }
    Ok(0)
}

fn table(args: &SourceTableArgs) -> anyhow::Result<Map<String, Value>> {
    let mut t = match args.json.as_deref() {
        Some(text) => match serde_json::from_str(text)? {
            Value::Object(m) => m,
            _ => anyhow::bail!("--json must be a JSON object"),
        },
        None => Map::new(),
    };
    for kv in &args.set {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set {kv:?}: expected key=value"))?;
        t.insert(
            k.into(),
            serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.into())),
        );
    }
    if let Some(k) = &args.kind {
        t.insert("kind".into(), Value::String(k.clone()));
    }
    Ok(t)
}

pub fn edit(cmd: SourceCommand, common: &CommonArgs) -> anyhow::Result<i32> {
    let Some(path) = &common.config else {
        anyhow::bail!("--config FILE is required: the edit is written to the config file");
    };
    let config = LoadedConfig::load(path)?;
    let edit = match cmd {
        SourceCommand::Add { name, table: t, .. } => Edit::Add {
            name,
            table: table(&t)?,
        },
        SourceCommand::Update { name, table: t, .. } => Edit::Update {
            name,
            table: table(&t)?,
        },
        SourceCommand::Remove { name, .. } => Edit::Remove { name },
        SourceCommand::Enable { name, .. } => Edit::SetEnabled {
            name,
            enabled: true,
        },
        SourceCommand::Disable { name, .. } => Edit::SetEnabled {
            name,
            enabled: false,
        },
    };
    match config.stage(&edit) {
        Ok(()) => {
            println!(
                "{}: updated; a running `wf serve` applies it on its next reload (it watches the file)",
                config.file_label()
            );
            Ok(0)
        }
        Err(e) => {
            eprintln!("wf source: {e}");
            Ok(1)
        }
    }
}
