//! Echo round trips through `wf` versus straight to the same upstream.
//!
//! One rmcp client implementation drives both paths, each over ONE session
//! (wf, too, multiplexes every call onto one upstream session per source),
//! so the only difference is wf in the middle. Batches alternate between the
//! two paths (ABBA order) so that drift in machine load hits both alike.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::{Peer, RoleClient};
use serde_json::json;
use tokio::task::JoinSet;

use crate::lean::{self, LeanMcp};
use crate::proc::{Cpu, McpProc, children, echo, settle_children};
use crate::stats::{delta_us, median_f64, percentile, us, verdict};
use crate::{Env, HANDSHAKE_TIMEOUT};

/// Target: wf adds at most this much to the p50 round trip.
const P50_BUDGET_US: f64 = 100.0;
/// Target: wf keeps at least this share of the direct throughput at concurrency 16.
const THROUGHPUT_SHARE: f64 = 0.70;
const CONCURRENCY: usize = 16;
/// The `--telemetry` path's name.
const TELEMETRY_ON: &str = "wf (telemetry on)";
/// The path with the mcp plugin in a child of its own (issue 32).
const ISOLATED: &str = "wf (mcp plugin in process isolation)";
/// With `--compare`: the other build, its mcp plugin in a child too.
const ISOLATED_COMPARED: &str = "wf --compare (mcp plugin in process isolation)";
/// Issue 32's targets: process isolation adds at most this much to the p50
/// over in process, and keeps at least this share of its calls/s at 16.
const ISOLATED_P50_BUDGET_US: f64 = 60.0;
const ISOLATED_RATE_SHARE: f64 = 0.80;

struct Plan {
    warmup: usize,
    batch: usize,
    rounds: usize,
    tput_rounds: usize,
    tput_window: Duration,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                warmup: 50,
                batch: 50,
                rounds: 4,
                tput_rounds: 2,
                tput_window: Duration::from_millis(500),
            }
        } else {
            Self {
                warmup: 300,
                batch: 200,
                rounds: 25,
                tput_rounds: 3,
                tput_window: Duration::from_secs(3),
            }
        }
    }
}

struct Upstream {
    label: &'static str,
    /// The wf source name: its echo tool is `<source>__echo` through wf.
    source: &'static str,
    command: PathBuf,
    args: Vec<String>,
}

/// One path's numbers.
#[derive(Default)]
struct Side {
    latencies: Vec<Duration>,
    /// (calls, seconds) per throughput window.
    windows: Vec<(u64, f64)>,
    /// CPU used during this path's concurrency-1 batches, by role.
    batch_cpu: [Cpu; ROLES],
    /// CPU used during this path's concurrency-16 windows, by role.
    window_cpu: [Cpu; ROLES],
}

/// The processes a call passes through: this client, the proxy (wf or a
/// relay; none on the direct path) and the upstream server.
const ROLES: usize = 3;

fn snapshot(pids: &[Option<u32>; ROLES]) -> [Cpu; ROLES] {
    pids.map(|p| p.map(Cpu::of).unwrap_or_default())
}

fn accumulate(into: &mut [Cpu; ROLES], pids: &[Option<u32>; ROLES], before: [Cpu; ROLES]) {
    let after = snapshot(pids);
    for r in 0..ROLES {
        into[r].add(after[r].since(before[r]));
    }
}

impl Side {
    fn rate(&self) -> f64 {
        let calls: u64 = self.windows.iter().map(|w| w.0).sum();
        let secs: f64 = self.windows.iter().map(|w| w.1).sum();
        if secs > 0.0 { calls as f64 / secs } else { 0.0 }
    }
    fn rates(&self) -> Vec<f64> {
        self.windows
            .iter()
            .map(|&(c, s)| c as f64 / s.max(1e-9))
            .collect()
    }
}

