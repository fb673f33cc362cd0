//! `wf-bench`: how much `wf` costs in front of an MCP upstream.
//!
//! - overhead: echo round trips through `wf` versus the same rmcp client
//!   straight to the same upstream, interleaved in one run (p50/p99 at
//!   concurrency 1, calls per second at concurrency 16);
//! - start-up: time until a complete tools/list with 10 upstream sources,
//!   against the slowest single upstream's own start; and with one real npm
//!   server (server-everything, server-filesystem, @playwright/mcp), fresh
//!   and warm state directory, against its own start;
//! - memory: the host's resident memory with 10 upstream sources connected;
//! - engine: workflow engine overhead per node and a wide fan-out;
//! - sessions: 50 HTTP clients with `session = "client"`: session open time
//!   against the upstream's own start, calls/s, wf's memory per session;
//! - openapi: a GET through an `openapi` source versus the same request
//!   made directly, and discovery of a 1,000-operation document;
//! - retrieval: recall@5 and MRR of `wf_find` over 500+ real tool
//!   definitions, tools/list bytes in `full` against `search` mode, and
//!   query latency over 5,000 tools;
//! - oauth: identifying a request by an OAuth JWT against a warm JWKS,
//!   against a static token (and that no JWKS fetch is on the request path);
//! - openapi-docs (only with `--only openapi-docs`): GitHub's and Microsoft
//!   Graph's OpenAPI documents served whole: discovery time, RSS, tools/list
//!   bytes (bench/fetch_openapi_docs.sh fetches Graph's);
//! - wasm: a WebAssembly component's trivial tool against a native one (warm
//!   call, cold start with the compiled-code cache off and on), and the
//!   memory per instance.
//!
//! Prints markdown tables on stdout, progress on stderr; `--record FILE`
//! appends their figures to FILE as JSON lines. See docs/benchmarks.md.

mod audit;
mod endpoints;
mod engine;
mod fencing;
mod front;
mod lean;
mod load;
mod mcp_proxy;
mod memory;
mod oauth;
mod openapi;
mod openapi_docs;
mod otlp_sink;
mod overhead;
mod peers;
mod policy;
mod proc;
mod record;
mod relay;
mod retrieval;
mod sessions;
mod slow;
mod startup;
mod startup_npm;
mod stats;
mod wasm;
mod web;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use serde_json::{Value, json};
use tokio::process::Command;

