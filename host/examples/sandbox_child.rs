//! The test child of host/tests/sandbox.rs: enters the plugin sandbox the
//! way a process-mode plugin child does (stage one before loading the
//! library, stage two on its manifest), loads one plugin with wf's loader,
//! calls one tool of its default source and prints one JSON line:
//! `{"report": "...", "warnings": [...], "result": <structured content>}`.
//!
//!   sandbox_child MODE PLUGIN DATA_DIR TOOL ARGS_JSON
//!
//! MODE: `strict`, `off`, or `strict-programs` (strict, as for a plugin whose
//! manifest declares `starts_programs`, whatever the plugin's says).
//! SANDBOX_THREAD_FIRST (optional): starts a thread before the sandbox, which
//! must then refuse to enter (exit 3, `{"error": …}`).
//! SANDBOX_PROGRAM (optional): a source's `command args…`, whose files
//! the policy lets the plugin read and run (`sandbox::program_paths`).

use std::path::PathBuf;

use abi_stable::std_types::RString;
use wf_host::plugins::sandbox::{self, Policy, Report, Sandbox};
use wf_host::plugins::{HostEvents, LoadPolicy, load_file};
use wf_host::sources::{CallCtx, SourceHandle};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: sandbox_child MODE PLUGIN DATA_DIR TOOL ARGS_JSON");
        std::process::exit(2);
    }
    let (mode, plugin, data_dir, tool) = (&args[1], PathBuf::from(&args[2]), &args[3], &args[4]);
    let arguments: serde_json::Value = serde_json::from_str(&args[5]).expect("ARGS_JSON is JSON");
    let programs = mode == "strict-programs";
    let mode: Sandbox = if programs {
        Sandbox::Strict
    } else {
        mode.parse().expect("MODE")
    };
    let mut policy = Policy::new(&plugin, mode)
        .data_dir(data_dir)
        .starts_programs(programs);
    // SANDBOX_PROGRAM="command arg…": what a source of the plugin starts
    // (process mode passes its sources' commands the same way).
    if let Ok(line) = std::env::var("SANDBOX_PROGRAM") {
        let mut words = line.split_whitespace().map(str::to_string);
        let command = words.next().unwrap_or_default();
        let args: Vec<String> = words.collect();
        let cwd = std::env::current_dir().expect("cwd");
        let path = std::env::var_os("PATH");
        policy.programs = sandbox::program_paths(&command, &args, &cwd, path.as_deref());
    }

    // SANDBOX_THREAD_FIRST: start a thread first, as a child must not.
    if std::env::var_os("SANDBOX_THREAD_FIRST").is_some() {
        std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(60)));
    }
    // Before any thread exists: every later one inherits the sandbox.
    let mut report = match sandbox::before_load(&policy) {
        Ok(r) => r,
        Err(e) => {
            println!("{}", serde_json::json!({"error": e.to_string()}));
            std::process::exit(3);
        }
    };
    eprintln!("stage one: {report}");
    let stage_two = std::cell::RefCell::new(Report::default());
    let check = |m: &wf_plugin_api::Manifest| {
        let mut m = m.clone();
        m.starts_programs |= programs;
        *stage_two.borrow_mut() =
            sandbox::after_manifest(&policy, &m).map_err(|e| e.to_string())?;
        Ok(())
    };
    let (events, _rx) = HostEvents::channel();
    let loaded = load_file(&plugin, &events, "warn", LoadPolicy::default(), &check)
        .unwrap_or_else(|why| panic!("{}: {why}", plugin.display()));
    // Stage two's report is the whole sandbox's (it narrows stage one).
    report = stage_two.take();

    let source = loaded.manifest.default_sources[0].clone();
    let spec = wf_plugin_api::SourceSpec {
        name: source.name.clone(),
        kind: source.kind.clone(),
        config: serde_json::json!({}),
        data_dir: PathBuf::from(data_dir),
    };
    let obj = loaded
        .plugin
        .create_source(RString::from(serde_json::to_string(&spec).expect("spec")))
        .into_result()
        .unwrap_or_else(|e| panic!("create_source: {e}"));
    let handle = SourceHandle::new(source.name, source.kind, loaded.manifest.name.clone(), obj);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let result = rt
        .block_on(handle.call_tool(tool, arguments, CallCtx::new()))
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let line = serde_json::json!({
        "report": report.to_string(),
        "warnings": report.warnings,
        "result": result.structured_content,
    });
    println!("{line}");
}
