//! OpenAPI sources (issue #33): a GET with a small JSON body through `wf`
//! (the `openapi` plugin) versus the same request made directly with an
//! HTTP client, interleaved in one run; and the discovery time of a
//! 1,000-operation document.
//!
//! The API is an axum server in a wf-bench process of its own
//! (`--openapi-api`) on loopback. Both paths send the same request to it: `GET /items/{id}` answering about 60 bytes of JSON.
//! The wf path is an MCP `tools/call` over stdio to `wf serve`, which makes
//! the request with the plugin's reqwest client.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use rmcp::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::lean::{self, LeanHttp, LeanMcp};
use crate::proc::McpProc;
use crate::stats::{delta_us, percentile, us, verdict};
use crate::{Env, HANDSHAKE_TIMEOUT};

/// Target: wf adds at most this much to the direct request's p50.
const P50_BUDGET_US: f64 = 150.0;
/// Target: a 1,000-operation document is discovered within this.
const DISCOVERY_BUDGET_MS: f64 = 200.0;
const OPERATIONS: usize = 1000;

fn small_document(base: &str) -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "bench", "version": "1"},
        "servers": [{"url": base}],
        "paths": {"/items/{id}": {"get": {
            "operationId": "getItem",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}}}},
        }}},
        "components": {"schemas": {"Item": {"type": "object", "properties": {
            "id": {"type": "integer"}, "name": {"type": "string"}, "price": {"type": "number"},
        }}}},
    })
}