#[derive(Parser, Debug)]
#[command(
    name = "wf-bench",
    about = "Benchmarks wf against its upstreams and prints markdown tables"
)]
struct Args {
    /// A short smoke run (well under a minute); the numbers are only indicative.
    #[arg(long)]
    quick: bool,
    /// The `wf` binary (default: next to wf-bench; its plugins must sit beside it).
    #[arg(long, value_name = "PATH")]
    wf: Option<PathBuf>,
    /// The Rust upstream fixture (default: wf-fixture-upstream next to wf-bench).
    #[arg(long, value_name = "PATH")]
    fixture: Option<PathBuf>,
    /// `mcp-server-everything` (default: tests/e2e/node_modules/.bin/mcp-server-everything;
    /// skipped with a note when missing).
    #[arg(long, value_name = "PATH")]
    everything: Option<PathBuf>,
    /// Where the other npm servers' bins are (server-filesystem, @playwright/mcp;
    /// default: tests/e2e/node_modules/.bin); a missing one's row is skipped.
    #[arg(long, value_name = "DIR")]
    npm_bin: Option<PathBuf>,
    /// The Chromium @playwright/mcp drives (default: /usr/bin/chromium, Debian's).
    #[arg(long, value_name = "PATH", default_value = "/usr/bin/chromium")]
    chromium: PathBuf,
    /// Another `wf` build measured in the same overhead rounds, as an extra
    /// reference row (to A/B-test a change; its plugins must sit beside it);
    /// also a row of the gateways and memory-at-rest tables (e.g. target/dist/wf).
    #[arg(long, value_name = "PATH")]
    compare: Option<PathBuf>,
    /// A PostgreSQL URL (`postgres://…`): the engine benchmark also runs wf
    /// with `[store] url` there (a schema of its own), beside SQLite.
    #[arg(long, value_name = "URL", env = "WF_BENCH_PG_URL")]
    pg_url: Option<String>,
    /// Add peer proxies to the overhead rounds (FastMCP's `as_proxy`; see
    /// bench/requirements-fastmcp.txt). A peer that cannot run is reported.
    #[arg(long)]
    peers: bool,
    /// Add a `wf (telemetry on)` row to the overhead rounds: wf exporting
    /// traces and metrics over OTLP to a sink wf-bench runs, beside the
    /// `wf` row (telemetry off).
    #[arg(long)]
    telemetry: bool,
    /// The Python that has `fastmcp` installed (default: target/fastmcp-venv/bin/python).
    #[arg(long, value_name = "PATH")]
    fastmcp_python: Option<PathBuf>,
    /// Append every figure of this run's tables to FILE as JSON lines
    /// (bench/results/; `python3 bench/trend.py` prints how they moved).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Run only these benchmarks (repeatable; default: all).
    #[arg(long, value_enum, value_name = "BENCH")]
    only: Vec<Bench>,
    /// Internal: serve as a bare rmcp relay (`stdio`, `pipes`, `split`, `http`
    /// or `http-min`; bench/src/relay.rs) in front of the command after `--`
    /// (the reference rows of the overhead and HTTP front tables).
    #[arg(long, hide = true, value_name = "TRANSPORT")]
    relay: Option<String>,
    #[arg(last = true, hide = true)]
    relay_command: Vec<String>,
    /// Internal: drive a running streamable HTTP gateway, `URL,TOOL,SESSIONS,SECONDS`
    /// (the gateways benchmark's throughput clients), and print its calls/s.
    #[arg(long, hide = true, value_name = "SPEC")]
    load: Option<String>,
    /// Internal: serve the OpenAPI benchmark's REST API on 127.0.0.1 and
    /// print its base URL (bench/src/openapi.rs), in a process of its own.
    #[arg(long, hide = true)]
    openapi_api: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Bench {
    Overhead,
    Startup,
    Memory,
    Engine,
    /// A run's node writes fenced by its lease, against unfenced.
    Fencing,
    Sessions,
    /// `wf serve --http` against stdio direct.
    Http,
    /// A fast source's calls while 100 one-second calls to a slow one are in flight.
    Slow,
    /// A GET through an `openapi` source against the same request made directly.
    Openapi,
    /// How well and how fast `wf_find` finds tools among 500+ real definitions.
    Retrieval,
    /// Large real OpenAPI documents (GitHub, Microsoft Graph): discovery
    /// time, memory, tools/list size (not in the default run).
    OpenapiDocs,
    /// Identifying a request by an OAuth JWT (warm JWKS) against a static token.
    Oauth,
    /// The audit trail's record stage (on against off) and writer throughput.
    Audit,
    /// The call pipeline's admission: no policy, 10 and 1,000 Cedar policies, a quota.
    Policy,
    /// Endpoints: tools/list and a call with a transform against plain /mcp, in process and over HTTP; 50 endpoints' memory.
    Endpoints,
    /// 200 concurrent HTTP sessions, then a 100 000-call soak (not in the default run).
    Load,
    /// WebAssembly components: a trivial tool's warm call and cold start
    /// against native, and the memory per instance.
    Wasm,
    /// wf's HTTP front beside mcp-proxy and FastMCP: latency, calls/s, RSS,
    /// upstream processes, 64 KiB messages (not in the default run; installs
    /// mcp-proxy once).
    Gateways,
}

/// What every benchmark needs: binaries, a scratch directory, the run size.
pub struct Env {
    pub wf: PathBuf,
    pub fixture: PathBuf,
    pub everything: Option<PathBuf>,
    /// tests/e2e/node_modules/.bin or `--npm-bin`.
    pub npm_bin: PathBuf,
    pub chromium: PathBuf,
    pub compare: Option<PathBuf>,
    pub pg_url: Option<String>,
    /// With `--peers`: the Python to run FastMCP's proxy with.
    pub fastmcp_python: Option<PathBuf>,
    /// With `--telemetry`: the telemetry-on row in the overhead rounds.
    pub telemetry: bool,
    pub scratch: PathBuf,
    pub quick: bool,
}

/// The longest any child may take to answer the MCP handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

impl Env {
    /// `wf serve` over stdio with a fresh config and state dir holding `sources`.
    /// Returns the command and the file its stderr goes to.
    pub fn wf_command(&self, name: &str, sources: Value) -> anyhow::Result<(Command, PathBuf)> {
        self.wf_command_with(&self.wf, name, sources)
    }

    /// Like [`Self::wf_command`] for another `wf` binary.
    pub fn wf_command_with(
        &self,
        binary: &Path,
        name: &str,
        sources: Value,
    ) -> anyhow::Result<(Command, PathBuf)> {
        self.wf_command_with_server(binary, name, sources, json!({}))
    }

    /// Like [`Self::wf_command_with`], with a `[server]` table.
    pub fn wf_command_with_server(
        &self,
        binary: &Path,
        name: &str,
        sources: Value,
        server: Value,
    ) -> anyhow::Result<(Command, PathBuf)> {
        self.wf_command_with_config(binary, name, json!({"sources": sources, "server": server}))
    }

