//! `wf check`: validates the config and the plugins without serving.

use serde_json::Value;

use super::CommonArgs;
use crate::app::load_config_and_plugins;
use crate::config::expand_env;

pub fn run(args: CommonArgs, log_level: &str) -> anyhow::Result<i32> {
    let (config, set, _events, _rx) = match load_config_and_plugins(&args.start_options(log_level))
    {
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
    let lookup = |k: &str| std::env::var(k).ok();
    for (name, sc) in &sources {
        if !sc.enabled {
            continue;
        }
        if set.for_kind(&sc.kind).is_none() {
            problems.push(format!(
                "{file}: sources.{name}.kind: no loaded plugin serves kind {:?} (loaded kinds: {})",
                sc.kind,
                set.kinds().join(", ")
            ));
        }
        if let Err(e) = expand_env(
            &Value::Object(sc.settings.clone()),
            &format!("sources.{name}"),
            &lookup,
        ) {
            problems.push(format!("{file}: {e}"));
        }
    }
    if problems.is_empty() {
        println!(
            "ok: {file}: {} configured sources, {} plugins loaded",
            sources.len(),
            set.loaded.len()
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
