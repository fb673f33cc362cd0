//! `wf run FILE` and `wf runs`.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{RunArgs, RunsArgs};
use crate::app::{App, state_dir};
use crate::store::{NodeStatus, RunStatus};
use crate::workflow::engine::{OnEvent, StartError};
use crate::workflow::{Engine, RunOrigin, Workflow};

/// `key=value`: the value as JSON when it parses, else as a string.
fn parse_input(kv: &str) -> anyhow::Result<(String, Value)> {
    let (k, v) = kv
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("--input {kv:?}: expected key=value"))?;
    let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
    Ok((k.to_string(), value))
}

pub async fn run(args: RunArgs, log_level: &str) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", args.file.display()))?;
    let wf =
        Workflow::from_value(&doc).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let mut inputs = serde_json::Map::new();
    for kv in &args.input {
        let (k, v) = parse_input(kv)?;
        inputs.insert(k, v);
    }

    let app = App::start(&args.common.start_options(log_level)).await?;
    let engine = Engine::new(app.node_sources(), app.store.clone());
    // Live progress: one line per node state change, on stderr.
    let progress: OnEvent = Arc::new(|e| {
        let mark = match e.status {
            NodeStatus::Running => "…",
            NodeStatus::Succeeded => "✓",
            NodeStatus::Skipped => "-",
            _ => "✗",
        };
        let time = if e.status == NodeStatus::Running {
            String::new()
        } else {
            format!(" {} ms", e.elapsed_ms)
        };
        let err = e
            .error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        eprintln!(
            "{mark} {:<20} {:<32} {}{time}{err}",
            e.node_id, e.capability, e.status
        );
    });
    let origin = RunOrigin::File {
        path: args.file.display().to_string(),
    };
    let result = engine
        .start(
            wf,
            Value::Object(inputs),
            origin,
            crate::server::Principal::LOCAL,
            Some(progress),
        )
        .await;
    let code = match result {
        Err(StartError::Invalid(problems)) => {
            for p in &problems {
                eprintln!(
                    "{}: {} [{}]: {}",
                    args.file.display(),
                    p.path,
                    p.kind,
                    p.message
                );
            }
            eprintln!(
                "wf run: the workflow has {} problem(s); nothing ran",
                problems.len()
            );
            2
        }
        Err(e) => {
            eprintln!("wf run: {e}");
            2
        }
        Ok(run_id) => {
            eprintln!("run {run_id}");
            let (run, _) = engine.wait(&run_id, Duration::from_secs(24 * 3600)).await?;
            let out = serde_json::json!({"run_id": run.id, "status": run.status, "outputs": run.outputs, "error": run.error});
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", serde_json::to_string_pretty(&out)?)?;
            if run.status == RunStatus::Succeeded {
                0
            } else {
                1
            }
        }
    };
    app.shutdown().await;
    Ok(code)
}

pub async fn runs(args: RunsArgs, log_level: &str) -> anyhow::Result<i32> {
    let opts = args.common.start_options(log_level);
    let config = crate::config::LoadedConfig::open(opts.config.as_deref())?;
    let dir = state_dir(&opts, &config);
    // `[store] url`: the runs of every replica.
    let store = crate::app::open_store(&config, &dir, None).await?;
    let runs = store.runs(args.limit, args.status).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(0);
    }
    println!(
        "{:<28} {:<12} {:<24} {:<12} {:>10}  error",
        "run", "status", "workflow", "principal", "ms"
    );
    for r in runs {
        let ms = r
            .finished_at
            .map(|f| (f - r.started_at).to_string())
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<28} {:<12} {:<24} {:<12} {:>10}  {}",
            r.id,
            r.status,
            r.workflow,
            r.principal.as_deref().unwrap_or("-"),
            ms,
            r.error.unwrap_or_default()
        );
    }
    Ok(0)
}