    /// `wf serve` over stdio with `config` (JSON, the whole file).
    pub fn wf_command_with_config(
        &self,
        binary: &Path,
        name: &str,
        config_json: Value,
    ) -> anyhow::Result<(Command, PathBuf)> {
        let config = self.scratch.join(format!("{name}.json"));
        std::fs::write(&config, serde_json::to_vec_pretty(&config_json)?)
            .with_context(|| format!("cannot write {}", config.display()))?;
        let state = self.scratch.join(format!("state-{name}"));
        let _ = std::fs::remove_dir_all(&state);
        let mut cmd = Command::new(binary);
        cmd.arg("serve")
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(&state)
            .env("WF_LOG", "warn");
        Ok((cmd, self.scratch.join(format!("{name}.stderr"))))
    }

    /// A wf source entry for the fixture (stdio), optionally slow to start.
    pub fn fixture_source(&self, delay_ms: u64) -> Value {
        json!({"command": self.fixture, "args": fixture_args(delay_ms)})
    }

    pub fn fixture_command(&self, delay_ms: u64) -> Command {
        let mut cmd = Command::new(&self.fixture);
        cmd.args(fixture_args(delay_ms));
        cmd
    }
}

fn fixture_args(delay_ms: u64) -> Vec<String> {
    if delay_ms == 0 {
        Vec::new()
    } else {
        vec!["--start-delay-ms".into(), delay_ms.to_string()]
    }
}

fn beside_exe(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find wf-bench's own path")?;
    Ok(exe.parent().unwrap_or(Path::new(".")).join(name))
}

fn resolve(args: &Args) -> anyhow::Result<Env> {
    let wf = match &args.wf {
        Some(p) => p.clone(),
        None => beside_exe("wf")?,
    };
    let fixture = match &args.fixture {
        Some(p) => p.clone(),
        None => beside_exe("wf-fixture-upstream")?,
    };
    let mut required = vec![("wf", &wf), ("the upstream fixture", &fixture)];
    if let Some(c) = &args.compare {
        required.push(("the --compare wf build", c));
    }
    for (what, p) in required {
        if !p.is_file() {
            bail!(
                "{what} not found at {} (build it: cargo build --release -p wf-bench -p wf-host \
                 -p wf-source-std -p wf-source-mcp -p wf-fixture-upstream)",
                p.display()
            );
        }
    }
    if !has_plugin_beside(&wf, "wf_source_mcp") {
        bail!(
            "no wf_source_mcp plugin next to {} or in plugins/ beside it (build -p wf-source-mcp \
             in the same profile, or unpack dist/build's archive)",
            wf.display()
        );
    }
    let everything = match &args.everything {
        Some(p) => Some(p.clone()),
        None => Some(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/e2e/node_modules/.bin/mcp-server-everything"),
        ),
    }
    .filter(|p| p.exists())
    // Tidy `bench/../tests` without resolving the `.bin` symlink itself.
    .map(|p| {
        match (
            p.parent().and_then(|d| d.canonicalize().ok()),
            p.file_name(),
        ) {
            (Some(dir), Some(name)) => dir.join(name),
            _ => p,
        }
    });
    let npm_bin = args.npm_bin.clone().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/node_modules/.bin")
    });
    let scratch = std::env::temp_dir().join(format!("wf-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    Ok(Env {
        wf: absolute(wf),
        fixture: absolute(fixture),
        everything: everything.map(absolute),
        npm_bin: absolute(npm_bin),
        chromium: args.chromium.clone(),
        compare: args.compare.clone().map(absolute),
        pg_url: args.pg_url.clone(),
        telemetry: args.telemetry,
        fastmcp_python: args.peers.then(|| {
            args.fastmcp_python.clone().unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fastmcp-venv/bin/python")
            })
        }),
        scratch,
        quick: args.quick,
    })
}

