//! `wf plugins`: what loaded, what was refused and why. Exits 1 when a file
//! (or folder) was refused, unless `--allow-refused`.

use serde_json::json;

use super::PluginsArgs;
use crate::app::load_config_and_plugins;
use crate::plugins::{pins, supported_api_range};

pub async fn run(args: PluginsArgs, log_level: &str) -> anyhow::Result<i32> {
    if !args.pin.is_empty() {
        return pin(&args, log_level);
    }
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
                    "pinned": p.pinned,
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
            "components": set.components,
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
            "  {} {} (api {}) kinds: {}{}  {}",
            m.name,
            m.version,
            m.api_version,
            m.kinds.join(", "),
            if p.pinned { "  pinned" } else { "" },
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
                let l = &d["limits"];
                let together = match l["memory_total_mb"].as_u64() {
                    Some(mb) => format!("{mb} MiB together (memory cgroup)"),
                    None => "NOT bounded together (no memory cgroup)".into(),
                };
                println!(
                    "    limits: memory_mb {}, max_processes {}, cpu_seconds {}, nice {}; memory {together}",
                    l["memory_mb"], l["max_processes"], l["cpu_seconds"], l["nice"]
                );
            }
            None => println!("    isolation: in_process"),
        }
        for w in &p.warnings {
            println!("    warning: {w}");
        }
    }
    if !set.components.is_empty() {
        println!("components ({}):", set.components.len());
        for c in &set.components {
            println!(
                "  {} {}{}  {}",
                c.source_name(),
                c.interface
                    .as_deref()
                    .unwrap_or("(exports no wf:source/guest)"),
                if c.pinned { "  pinned" } else { "" },
                c.file.display()
            );
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

/// `wf plugins --pin FILE…`: loads the plugin folders (the files being
/// pinned without their old pins, so a new build can be pinned again) and
/// records each file's sha256, name and version in plugins.lock.
fn pin(args: &PluginsArgs, log_level: &str) -> anyhow::Result<i32> {
    let mut opts = args.common.start_options(log_level);
    opts.repin = args.pin.clone();
    let (config, set, _events, _rx) = load_config_and_plugins(&opts)?;
    let lock = pins::lock_path(&config.base_dir());
    let mut pins = pins::Pins::load(&lock)?;
    let mut code = 0;
    for file in &args.pin {
        let want =
            std::fs::canonicalize(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let same = |f: &std::path::Path| std::fs::canonicalize(f).is_ok_and(|f| f == want);
        if let Some(p) = set.loaded.iter().find(|p| same(&p.file)) {
            let sha = pins::sha256_file(&want)?;
            let pin = pins.pin(&want, &p.manifest.name, &p.manifest.version, sha);
            println!(
                "pinned {} {} sha256:{} {}",
                pin.name,
                pin.version,
                pin.sha256,
                pin.file.display()
            );
        } else if let Some(c) = set.components.iter().find(|c| same(&c.file)) {
            // A component: named for its file, versioned by its WIT interface.
            let sha = pins::sha256_file(&want)?;
            let version = c
                .interface
                .as_deref()
                .and_then(|i| i.rsplit_once('@'))
                .map_or("", |(_, v)| v);
            let pin = pins.pin(&want, &c.source_name(), version, sha);
            println!(
                "pinned component {} sha256:{} {}",
                pin.name,
                pin.sha256,
                pin.file.display()
            );
        } else if let Some(r) = set.refused.iter().find(|r| same(&r.file)) {
            eprintln!(
                "wf plugins --pin: {}: not pinned, it does not load: {}",
                file.display(),
                r.reason
            );
            code = 1;
        } else {
            eprintln!(
                "wf plugins --pin: {}: not pinned, it is in no plugin folder ({}); pass its folder with --plugins DIR",
                file.display(),
                set.dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            code = 1;
        }
    }
    pins.save(&lock)?;
    println!("wrote {}", lock.display());
    Ok(code)
}