struct Outcome {
    label: &'static str,
    /// The paths' names: direct, wf, then the reference paths.
    names: Vec<String>,
    /// One per path.
    sides: Vec<Side>,
    /// wf − direct p50 of each interleaved round.
    round_p50_deltas: Vec<f64>,
    /// Every path's p50 of each round (µs), by round.
    round_p50s: Vec<Vec<f64>>,
    /// With `--telemetry`: the telemetry-on path's index and the exports its sink got.
    telemetry: Option<(usize, u64)>,
    /// Peers that could not run, and why.
    missing_peers: Vec<String>,
    /// The isolated path's index and its plugin child's RSS (KiB) once
    /// discovery was done, before any call.
    isolated: Option<(usize, Option<u64>)>,
    /// The same comparison with blocking clients (lean.rs).
    lean_isolation: Option<LeanIsolation>,
}

/// In process against isolated, each `wf serve` driven by a blocking
/// one-thread client (lean.rs), in interleaved rounds of their own.
struct LeanIsolation {
    in_process: Vec<Duration>,
    isolated: Vec<Duration>,
    /// Isolated − in-process p50 of each round (µs).
    round_deltas: Vec<f64>,
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let plan = Plan::new(env.quick);
    let mut ups = vec![Upstream {
        label: "Rust fixture (stdio)",
        source: "fx",
        command: env.fixture.clone(),
        args: Vec::new(),
    }];
    match &env.everything {
        Some(p) => ups.push(Upstream {
            label: "server-everything (stdio)",
            source: "ev",
            command: p.clone(),
            args: Vec::new(),
        }),
        None => eprintln!("wf-bench: server-everything not found; skipping it"),
    }
    let mut outcomes = Vec::new();
    for up in &ups {
        outcomes.push(measure(env, &plan, up).await?);
    }
    print(&plan, &outcomes, env.everything.is_none());
    Ok(())
}