fn absolute(p: PathBuf) -> PathBuf {
    std::path::absolute(&p).unwrap_or(p)
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn print_header(env: &Env) {
    let date = command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let command: Vec<String> = std::env::args().collect();
    println!(
        "# wf benchmark ({})\n",
        if env.quick { "quick" } else { "full" }
    );
    println!("- date: {date}");
    println!("- command: `{}`", command.join(" "));
    println!("- machine: {cores} cores, {cpu}, Linux {}", kernel.trim());
    println!(
        "- load average at start: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("- wf: `{}`", env.wf.display());
    if let Some(c) = &env.compare {
        println!("- compared wf build: `{}`", c.display());
    }
    println!("- fixture: `{}`", env.fixture.display());
    match &env.everything {
        Some(p) => println!("- server-everything: `{}`", p.display()),
        None => println!(
            "- server-everything: not installed (run `npm ci` in tests/e2e); its rows are skipped"
        ),
    }
    println!();
}

async fn run(env: &Env, only: &[Bench]) -> anyhow::Result<()> {
    let wants = |b: Bench| only.is_empty() || only.contains(&b);
    print_header(env);
    if wants(Bench::Overhead) {
        overhead::run(env).await?;
    }
    if wants(Bench::Startup) {
        startup::run(env).await?;
        startup_npm::run(env).await?;
    }
    if wants(Bench::Memory) {
        memory::run(env).await?;
    }
    if wants(Bench::Engine) {
        engine::run(env).await?;
    }
    if wants(Bench::Fencing) {
        fencing::run(env).await?;
    }
    if wants(Bench::Sessions) {
        sessions::run(env).await?;
    }
    if wants(Bench::Http) {
        front::run(env).await?;
    }
    if wants(Bench::Slow) {
        slow::run(env).await?;
    }
    if wants(Bench::Openapi) {
        openapi::run(env).await?;
    }
    if wants(Bench::Retrieval) {
        retrieval::run(env).await?;
    }
    if wants(Bench::Oauth) {
        oauth::run(env).await?;
    }
    if wants(Bench::Audit) {
        audit::run(env).await?;
    }
    if wants(Bench::Policy) {
        policy::run(env).await?;
    }
    if wants(Bench::Endpoints) {
        endpoints::run(env).await?;
    }
    if wants(Bench::Wasm) {
        wasm::run(env).await?;
    }
    // Minutes long: only when asked for by name.
    if only.contains(&Bench::Load) {
        load::run(env).await?;
    }
    if only.contains(&Bench::Gateways) {
        mcp_proxy::run(env).await?;
    }
    if only.contains(&Bench::OpenapiDocs) {
        openapi_docs::run(env).await?;
    }
    Ok(())
}

/// `--load URL,TOOL,SESSIONS,SECONDS`.
async fn load_spec(spec: &str) -> anyhow::Result<f64> {
    let [url, tool, sessions, seconds] = spec.split(',').collect::<Vec<_>>()[..] else {
        bail!("expected URL,TOOL,SESSIONS,SECONDS, got {spec:?}");
    };
    let span = Duration::from_secs_f64(seconds.parse().context("SECONDS")?);
    let http = reqwest::Client::new();
    mcp_proxy::calls_per_second(
        &http,
        url,
        tool,
        sessions.parse().context("SESSIONS")?,
        span,
    )
    .await
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if args.openapi_api {
        return match openapi::serve_forever().await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("wf-bench --openapi-api: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    if let Some(file) = &args.record {
        let mut rest = Vec::new();
        let mut given = std::env::args().skip(1);
        while let Some(a) = given.next() {
            if a == "--record" {
                given.next();
            } else if !a.starts_with("--record=") {
                rest.push(a);
            }
        }
        return record::run(file, rest).await;
    }
    if let Some(spec) = &args.load {
        return match load_spec(spec).await {
            Ok(rate) => {
                println!("{rate:.0} calls/s");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("wf-bench --load: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    if let Some(transport) = &args.relay {
        return match relay::serve(transport, &args.relay_command).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("wf-bench --relay: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let env = match resolve(&args) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("wf-bench: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Interrupting drops the run: every child is reaped by its guard.
    let result = tokio::select! {
        r = run(&env, &args.only) => Some(r),
        _ = tokio::signal::ctrl_c() => None,
    };
    // The run future is gone here: every child has been stopped and reaped.
    let Some(result) = result else {
        let _ = std::fs::remove_dir_all(&env.scratch);
        eprintln!("wf-bench: interrupted");
        return std::process::ExitCode::from(130);
    };
    match result {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&env.scratch);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("wf-bench: {e:#}");
            eprintln!(
                "wf-bench: configs and wf's stderr are kept in {}",
                env.scratch.display()
            );
            std::process::ExitCode::FAILURE
        }
    }
}

/// Whether a plugin file whose name contains `name` lies where `wf` loads
/// plugins from by itself: beside it (a cargo build) or in `plugins/` beside
/// it (an unpacked dist/build archive).
pub fn has_plugin_beside(wf: &Path, name: &str) -> bool {
    let dir = wf.parent().unwrap_or(Path::new("."));
    [dir.to_path_buf(), dir.join("plugins")].iter().any(|d| {
        std::fs::read_dir(d).is_ok_and(|entries| {
            entries
                .filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().contains(name))
        })
    })
}
