//! `wf plugins`: what loaded, what was refused and why. Exits 1 when a file
//! (or folder) was refused, unless `--allow-refused`.

use serde_json::json;

use super::PluginsArgs;
use crate::app::load_config_and_plugins;
use crate::plugins::supported_api_range;

pub async fn run(args: PluginsArgs, log_level: &str) -> anyhow::Result<i32> {
    let (config, set, _events, _rx) =
        load_config_and_plugins(&args.common.start_options(log_level))?;
    // What each plugin's default sources offer that would be left out.
    let trials = super::check::default_source_trials(&config, &set).await?;
    let code = if set.refused.is_empty() || args.allow_refused {
        0
    } else {
        1
    };
    if args.json {
        let loaded: Vec<_> = set
            .loaded
            .iter()
            .map(|p| {
                json!({
                    "name": p.manifest.name,
                    "version": p.manifest.version,
                    "api_version": p.manifest.api_version,
                    "file": p.file,
                    "kinds": p.manifest.kinds,
                    "description": p.manifest.description,
                    "warnings": p.warnings,
                    "isolation": p.isolation,
                    "process": p.child.as_deref().map(crate::plugins::process::describe),
                })
            })
            .collect();
        let out = json!({
            "host_api": wf_plugin_api::API_VERSION,
            "supported_api": supported_api_range(),
            "dirs": set.dirs,
            "loaded": loaded,
            "refused": set.refused,
            "left_out": super::check::left_out_json(&trials),
            "notes": set.notes,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(code);
    }
    println!(
        "wf {} · plugin api {} (loads plugins built against {})",
        env!("CARGO_PKG_VERSION"),
        wf_plugin_api::API_VERSION,
        supported_api_range()
    );
    println!("plugin folders:");
    for d in &set.dirs {
        println!("  {}", d.display());
    }
    println!("loaded ({}):", set.loaded.len());
    for p in &set.loaded {
        let m = &p.manifest;
        println!(
            "  {} {} (api {}) kinds: {}  {}",
            m.name,
            m.version,
            m.api_version,
            m.kinds.join(", "),
            p.file.display()
        );
        match &p.child {
            Some(sup) => {
                let d = crate::plugins::process::describe(sup);
                println!(
                    "    isolation: process (pid {}, restarts {}, {})",
                    d["pid"],
                    d["restarts"],
                    d["state"].as_str().unwrap_or("")
                );
            }
            None => println!("    isolation: in_process"),
        }
        for w in &p.warnings {
            println!("    warning: {w}");
        }
    }
    if !set.refused.is_empty() {
        println!("refused ({}):", set.refused.len());
        for r in &set.refused {
            println!("  {}: {}", r.file.display(), r.reason);
        }
    }
    super::check::print_left_out(&trials);
    if !set.notes.is_empty() {
        println!("notes:");
        for n in &set.notes {
            println!("  {}: {}", n.path.display(), n.note);
        }
    }
    if code != 0 {
        eprintln!(
            "wf plugins: {} refused (exit 1; --allow-refused exits 0)",
            set.refused.len()
        );
    }
    Ok(code)
}