async fn measure(env: &Env, plan: &Plan, up: &Upstream) -> anyhow::Result<Outcome> {
    eprintln!("wf-bench: overhead: {}", up.label);
    // The paths: direct and wf (which the targets compare), then an optional
    // second wf build (--compare) and the reference relays.
    let mut names: Vec<String> = Vec::new();
    let mut procs = Vec::new();
    let mut tools = Vec::new();
    let mut direct_cmd = tokio::process::Command::new(&up.command);
    direct_cmd.args(&up.args);
    procs.push(
        McpProc::start(
            &format!("{} (direct)", up.label),
            direct_cmd,
            None,
            HANDSHAKE_TIMEOUT,
        )
        .await?,
    );
    names.push("direct".into());
    tools.push("echo".to_string());
    let source = json!({ up.source: {"command": up.command, "args": up.args} });
    let wf_tool = format!("{}__echo", up.source);
    let mut builds = vec![("wf".to_string(), env.wf.clone())];
    if let Some(other) = &env.compare {
        builds.push((format!("wf `{}`", other.display()), other.clone()));
    }
    for (i, (name, binary)) in builds.into_iter().enumerate() {
        let (cmd, log) = env.wf_command_with(
            &binary,
            &format!("overhead-{}-{i}", up.source),
            source.clone(),
        )?;
        procs.push(McpProc::start(&name, cmd, Some(&log), HANDSHAKE_TIMEOUT).await?);
        names.push(name);
        tools.push(wf_tool.clone());
    }
    // --telemetry: the same wf exporting traces and metrics to a local sink.
    let sink = match env.telemetry {
        true => Some(crate::otlp_sink::Sink::start().await?),
        false => None,
    };
    if let Some(sink) = &sink {
        let config = json!({
            "sources": source,
            "telemetry": {"otlp_endpoint": sink.endpoint, "otlp_metrics_interval_ms": 10_000},
        });
        let (cmd, log) =
            env.wf_command_with_config(&env.wf, &format!("overhead-{}-otel", up.source), config)?;
        let name = TELEMETRY_ON.to_string();
        procs.push(McpProc::start(&name, cmd, Some(&log), HANDSHAKE_TIMEOUT).await?);
        names.push(name);
        tools.push(wf_tool.clone());
    }
    // Issue 32: the same wf, the mcp plugin in `wf-plugin-host`, a child.
    {
        let config = json!({
            "sources": source,
            "plugins": {"wf-source-mcp": {"isolation": "process"}},
        });
        let (cmd, log) = env.wf_command_with_config(
            &env.wf,
            &format!("overhead-{}-process", up.source),
            config,
        )?;
        procs.push(McpProc::start(ISOLATED, cmd, Some(&log), HANDSHAKE_TIMEOUT).await?);
        names.push(ISOLATED.into());
        tools.push(wf_tool.clone());
        // The A/B of a change to process mode: the other build isolated too.
        if let Some(other) = &env.compare {
            let config = json!({
                "sources": source,
                "plugins": {"wf-source-mcp": {"isolation": "process"}},
            });
            let (cmd, log) = env.wf_command_with_config(
                other,
                &format!("overhead-{}-process-compare", up.source),
                config,
            )?;
            procs
                .push(McpProc::start(ISOLATED_COMPARED, cmd, Some(&log), HANDSHAKE_TIMEOUT).await?);
            names.push(ISOLATED_COMPARED.into());
            tools.push(wf_tool.clone());
        }
    }
    // WF_BENCH_ISOLATION_ONLY=1: only direct, wf and the isolated paths (a
    // shorter run for A/B tests of process mode).
    let isolation_only = std::env::var_os("WF_BENCH_ISOLATION_ONLY").is_some_and(|v| v == "1");
    for (transport, name) in [
        ("stdio", "relay (stdio)"),
        ("pipes", "relay (stdio_pipes)"),
        ("split", "relay (two runtimes)"),
    ]
    .into_iter()
    .filter(|_| !isolation_only)
    {
        let mut cmd = tokio::process::Command::new(std::env::current_exe()?);
        cmd.args(["--relay", transport, "--"])
            .arg(&up.command)
            .args(&up.args);
        procs.push(McpProc::start(name, cmd, None, HANDSHAKE_TIMEOUT).await?);
        names.push(name.into());
        tools.push("echo".into());
    }

    let mut missing_peers = Vec::new();
    if let Some(python) = env.fastmcp_python.as_ref().filter(|_| !isolation_only) {
        let name = "FastMCP proxy (stdio)";
        let mut cmd = tokio::process::Command::new(python);
        cmd.arg(crate::peers::fastmcp_script())
            .arg(&up.command)
            .args(&up.args);
        match McpProc::start(name, cmd, None, HANDSHAKE_TIMEOUT).await {
            Ok(p) => match require_tool(&p.peer(), "echo", name).await {
                Ok(()) => {
                    procs.push(p);
                    names.push(name.into());
                    tools.push("echo".into());
                }
                Err(e) => missing_peers.push(format!("{name}: {e:#}")),
            },
            Err(e) => missing_peers.push(format!("{name} (`{}`): {e:#}", python.display())),
        }
    }

    let mut paths = Vec::new();
    for ((p, tool), name) in procs.iter().zip(tools).zip(&names) {
        require_tool(&p.peer(), &tool, name).await?;
        paths.push((p.peer(), tool));
    }

    // Warm-up: opens wf's persistent upstream session, faults pages in.
    for (peer, tool) in &paths {
        for i in 0..plan.warmup {
            echo(peer, tool, &message(i)).await?;
        }
    }
    // Whose CPU each path spends: [client, proxy, upstream].
    let me = Some(std::process::id());
    let mut pids = vec![[me, None, Some(procs[0].pid)]];
    let mut isolated = None;
    for (i, p) in procs.iter().enumerate().skip(1) {
        settle_children(p.pid, 1).await;
        let mut kids = children(p.pid);
        if names[i] == ISOLATED || names[i] == ISOLATED_COMPARED {
            // wf's child is the plugin's host; the upstream is its child.
            // (The host's own CPU is in neither column: see the isolation table.)
            let host = kids.first().copied();
            if names[i] == ISOLATED {
                isolated = Some((i, host.and_then(crate::proc::rss_kib).map(|r| r.0)));
            }
            kids = host.map(children).unwrap_or_default();
        }
        let upstream = (kids.len() == 1).then(|| kids[0]);
        if upstream.is_none() {
            eprintln!(
                "wf-bench: {} has {} children, not 1: its upstream CPU is not counted",
                p.label,
                kids.len()
            );
        }
        pids.push([me, Some(p.pid), upstream]);
    }

    let n = paths.len();
    let mut sides: Vec<Side> = (0..n).map(|_| Side::default()).collect();
    let mut round_p50_deltas = Vec::new();
    let mut round_p50s = Vec::new();
    for round in 0..plan.rounds {
        let mut p50 = vec![0.0; n];
        for k in rotation(round, n) {
            let (peer, tool) = &paths[k];
            let mut batch = Vec::with_capacity(plan.batch);
            let before = snapshot(&pids[k]);
            for i in 0..plan.batch {
                let msg = message(round * plan.batch + i);
                let t = Instant::now();
                echo(peer, tool, &msg).await?;
                batch.push(t.elapsed());
            }
            accumulate(&mut sides[k].batch_cpu, &pids[k], before);
            p50[k] = us(percentile(&batch, 0.5));
            sides[k].latencies.extend(batch);
        }
        round_p50_deltas.push(p50[1] - p50[0]);
        round_p50s.push(p50);
    }

    for round in 0..plan.tput_rounds {
        for k in rotation(round, n) {
            let (peer, tool) = &paths[k];
            let before = snapshot(&pids[k]);
            let w = throughput(peer, tool, plan.tput_window).await?;
            accumulate(&mut sides[k].window_cpu, &pids[k], before);
            sides[k].windows.push(w);
        }
    }

    for p in &mut procs {
        p.stop().await;
    }
    let lean_isolation = Some(lean_isolation(env, plan, up, &source).await?);
    let on = names.iter().position(|n| n == TELEMETRY_ON);
    let telemetry = on.zip(sink.as_ref().map(|s| s.exports()));
    Ok(Outcome {
        label: up.label,
        names,
        sides,
        round_p50_deltas,
        round_p50s,
        telemetry,
        missing_peers,
        isolated,
        lean_isolation,
    })
}