/// 1,000 operations over 100 shared schemas, with query parameters and
/// bodies: closer to a real large API than 1,000 copies of one GET.
fn large_document() -> Value {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for s in 0..100 {
        schemas.insert(
            format!("Thing{s}"),
            json!({"type": "object", "required": ["id"], "properties": {
                "id": {"type": "string"}, "label": {"type": "string", "description": "A label."},
                "tags": {"type": "array", "items": {"type": "string"}},
                "owner": {"$ref": "#/components/schemas/Owner"},
            }}),
        );
    }
    schemas.insert(
        "Owner".into(),
        json!({"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}}}),
    );
    for i in 0..OPERATIONS / 2 {
        let thing = format!("#/components/schemas/Thing{}", i % 100);
        paths.insert(
            format!("/things{i}/{{id}}"),
            json!({
                "get": {"operationId": format!("getThing{i}"), "summary": "Reads a thing.", "tags": [format!("t{}", i % 20)],
                    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
                                   {"name": "fields", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}}],
                    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": thing}}}}}},
                "put": {"operationId": format!("putThing{i}"), "summary": "Replaces a thing.",
                    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": thing}}}},
                    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": thing}}}}}},
            }),
        );
    }
    json!({"openapi": "3.0.3", "info": {"title": "large", "version": "1"}, "paths": paths,
           "components": {"schemas": schemas}})
}

/// `wf-bench --openapi-api`: serves the API until its stdin closes, after
/// printing its base URL. A process of its own, so that the direct path,
/// like wf's, crosses a process boundary to reach it.
pub async fn serve_forever() -> anyhow::Result<()> {
    let base = serve_api().await?;
    println!("{base}");
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while tokio::io::AsyncReadExt::read(&mut stdin, &mut buf).await? > 0 {}
    Ok(())
}

/// Starts `wf-bench --openapi-api` and reads its base URL.
async fn api_process() -> anyhow::Result<(tokio::process::Child, String)> {
    let exe = std::env::current_exe()?;
    let mut child = tokio::process::Command::new(exe)
        .arg("--openapi-api")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start wf-bench --openapi-api")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    let mut reader = tokio::io::BufReader::new(stdout);
    let read = tokio::io::AsyncBufReadExt::read_line(&mut reader, &mut line);
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .context("the API process did not start")??;
    Ok((child, line.trim().to_string()))
}

async fn serve_api() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let document = small_document(&base);
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let document = document.clone();
        async move {
            if uri.path() == "/openapi.json" {
                return axum::Json(document);
            }
            let id: i64 = uri
                .path()
                .rsplit('/')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            axum::Json(json!({"id": id, "name": "widget", "price": 1.5}))
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(base)
}

async fn through_wf(peer: &Peer<RoleClient>, id: i64) -> anyhow::Result<()> {
    let args = json!({"id": id});
    let Value::Object(args) = args else {
        bail!("arguments must be an object")
    };
    let r = peer
        .call_tool(CallToolRequestParams::new("api__getItem").with_arguments(args))
        .await
        .context("calling api__getItem")?;
    if r.is_error == Some(true) || r.structured_content.is_none() {
        bail!("api__getItem failed: {:?}", r.content);
    }
    Ok(())
}

/// The same MCP round trip through wf with no HTTP behind it: wf.std's
/// `passthrough` of a value of the API answer's size.
async fn passthrough(peer: &Peer<RoleClient>) -> anyhow::Result<()> {
    let args = json!({"value": {"id": 1, "name": "widget", "price": 1.5}});
    let Value::Object(args) = args else {
        bail!("arguments must be an object")
    };
    let r = peer
        .call_tool(CallToolRequestParams::new("wf_std__passthrough").with_arguments(args))
        .await
        .context("calling wf_std__passthrough")?;
    if r.is_error == Some(true) {
        bail!("wf_std__passthrough failed: {:?}", r.content);
    }
    Ok(())
}

async fn direct(http: &reqwest::Client, base: &str, id: i64) -> anyhow::Result<()> {
    let response = http.get(format!("{base}/items/{id}")).send().await?;
    let body: Value = serde_json::from_slice(&response.bytes().await?)?;
    if body.get("id").is_none() {
        bail!("unexpected answer {body}");
    }
    Ok(())
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: openapi");
    let (mut api, base) = api_process().await?;
    let large = env.scratch.join("openapi-large.json");
    std::fs::write(&large, serde_json::to_vec(&large_document())?)?;
    let sources = json!({
        "api": {"kind": "openapi", "spec": format!("{base}/openapi.json")},
        "large": {"kind": "openapi", "spec": large, "base_url": base},
    });
    let (cmd, log) = env.wf_command("openapi", sources.clone())?;
    let mut wf = McpProc::start("wf (openapi)", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    // With --compare, the other build serves the same sources and takes its
    // turns in the same rounds.
    let mut other = match &env.compare {
        Some(binary) => {
            let (cmd, log) = env.wf_command_with(binary, "openapi-compare", sources)?;
            Some(
                McpProc::start("wf --compare (openapi)", cmd, Some(&log), HANDSHAKE_TIMEOUT)
                    .await?,
            )
        }
        None => None,
    };
    let result = measure(env, &wf.peer(), other.as_ref().map(McpProc::peer), &base).await;
    wf.stop().await;
    if let Some(o) = other.as_mut() {
        o.stop().await;
    }
    drop(api.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(3), api.wait()).await;
    print(&result?, env.compare.as_deref());
    Ok(())
}

/// Every path's call times, in the order of the tables.
struct Measured {
    direct: Vec<Duration>,
    via_wf: Vec<Duration>,
    passthrough: Vec<Duration>,
    lean_direct: Vec<Duration>,
    lean_wf: Vec<Duration>,
    lean_passthrough: Vec<Duration>,
    compared: Option<(Vec<Duration>, Vec<f64>)>,
    discovery: Vec<f64>,
    rounds: usize,
    batch: usize,
}

async fn measure(
    env: &Env,
    peer: &Peer<RoleClient>,
    other: Option<Peer<RoleClient>>,
    base: &str,
) -> anyhow::Result<Measured> {
    let (warmup, batch, rounds, refreshes) = if env.quick {
        (50, 50, 4, 3)
    } else {
        (300, 200, 20, 10)
    };
    let http = reqwest::Client::new();
    for i in 0..warmup {
        direct(&http, base, i).await?;
        through_wf(peer, i).await?;
        if let Some(o) = &other {
            through_wf(o, i).await?;
        }
    }
    for _ in 0..warmup {
        passthrough(peer).await?;
    }
    // The blocking pair (lean.rs): a second `wf serve` of this build with
    // the same source, driven over raw pipes, against raw HTTP/1.1.
    let mut lean = Some(lean_pair(env, base, warmup)?);
    let mut sides: [Vec<Duration>; 7] = Default::default();
    let mut paths = vec![LEAN_DIRECT, LEAN_WF, LEAN_STD, 0, 1, 2];
    if other.is_some() {
        paths.push(3);
    }
    for round in 0..rounds {
        // The paths take turns, the order rotating and reversing round by
        // round, so drift in the machine's load hits them alike.
        let mut order = paths.clone();
        order.rotate_left(round % paths.len());
        if round % 2 == 1 {
            order.reverse();
        }
        for side in order {
            if side >= LEAN_DIRECT {
                let (mut http, mut mcp) = lean.take().context("the blocking pair")?;
                let (times, back) = tokio::task::spawn_blocking(move || {
                    let mut times = Vec::with_capacity(batch);
                    for i in 0..batch as i64 {
                        let t = Instant::now();
                        let ok = match side {
                            LEAN_DIRECT => lean_direct(&mut http, i),
                            LEAN_WF => lean_through_wf(&mut mcp, i),
                            _ => lean_passthrough(&mut mcp),
                        };
                        if let Err(e) = ok {
                            return (Err(e), (http, mcp));
                        }
                        times.push(t.elapsed());
                    }
                    (Ok(times), (http, mcp))
                })
                .await?;
                lean = Some(back);
                sides[side].extend(times?);
                continue;
            }
            for i in 0..batch as i64 {
                let t = Instant::now();
                match (side, &other) {
                    (0, _) => direct(&http, base, i).await?,
                    (1, _) => through_wf(peer, i).await?,
                    (3, Some(o)) => through_wf(o, i).await?,
                    _ => passthrough(peer).await?,
                }
                sides[side].push(t.elapsed());
            }
        }
    }
    drop(lean);
    let [d, w, std, c, ld, lw, ls] = sides;
    let compared = other.is_some().then_some(c);
    // Discovery as wf measures it (admin refresh_catalog's `discovery_ms`):
    // read the file, parse it, build 1,000 tools and nodes, hand them to the
    // host. With --compare, the two builds take turns.
    let mut discovery = Vec::new();
    let mut discovery_compared = Vec::new();
    for _ in 0..refreshes {
        discovery.push(refresh_large(peer).await?);
        if let Some(o) = &other {
            discovery_compared.push(refresh_large(o).await?);
        }
    }
    let tools = peer.list_all_tools().await?;
    let large = tools
        .iter()
        .filter(|t| t.name.starts_with("large__"))
        .count();
    if large != OPERATIONS {
        bail!("the large document gave {large} tools, not {OPERATIONS}");
    }
    let compared = compared.map(|c| (c, discovery_compared));
    Ok(Measured {
        direct: d,
        via_wf: w,
        passthrough: std,
        lean_direct: ld,
        lean_wf: lw,
        lean_passthrough: ls,
        compared,
        discovery,
        rounds,
        batch,
    })
}

const LEAN_DIRECT: usize = 4;
const LEAN_WF: usize = 5;
const LEAN_STD: usize = 6;

/// The blocking pair, started and warmed up: raw HTTP to the API, and a
/// `wf serve` of this build (the `api` source alone) over raw pipes.
fn lean_pair(env: &Env, base: &str, warmup: i64) -> anyhow::Result<(LeanHttp, LeanMcp)> {
    let sources = json!({"api": {"kind": "openapi", "spec": format!("{base}/openapi.json")}});
    let (cmd, log) = env.wf_command("openapi-lean", sources)?;
    let mut mcp = LeanMcp::start(lean::std_command(&cmd), &log)?;
    mcp.wait_for_tool("api__getItem", HANDSHAKE_TIMEOUT)?;
    let mut http = LeanHttp::connect(base)?;
    for i in 0..warmup {
        lean_direct(&mut http, i)?;
        lean_through_wf(&mut mcp, i)?;
        lean_passthrough(&mut mcp)?;
    }
    Ok((http, mcp))
}

fn lean_direct(http: &mut LeanHttp, id: i64) -> anyhow::Result<()> {
    let body = http.get_json(&format!("/items/{id}"))?;
    if body["id"] != id {
        bail!("unexpected answer {body}");
    }
    Ok(())
}

fn lean_passthrough(mcp: &mut LeanMcp) -> anyhow::Result<()> {
    let value = json!({"id": 1, "name": "widget", "price": 1.5});
    mcp.call_tool("wf_std__passthrough", &json!({"value": value}))?;
    Ok(())
}

fn lean_through_wf(mcp: &mut LeanMcp, id: i64) -> anyhow::Result<()> {
    let result = mcp.call_tool("api__getItem", &json!({"id": id}))?;
    if result["structuredContent"]["id"] != id {
        bail!("unexpected result {result}");
    }
    Ok(())
}

/// One `wf_admin__refresh_catalog` of the large source: its `discovery_ms`.
async fn refresh_large(peer: &Peer<RoleClient>) -> anyhow::Result<f64> {
    let args = json!({"source": "large"});
    let Value::Object(args) = args else {
        bail!("arguments must be an object")
    };
    let r = peer
        .call_tool(CallToolRequestParams::new("wf_admin__refresh_catalog").with_arguments(args))
        .await
        .context("refresh_catalog")?;
    let row = r
        .structured_content
        .as_ref()
        .and_then(|v| v["refreshed"].get(0).cloned())
        .context("refresh_catalog: no row")?;
    if row["state"] != "ready" {
        bail!("the large document did not discover: {row}");
    }
    row["discovery_ms"].as_f64().context("no discovery_ms")
}

/// What a table row says beside its p50 and p99.
enum Col {
    /// The direct path the others are measured against.
    Base,
    /// A path through wf: its p50 added over this direct p50, judged.
    Over(Duration),
    /// A reference path: nothing more.
    Reference,
}

fn row(label: &str, times: &[Duration], col: Col) {
    let p50 = percentile(times, 0.5);
    let (added, judged) = match col {
        Col::Base => ("+0 µs".to_string(), ""),
        Col::Over(direct) => (
            format!("{} µs", delta_us(p50, direct)),
            verdict(us(p50) - us(direct) <= P50_BUDGET_US),
        ),
        Col::Reference => (String::new(), ""),
    };
    println!(
        "| {label} | {:.0} µs | {:.0} µs | {added} | {judged} |",
        us(p50),
        us(percentile(times, 0.99))
    );
}

fn print(m: &Measured, compare: Option<&std::path::Path>) {
    let (rounds, batch) = (m.rounds, m.batch);
    let header = format!(
        "| path | p50 | p99 | p50 added | target: p50 +≤ {P50_BUDGET_US:.0} µs |\n|---|---:|---:|---:|---|"
    );
    let (d50, w50, s50) = (
        percentile(&m.direct, 0.5),
        percentile(&m.via_wf, 0.5),
        percentile(&m.passthrough, 0.5),
    );
    println!("\n## OpenAPI source: a GET through wf versus direct\n");
    println!(
        "Concurrency 1, {rounds} rounds of {batch} requests per path, taking turns. \
         Direct: reqwest to the API. wf: an MCP `tools/call` over stdio to `wf serve`, whose \
         `openapi` source makes the same request.\n"
    );
    println!("{header}");
    row("direct (HTTP client)", &m.direct, Col::Base);
    row(
        "wf (MCP → openapi source → HTTP)",
        &m.via_wf,
        Col::Over(d50),
    );
    if let Some((c, _)) = &m.compared {
        let binary = compare.map(|b| b.display().to_string()).unwrap_or_default();
        row(&format!("wf --compare `{binary}`"), c, Col::Over(d50));
    }
    row(
        "reference: wf.std `passthrough` through wf (the MCP round trip, no HTTP)",
        &m.passthrough,
        Col::Reference,
    );
    println!(
        "\nThe openapi source's own share of the p50 (wf − reference − direct): {:+.0} µs.",
        us(w50) - us(s50) - us(d50)
    );
    println!(
        "\nThe same request with blocking one-thread clients on both sides (bench/src/lean.rs; \
         in the same rounds): raw HTTP/1.1 on a kept-alive socket, against raw MCP JSON-RPC \
         lines on the pipes of a second `wf serve` of this build. Neither client hands \
         anything between tasks or threads of its own, so the difference is what the server \
         side adds.\n"
    );
    println!("{header}");
    row("direct (blocking HTTP/1.1)", &m.lean_direct, Col::Base);
    let ld50 = percentile(&m.lean_direct, 0.5);
    row(
        "wf (blocking MCP over stdio → openapi source → HTTP)",
        &m.lean_wf,
        Col::Over(ld50),
    );
    row(
        "reference: wf.std `passthrough` through wf, blocking client",
        &m.lean_passthrough,
        Col::Reference,
    );
    let discovery = &m.discovery;
    println!(
        "\nDiscovery of a {OPERATIONS}-operation OpenAPI 3.0 document ({} refreshes; wf's own `discovery_ms`).\n",
        discovery.len()
    );
    println!(
        "| document | median | max | target: ≤ {DISCOVERY_BUDGET_MS:.0} ms |\n|---|---:|---:|---|"
    );
    let row = |label: &str, times: &[f64]| {
        let mut sorted = times.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
        let max = sorted.last().copied().unwrap_or(f64::NAN);
        println!(
            "| {label} | {median:.0} ms | {max:.0} ms | {} |",
            verdict(median <= DISCOVERY_BUDGET_MS)
        );
    };
    row(&format!("{OPERATIONS} operations, 101 schemas"), discovery);
    if let Some((_, times)) = &m.compared {
        let binary = compare.map(|b| b.display().to_string()).unwrap_or_default();
        row(&format!("the same, wf --compare `{binary}`"), times);
    }
}