/// Issue 32's p50 with blocking clients: rmcp's client hands each call
/// between tasks of the benchmark's own runtime, and a longer wait for the
/// answer makes those hand-offs slower too (its threads sleep deeper), so
/// part of what the rmcp rows call "added" is the client's. Here both
/// `wf serve`s are driven over raw pipes from one thread (lean.rs).
async fn lean_isolation(
    env: &Env,
    plan: &Plan,
    up: &Upstream,
    source: &serde_json::Value,
) -> anyhow::Result<LeanIsolation> {
    let mut clients = Vec::new();
    for (name, plugins) in [
        ("in-process", json!({})),
        (
            "process",
            json!({"wf-source-mcp": {"isolation": "process"}}),
        ),
    ] {
        let config = json!({"sources": source, "plugins": plugins});
        let (cmd, log) = env.wf_command_with_config(
            &env.wf,
            &format!("overhead-{}-lean-{name}", up.source),
            config,
        )?;
        clients.push(LeanMcp::start(lean::std_command(&cmd), &log)?);
    }
    let tool = format!("{}__echo", up.source);
    let (warmup, batch, rounds) = (plan.warmup, plan.batch, plan.rounds);
    tokio::task::spawn_blocking(move || {
        let call = |client: &mut LeanMcp, i: usize| -> anyhow::Result<()> {
            let msg = message(i);
            let result = client.call_tool(&tool, &json!({"message": msg}))?;
            if !result.to_string().contains(&msg) {
                bail!("{tool} did not echo {msg:?}: {result}");
            }
            Ok(())
        };
        for client in &mut clients {
            client.wait_for_tool(&tool, HANDSHAKE_TIMEOUT)?;
            for i in 0..warmup {
                call(client, i)?;
            }
        }
        let mut out = LeanIsolation {
            in_process: Vec::new(),
            isolated: Vec::new(),
            round_deltas: Vec::new(),
        };
        for round in 0..rounds {
            let mut p50 = [0.0; 2];
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                let mut times = Vec::with_capacity(batch);
                for i in 0..batch {
                    let t = Instant::now();
                    call(&mut clients[k], round * batch + i)?;
                    times.push(t.elapsed());
                }
                p50[k] = us(percentile(&times, 0.5));
                if k == 0 {
                    out.in_process.extend(times);
                } else {
                    out.isolated.extend(times);
                }
            }
            out.round_deltas.push(p50[1] - p50[0]);
        }
        Ok(out)
    })
    .await?
}

/// The order of the paths in round `round`: direct and wf swap places every
/// round (ABBA), the relays follow.
fn rotation(round: usize, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if round % 2 == 1 {
        order.swap(0, 1);
    }
    order.rotate_left(round % n);
    order
}

fn message(i: usize) -> String {
    format!("wf-bench round trip {i:08}")
}

/// How long a path may take to list `tool`: wf lists an upstream's tools once
/// its discovery is done, which on a loaded machine (a CI smoke run) can take
/// seconds after the handshake.
const LIST_WAIT: Duration = Duration::from_secs(60);

/// Waits (bounded by `LIST_WAIT`) until `who` lists `tool`.
async fn require_tool(peer: &Peer<RoleClient>, tool: &str, who: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + LIST_WAIT;
    loop {
        let tools = peer
            .list_all_tools()
            .await
            .with_context(|| format!("{who}: tools/list"))?;
        if tools.iter().any(|t| t.name == tool) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
            bail!("{who} does not list {tool:?} after {LIST_WAIT:?}; it lists {names:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `CONCURRENCY` callers on one session for `window`: (calls, seconds).
async fn throughput(
    peer: &Peer<RoleClient>,
    tool: &str,
    window: Duration,
) -> anyhow::Result<(u64, f64)> {
    let start = Instant::now();
    let deadline = start + window;
    let mut set = JoinSet::new();
    for c in 0..CONCURRENCY {
        let (peer, tool) = (peer.clone(), tool.to_string());
        set.spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                echo(&peer, &tool, &format!("wf-bench caller {c:02} call {n:08}")).await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    let mut calls = 0;
    while let Some(r) = set.join_next().await {
        calls += r.context("a caller task failed")??;
    }
    Ok((calls, start.elapsed().as_secs_f64()))
}

fn print(plan: &Plan, outcomes: &[Outcome], everything_missing: bool) {
    println!("## Echo round trip: wf versus direct\n");
    println!(
        "Concurrency 1, one session per path, {} rounds of {} calls per path, the paths taking \
         turns round by round ({} calls per path after {} warm-up calls each).\n",
        plan.rounds,
        plan.batch,
        plan.rounds * plan.batch,
        plan.warmup
    );
    println!(
        "| upstream | direct p50 | wf p50 | p50 added by wf | direct p99 | wf p99 | p99 added by wf | median of per-round p50 deltas | target: p50 +≤ {P50_BUDGET_US:.0} µs |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for o in outcomes {
        let (d, w) = (&o.sides[0].latencies, &o.sides[1].latencies);
        let (d50, w50) = (percentile(d, 0.5), percentile(w, 0.5));
        let (d99, w99) = (percentile(d, 0.99), percentile(w, 0.99));
        println!(
            "| {} | {:.0} µs | {:.0} µs | {} µs | {:.0} µs | {:.0} µs | {} µs | {:+.0} µs | {} |",
            o.label,
            us(d50),
            us(w50),
            delta_us(w50, d50),
            us(d99),
            us(w99),
            delta_us(w99, d99),
            median_f64(&o.round_p50_deltas),
            verdict(us(w50) - us(d50) <= P50_BUDGET_US)
        );
    }
    println!();
    println!(
        "Concurrency {CONCURRENCY}: {CONCURRENCY} callers sharing one session per path, {} windows \
         of {:.1} s per path, the paths taking turns.\n",
        plan.tput_rounds,
        plan.tput_window.as_secs_f64()
    );
    println!(
        "| upstream | direct calls/s | wf calls/s | wf / direct | each window (direct; wf) | target: ≥ {:.0}% |",
        THROUGHPUT_SHARE * 100.0
    );
    println!("|---|---:|---:|---:|---|---|");
    for o in outcomes {
        let (d, w) = (o.sides[0].rate(), o.sides[1].rate());
        let share = if d > 0.0 { w / d } else { 0.0 };
        println!(
            "| {} | {d:.0} | {w:.0} | {:.0}% | {}; {} | {} |",
            o.label,
            share * 100.0,
            rates(&o.sides[0]),
            rates(&o.sides[1]),
            verdict(share >= THROUGHPUT_SHARE)
        );
    }
    println!();
    println!(
        "Reference: the same calls through a bare rmcp pass-through relay (`wf-bench --relay`, \
         not wf: no plugins, no conversions), measured in the same rounds. \"stdio\" serves \
         with `rmcp::transport::stdio()` (a blocking helper thread); \"stdio_pipes\" with \
         rmcp's non-blocking pipe transport, as `wf serve` does, on one tokio runtime (the lean \
         relay); \"two runtimes\" is the lean relay with its upstream session on a second \
         runtime of one worker, as a plugin's is: what the plugin boundary alone costs.\n"
    );
    println!(
        "| upstream | path | p50 | p50 added | p99 | calls/s at {CONCURRENCY} | share of direct |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for o in outcomes {
        let d50 = percentile(&o.sides[0].latencies, 0.5);
        let drate = o.sides[0].rate();
        for (name, side) in o.names.iter().zip(&o.sides) {
            let p50 = percentile(&side.latencies, 0.5);
            println!(
                "| {} | {name} | {:.0} µs | {} µs | {:.0} µs | {:.0} | {:.0}% |",
                o.label,
                us(p50),
                delta_us(p50, d50),
                us(percentile(&side.latencies, 0.99)),
                side.rate(),
                100.0 * side.rate() / drate.max(1e-9)
            );
        }
    }
    println!();
    println!(
        "Where the CPU goes: on-CPU time per call of each process on the path (summed over its \
         threads from /proc/PID/task/*/schedstat while that path ran), and how often the \
         proxy's threads were put on a CPU per call (wake-ups). Two cores: at concurrency \
         {CONCURRENCY} the CPU per call caps the calls per second.\n"
    );
    println!(
        "| upstream | path | client µs/call | proxy µs/call | upstream µs/call | total µs/call | proxy wake-ups/call | total µs/call at {CONCURRENCY} |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for o in outcomes {
        for (name, side) in o.names.iter().zip(&o.sides) {
            let calls = side.latencies.len().max(1) as f64;
            let wcalls = side.windows.iter().map(|w| w.0).sum::<u64>().max(1) as f64;
            let per = |c: &Cpu| c.ns as f64 / 1e3 / calls;
            let total = side.batch_cpu.iter().map(per).sum::<f64>();
            let wtotal = side
                .window_cpu
                .iter()
                .map(|c| c.ns as f64 / 1e3)
                .sum::<f64>()
                / wcalls;
            let proxy = if name == "direct" {
                ("–".to_string(), "–".to_string())
            } else {
                (
                    format!("{:.0}", per(&side.batch_cpu[1])),
                    format!("{:.1}", side.batch_cpu[1].switches as f64 / calls),
                )
            };
            println!(
                "| {} | {name} | {:.0} | {} | {:.0} | {total:.0} | {} | {wtotal:.0} |",
                o.label,
                per(&side.batch_cpu[0]),
                proxy.0,
                per(&side.batch_cpu[2]),
                proxy.1,
            );
        }
    }
    print_relay_targets(outcomes);
    print_telemetry(outcomes);
    print_isolation(outcomes);
    for o in outcomes {
        for why in &o.missing_peers {
            println!("\nPeer not measured against {}: {why}", o.label);
        }
    }
    if everything_missing {
        println!(
            "\nserver-everything was not found (run `npm ci` in tests/e2e): its rows are missing."
        );
    }
    println!();
}

/// Issue 32's targets: the mcp plugin in a child of its own against the same
/// wf with it in process, in the same rounds.
fn print_isolation(outcomes: &[Outcome]) {
    println!(
        "\nProcess isolation: `wf` (the mcp plugin in process) and `{ISOLATED}` \
         in the same interleaved rounds. p50 added: the median over rounds of that round's \
         isolated p50 minus its in-process p50. Child RSS: the plugin's `wf-plugin-host` \
         once discovery was done, before any call. The child's own CPU is in no column of \
         the CPU table (proxy: wf; upstream: the child's child).\n"
    );
    println!(
        "| upstream | in-process p50 | isolated p50 | p50 added (target ≤ {ISOLATED_P50_BUDGET_US:.0} µs) | in-process calls/s at {CONCURRENCY} | isolated calls/s | share (target ≥ {:.0}%) | child idle RSS |",
        ISOLATED_RATE_SHARE * 100.0
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for o in outcomes {
        let Some((k, rss)) = o.isolated else { continue };
        let added = median_f64(&o.round_p50s.iter().map(|r| r[k] - r[1]).collect::<Vec<_>>());
        let (inproc, iso) = (&o.sides[1], &o.sides[k]);
        let share = iso.rate() / inproc.rate().max(1e-9);
        println!(
            "| {} | {:.0} µs | {:.0} µs | {added:.0} µs, {} | {:.0} | {:.0} | {:.0}%, {} | {} |",
            o.label,
            us(percentile(&inproc.latencies, 0.5)),
            us(percentile(&iso.latencies, 0.5)),
            verdict(added <= ISOLATED_P50_BUDGET_US),
            inproc.rate(),
            iso.rate(),
            share * 100.0,
            verdict(share >= ISOLATED_RATE_SHARE),
            rss.map(|kib| format!("{:.1} MiB", kib as f64 / 1024.0))
                .unwrap_or_else(|| "–".into()),
        );
    }
    let (rounds, calls) = outcomes
        .iter()
        .find_map(|o| o.lean_isolation.as_ref())
        .map_or((0, 0), |l| {
            let rounds = l.round_deltas.len();
            (rounds, l.in_process.len() / rounds.max(1))
        });
    println!(
        "\nThe same p50 with blocking one-thread clients (bench/src/lean.rs: raw JSON-RPC lines \
         on each `wf serve`'s pipes, no client runtime), in interleaved rounds of their own \
         ({rounds} × {calls} calls). p50 added: the median over rounds of that round's isolated \
         p50 minus its in-process p50.\n"
    );
    println!(
        "| upstream | in-process p50 | isolated p50 | p50 added (target ≤ {ISOLATED_P50_BUDGET_US:.0} µs) |"
    );
    println!("|---|---:|---:|---:|");
    for o in outcomes {
        let Some(l) = &o.lean_isolation else { continue };
        let added = median_f64(&l.round_deltas);
        println!(
            "| {} | {:.0} µs | {:.0} µs | {added:.0} µs, {} |",
            o.label,
            us(percentile(&l.in_process, 0.5)),
            us(percentile(&l.isolated, 0.5)),
            verdict(added <= ISOLATED_P50_BUDGET_US),
        );
    }
    if !outcomes
        .iter()
        .any(|o| o.names.iter().any(|n| n == ISOLATED_COMPARED))
    {
        return;
    }
    println!(
        "\nA/B of process mode: this build's isolated path against the `--compare` build's, \
         in the same rounds. Change: the median over rounds of this build's isolated p50 \
         minus the compared build's.\n"
    );
    println!(
        "| upstream | this build p50 | compared p50 | change | this build calls/s at {CONCURRENCY} | compared calls/s | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for o in outcomes {
        let Some((k, _)) = o.isolated else { continue };
        let Some(c) = o.names.iter().position(|n| n == ISOLATED_COMPARED) else {
            continue;
        };
        let change = median_f64(&o.round_p50s.iter().map(|r| r[k] - r[c]).collect::<Vec<_>>());
        let (a, b) = (&o.sides[k], &o.sides[c]);
        println!(
            "| {} | {:.0} µs | {:.0} µs | {change:+.0} µs | {:.0} | {:.0} | {:.2} |",
            o.label,
            us(percentile(&a.latencies, 0.5)),
            us(percentile(&b.latencies, 0.5)),
            a.rate(),
            b.rate(),
            a.rate() / b.rate().max(1e-9),
        );
    }
}

/// Issue #13's targets, judged against a relay measured in the same rounds:
/// the lean relay (the targets), and the relay split across two runtimes
/// (the floor of any design whose plugins own their runtimes).
const RELAY_P50_SLACK_US: f64 = 20.0;
const RELAY_CPU_RATIO: f64 = 1.15;
const RELAY_WAKEUP_SLACK: f64 = 2.0;
const RELAY_RATE_SHARE: f64 = 0.90;

fn print_relay_targets(outcomes: &[Outcome]) {
    let against = ["relay (stdio_pipes)", "relay (two runtimes)"];
    println!(
        "\nwf against each relay, in the same rounds: p50 added is the median over rounds of that \
         round's p50 minus direct's (a paired estimate); CPU and wake-ups are the proxy's per \
         call at concurrency 1; calls/s at {CONCURRENCY}. Targets: p50 added ≤ \
         relay's + {RELAY_P50_SLACK_US:.0} µs, CPU ≤ {RELAY_CPU_RATIO} × relay's, wake-ups ≤ \
         relay's + {RELAY_WAKEUP_SLACK:.0}, calls/s ≥ {:.0}% of relay's.\n",
        RELAY_RATE_SHARE * 100.0
    );
    println!(
        "| upstream | against | p50 added: wf / relay | CPU µs/call: wf / relay | wake-ups/call: wf / relay | calls/s at {CONCURRENCY}: wf / relay | p50 | CPU | wake-ups | calls/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for o in outcomes {
        let added =
            |k: usize| median_f64(&o.round_p50s.iter().map(|r| r[k] - r[0]).collect::<Vec<_>>());
        let per_call = |k: usize| {
            let side = &o.sides[k];
            let calls = side.latencies.len().max(1) as f64;
            (
                side.batch_cpu[1].ns as f64 / 1e3 / calls,
                side.batch_cpu[1].switches as f64 / calls,
            )
        };
        for relay in against {
            let Some(r) = o.names.iter().position(|n| n == relay) else {
                continue;
            };
            let (wf_cpu, wf_wake) = per_call(1);
            let (r_cpu, r_wake) = per_call(r);
            let (wf_rate, r_rate) = (o.sides[1].rate(), o.sides[r].rate());
            println!(
                "| {} | {relay} | {:+.0} / {:+.0} µs | {wf_cpu:.0} / {r_cpu:.0} ({:.2}×) | {wf_wake:.1} / {r_wake:.1} | {wf_rate:.0} / {r_rate:.0} ({:.0}%) | {} | {} | {} | {} |",
                o.label,
                added(1),
                added(r),
                wf_cpu / r_cpu.max(1e-9),
                100.0 * wf_rate / r_rate.max(1e-9),
                verdict(added(1) <= added(r) + RELAY_P50_SLACK_US),
                verdict(wf_cpu <= RELAY_CPU_RATIO * r_cpu),
                verdict(wf_wake <= r_wake + RELAY_WAKEUP_SLACK),
                verdict(wf_rate >= RELAY_RATE_SHARE * r_rate),
            );
        }
    }
}

fn rates(side: &Side) -> String {
    side.rates()
        .iter()
        .map(|r| format!("{r:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--telemetry`: wf with telemetry off (the `wf` path) and on, side by side.
fn print_telemetry(outcomes: &[Outcome]) {
    if outcomes.iter().all(|o| o.telemetry.is_none()) {
        return;
    }
    println!(
        "\nTelemetry off versus on: the `wf` path (no `[telemetry]`) and `{TELEMETRY_ON}` (traces \
         and metrics exported over OTLP/HTTP to a sink in wf-bench that answers 200), in the \
         same interleaved rounds. p50 added: the median over rounds of that round's p50 minus \
         direct's; CPU: the proxy's (wf's) on-CPU µs per call at concurrency 1.\n"
    );
    println!(
        "| upstream | telemetry | median per-round p50 added | wf µs/call | total µs/call | calls/s at {CONCURRENCY} | exports received |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for o in outcomes {
        let Some((on, exports)) = o.telemetry else {
            continue;
        };
        for (what, k) in [("off", 1), ("on", on)] {
            let added: Vec<f64> = o.round_p50s.iter().map(|r| r[k] - r[0]).collect();
            let side = &o.sides[k];
            let calls = side.latencies.len().max(1) as f64;
            let per = |c: &Cpu| c.ns as f64 / 1e3 / calls;
            let total = side.batch_cpu.iter().map(per).sum::<f64>();
            let got = if k == on {
                exports.to_string()
            } else {
                "–".into()
            };
            println!(
                "| {} | {what} | {:+.0} µs | {:.0} | {total:.0} | {:.0} | {got} |",
                o.label,
                median_f64(&added),
                per(&side.batch_cpu[1]),
                side.rate(),
            );
        }
        let on_minus_off: Vec<f64> = o.round_p50s.iter().map(|r| r[on] - r[1]).collect();
        println!(
            "| {} | on − off | {:+.0} µs (median per-round) | | | | |",
            o.label,
            median_f64(&on_minus_off)
        );
    }
}
