//! WebAssembly components (`kind = "wasm"`, issue #57) beside a native tool:
//!
//! - warm calls: `wf serve` with the smallest component (echo-min, no_std and
//!   no WASI imports: plugins/wasm/tests/components/echo-min-1.0.0.wasm,
//!   17 KiB), the Rust test guest (Rust std on WASI 0.2 with `wasi:http`,
//!   guest-1.0.0.wasm, 171 KiB: its extra over echo-min is what std's WASI
//!   imports cost per instance) and, when `WF_WASM_COMPONENTS` names the
//!   components tests/wasm/build.sh built, the Python probe (componentize-py)
//!   and the JavaScript units example (componentize-js); each one's trivial
//!   tool against the native std plugin's `wf_std__passthrough`, in
//!   interleaved rounds on one session;
//! - cold start: spawning `wf serve` with one component to its tool's first
//!   answer, compiled-code cache off, cache on but empty, cache on and warm
//!   (the same state directory), less the native tool's first answer in the
//!   same process;
//! - memory per instance: wf's resident memory while `max_instances` calls
//!   of the component's `spin` tool (a loop stopped at `timeout_ms`) hold that
//!   many instances at once, less its resident memory idle, per instance.
//!
//! Every wait is bounded and says what it waits for on stderr.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use rmcp::{Peer, RoleClient};
use serde_json::{Map, Value, json};
use tokio::process::Command;

use crate::proc::{McpProc, rss_kib};
use crate::stats::{median, ms, percentile, us, verdict};
use crate::{Env, HANDSHAKE_TIMEOUT};

/// Target: a warm call of a trivial tool adds at most this over native.
const WARM_BUDGET_US: f64 = 50.0;
/// Target: the cold start with a warm compiled-code cache adds at most this.
const COLD_BUDGET_MS: f64 = 50.0;
/// Discovery compiles a component first: seconds for the 18 MB Python one.
const DISCOVERY_MS: u64 = 600_000;
/// The longest a source may take to list its tools or answer its first call.
const READY_WITHIN: Duration = Duration::from_secs(600);
/// Any one warm call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The memory phase: instances held at once, each for `SPIN_MS`.
const INSTANCES: usize = 4;
const SPIN_MS: u64 = 1_500;

/// A component and the trivial tool the benchmark calls on it.
struct Component {
    /// Row label.
    label: &'static str,
    /// Source name (tools are `NAME__tool`).
    source: &'static str,
    path: PathBuf,
    tool: &'static str,
    arguments: Value,
    /// What a correct answer's text contains.
    expect: &'static str,
    /// It has a `spin` tool (the memory phase).
    spins: bool,
}

impl Component {
    fn tool_name(&self) -> String {
        format!("{}__{}", self.source, self.tool)
    }
    fn size_kib(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len() / 1024)
    }
}

const NATIVE: &str = "wf_std__passthrough";

fn native_arguments() -> Value {
    json!({"value": "ping"})
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: wasm");
    println!("## WebAssembly components: a trivial tool against native\n");
    if !crate::has_plugin_beside(&env.wf, "wf_source_wasm") {
        println!(
            "Skipped: no wf_source_wasm plugin next to {} (build -p wf-source-wasm in the same \
             profile).\n",
            env.wf.display()
        );
        return Ok(());
    }
    let components = components(env);
    let warm = warm_calls(env, &components).await?;
    print_warm(env, &components, &warm);
    cold_starts(env, &components).await?;
    memory(env, &components).await?;
    Ok(())
}

/// The two Rust components always; the Python and JavaScript ones when
/// built and the run is not `--quick` (each compiles for seconds). The
/// first is the smallest: the other rows' extra over it is their guest's
/// own cost.
fn components(env: &Env) -> Vec<Component> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = vec![
        Component {
            label: "Rust no_std, no WASI (echo-min, the smallest)",
            source: "echomin",
            path: absolute(root.join("plugins/wasm/tests/components/echo-min-1.0.0.wasm")),
            tool: "echo",
            arguments: json!({"text": "ping"}),
            expect: "ping",
            spins: false,
        },
        Component {
            label: "Rust std on WASI 0.2 (the test guest)",
            source: "guest",
            path: absolute(root.join("plugins/wasm/tests/components/guest-1.0.0.wasm")),
            tool: "echo",
            arguments: json!({"text": "ping"}),
            expect: "ping",
            spins: true,
        },
    ];
    let skipped = |why: String| {
        println!("The Python and JavaScript components are skipped: {why}.\n");
        eprintln!("wf-bench: wasm: Python and JavaScript components skipped: {why}");
    };
    if env.quick {
        skipped("a --quick run compiles only the Rust components".into());
        return out;
    }
    let Some(folder) = std::env::var_os("WF_WASM_COMPONENTS") else {
        skipped(
            "WF_WASM_COMPONENTS is not set (tests/wasm/build.sh target/examples/wasm builds them; \
             set it to that folder)"
                .into(),
        );
        return out;
    };
    let folder = absolute(PathBuf::from(folder));
    let probe = folder.join("probe.wasm");
    let units_js = folder.join("units-js.wasm");
    for p in [&probe, &units_js] {
        if !p.is_file() {
            skipped(format!("{} is missing", p.display()));
            return out;
        }
    }
    out.push(Component {
        label: "Python (componentize-py, tests/wasm/probe)",
        source: "probe",
        path: probe,
        tool: "echo",
        arguments: json!({"text": "ping"}),
        expect: "ping",
        spins: true,
    });
    out.push(Component {
        label: "JavaScript (componentize-js, the units example)",
        source: "unitsjs",
        path: units_js,
        tool: "convert",
        arguments: json!({"value": 1, "from": "m", "to": "m"}),
        expect: "1",
        spins: false,
    });
    out
}

fn absolute(p: PathBuf) -> PathBuf {
    std::path::absolute(&p).unwrap_or(p)
}

/// `[sources.NAME]` for `c`.
fn source(c: &Component, extra: Value) -> Value {
    let mut s = json!({"kind": "wasm", "path": c.path});
    if let (Some(s), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
        s.extend(extra.clone());
    }
    s
}

/// `wf serve` on `state` (kept as is: a warm cache stays warm).
fn wf_serve(env: &Env, name: &str, sources: Value, state: &Path) -> anyhow::Result<Command> {
    let config = env.scratch.join(format!("{name}.json"));
    let doc = json!({"sources": sources, "server": {"discovery_timeout_ms": DISCOVERY_MS}});
    std::fs::write(&config, serde_json::to_vec_pretty(&doc)?)
        .with_context(|| format!("cannot write {}", config.display()))?;
    let mut cmd = Command::new(&env.wf);
    cmd.arg("serve")
        .arg("--config")
        .arg(&config)
        .arg("--state-dir")
        .arg(state)
        .env("WF_LOG", "warn");
    Ok(cmd)
}

/// One call; the reply's text, or why it failed.
async fn call(peer: &Peer<RoleClient>, tool: &str, arguments: &Value) -> anyhow::Result<String> {
    let args: Map<String, Value> = arguments.as_object().cloned().unwrap_or_default();
    let r = tokio::time::timeout(
        CALL_TIMEOUT,
        peer.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args)),
    )
    .await
    .with_context(|| format!("{tool}: no answer within {} s", CALL_TIMEOUT.as_secs()))?
    .with_context(|| format!("calling {tool}"))?;
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    let structured = r
        .structured_content
        .map(|v| v.to_string())
        .unwrap_or_default();
    if r.is_error == Some(true) {
        bail!("{tool} answered an error: {text}");
    }
    Ok(format!("{text}{structured}"))
}

async fn call_expect(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: &Value,
    expect: &str,
) -> anyhow::Result<()> {
    let text = call(peer, tool, arguments).await?;
    if !text.contains(expect) {
        bail!("{tool} answered {text:?}, not {expect:?}");
    }
    Ok(())
}

/// Lists tools until every one of `names` is there (progress every 10 s).
async fn wait_listed(peer: &Peer<RoleClient>, names: &[String]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut said = Instant::now();
    loop {
        let listed = tokio::time::timeout(CALL_TIMEOUT, peer.list_all_tools())
            .await
            .context("tools/list: no answer within 30 s")?
            .context("tools/list")?;
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| !listed.iter().any(|t| t.name.as_ref() == n.as_str()))
            .collect();
        if missing.is_empty() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > READY_WITHIN {
            let have: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
            bail!(
                "after {} s, tools/list still lacks {missing:?} (it has: {})",
                READY_WITHIN.as_secs(),
                have.join(", ")
            );
        }
        if said.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "wf-bench: wasm: waiting for {missing:?} ({} s so far; discovery compiles each component)",
                started.elapsed().as_secs()
            );
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Warm {
    native: Vec<Duration>,
    rows: Vec<Vec<Duration>>,
    listed_after: Duration,
}

async fn warm_calls(env: &Env, components: &[Component]) -> anyhow::Result<Warm> {
    let mut sources = Map::new();
    for c in components {
        sources.insert(c.source.into(), source(c, json!({})));
    }
    let state = env.scratch.join("state-wasm-warm");
    let _ = std::fs::remove_dir_all(&state);
    let cmd = wf_serve(env, "wasm-warm", Value::Object(sources), &state)?;
    let log = env.scratch.join("wasm-warm.stderr");
    eprintln!(
        "wf-bench: wasm: starting wf with {} component(s)",
        components.len()
    );
    let mut wf = McpProc::start("wf (wasm)", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let result = async {
        let peer = wf.peer();
        let mut names: Vec<String> = components.iter().map(Component::tool_name).collect();
        names.push(NATIVE.into());
        let listed_after = wait_listed(&peer, &names).await?;
        let (rounds, per) = if env.quick { (5, 20) } else { (10, 200) };
        eprintln!("wf-bench: wasm: warm calls, {rounds} rounds of {per} per tool");
        // Warm-up: the first calls of each.
        for _ in 0..20 {
            call_expect(&peer, NATIVE, &native_arguments(), "ping").await?;
            for c in components {
                call_expect(&peer, &c.tool_name(), &c.arguments, c.expect).await?;
            }
        }
        let mut native = Vec::new();
        let mut rows = vec![Vec::new(); components.len()];
        for _ in 0..rounds {
            for _ in 0..per {
                let t = Instant::now();
                call_expect(&peer, NATIVE, &native_arguments(), "ping").await?;
                native.push(t.elapsed());
            }
            for (c, row) in components.iter().zip(rows.iter_mut()) {
                let name = c.tool_name();
                for _ in 0..per {
                    let t = Instant::now();
                    call_expect(&peer, &name, &c.arguments, c.expect).await?;
                    row.push(t.elapsed());
                }
            }
        }
        anyhow::Ok(Warm {
            native,
            rows,
            listed_after,
        })
    }
    .await;
    wf.stop().await;
    result.with_context(|| format!("wf's stderr: {}", log.display()))
}

fn print_warm(env: &Env, components: &[Component], w: &Warm) {
    println!(
        "`wf serve` (stdio) with the components below as `kind = \"wasm\"` sources, one client \
         session; each tool called in turn, in interleaved rounds ({} calls each). The native row \
         is the std plugin's `{NATIVE}`; a component's row is its trivial tool (`echo`, or the \
         units example's `convert` from m to m), run in a fresh instance per call. \
         All tools were listed {:.1} s after the handshake (discovery compiles each component; \
         the first time, no cache).{}\n",
        w.native.len(),
        w.listed_after.as_secs_f64(),
        if env.quick {
            " A `--quick` run: indicative only."
        } else {
            ""
        }
    );
    println!(
        "| tool | component | p50 | p99 | p50 added over native | over the smallest (the guest's own) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let n50 = percentile(&w.native, 0.5);
    println!(
        "| native `{NATIVE}` | — | {:.0} µs | {:.0} µs | — | — |",
        us(n50),
        us(percentile(&w.native, 0.99))
    );
    let mut smallest_added = None;
    for (c, row) in components.iter().zip(&w.rows) {
        let p50 = percentile(row, 0.5);
        let added = us(p50) - us(n50);
        let first = *smallest_added.get_or_insert(added);
        let own = if c.path == components[0].path {
            "—".to_string()
        } else {
            format!("{:+.0} µs", added - first)
        };
        println!(
            "| {} `{}` | {} KiB | {:.0} µs | {:.0} µs | {:+.0} µs | {own} |",
            c.label,
            c.tool_name(),
            c.size_kib(),
            us(p50),
            us(percentile(row, 0.99)),
            added
        );
    }
    if let Some(added) = smallest_added {
        println!(
            "\nAdded by a component (the smallest, echo-min: one core module, no WASI imports): \
             {added:+.0} µs (target ≤ +{WARM_BUDGET_US:.0} µs: {}). The other rows, less the \
             smallest's, are their guest's own cost: for the Rust test guest, linking Rust std's \
             WASI 0.2 imports and `wasi:http` and instantiating the adapter's extra core modules \
             in each fresh instance; for Python and JavaScript, also their interpreter's start.\n",
            verdict(added <= WARM_BUDGET_US)
        );
    }
}

/// Calls `tool` until it answers (a call is refused until discovery lists
/// it: tried again every 2 ms); the time since `started`.
async fn until_answered(
    peer: &Peer<RoleClient>,
    started: Instant,
    label: &str,
    tool: &str,
    arguments: &Value,
    expect: &str,
) -> anyhow::Result<Duration> {
    let mut said = Instant::now();
    loop {
        match call(peer, tool, arguments).await {
            Ok(text) if text.contains(expect) => return Ok(started.elapsed()),
            Ok(text) => bail!("{tool} answered {text:?}, not {expect:?}"),
            Err(e) if started.elapsed() > READY_WITHIN => {
                bail!(
                    "{tool}: no answer after {} s: {e:#}",
                    READY_WITHIN.as_secs()
                )
            }
            Err(e) => {
                if said.elapsed() > Duration::from_secs(10) {
                    eprintln!("wf-bench: wasm: {label}: still waiting for {tool} ({e:#})");
                    said = Instant::now();
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
}

/// Spawns `wf serve` with `c` alone: from spawn to the native tool's first
/// answer, and to the component's (the same process: the difference is
/// what the component adds).
async fn first_call(
    env: &Env,
    c: &Component,
    cache: bool,
    state: &Path,
) -> anyhow::Result<(Duration, Duration)> {
    let mut sources = Map::new();
    sources.insert(c.source.into(), source(c, json!({"compiled_cache": cache})));
    let name = "wasm-cold";
    let cmd = wf_serve(env, name, Value::Object(sources), state)?;
    let log = env.scratch.join(format!("{name}.stderr"));
    let started = Instant::now();
    let mut wf = McpProc::start(name, cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let result = async {
        let peer = wf.peer();
        let native =
            until_answered(&peer, started, name, NATIVE, &native_arguments(), "ping").await?;
        let tool = c.tool_name();
        let component = until_answered(&peer, started, name, &tool, &c.arguments, c.expect).await?;
        anyhow::Ok((native, component))
    }
    .await;
    wf.stop().await;
    result.with_context(|| format!("wf's stderr: {}", log.display()))
}

async fn cold_starts(env: &Env, components: &[Component]) -> anyhow::Result<()> {
    let reps = if env.quick { 1 } else { 3 };
    /// Per run: (the native tool's first answer, the component's).
    #[derive(Default)]
    struct Row {
        off: Vec<(Duration, Duration)>,
        empty: Vec<(Duration, Duration)>,
        warm: Vec<(Duration, Duration)>,
    }
    let mut rows: Vec<Row> = components.iter().map(|_| Row::default()).collect();
    for rep in 0..reps {
        eprintln!("wf-bench: wasm: cold start, run {} of {reps}", rep + 1);
        for (c, row) in components.iter().zip(rows.iter_mut()) {
            let state = env.scratch.join(format!("state-wasm-{}", c.source));
            let _ = std::fs::remove_dir_all(&state);
            row.off.push(first_call(env, c, false, &state).await?);
            let _ = std::fs::remove_dir_all(&state);
            row.empty.push(first_call(env, c, true, &state).await?);
            // The same state directory: its cache holds the compiled code.
            row.warm.push(first_call(env, c, true, &state).await?);
            let _ = std::fs::remove_dir_all(&state);
        }
    }
    let component =
        |runs: &[(Duration, Duration)]| median(&runs.iter().map(|r| r.1).collect::<Vec<_>>());
    let native: Vec<Duration> = rows
        .iter()
        .flat_map(|r| r.off.iter().chain(&r.empty).chain(&r.warm).map(|x| x.0))
        .collect();
    println!("### Cold start: spawning wf to a component's first answer\n");
    println!(
        "`wf serve` spawned with one component: the time to the first successful call of the \
         component's tool, with the compiled-code cache off, on but empty (a fresh state \
         directory), and on and warm (the same state directory again). In the same process the \
         std plugin's `{NATIVE}` is called first (calls refused until discovery lists a tool are \
         retried every 2 ms): its first answer came {:.0} ms after the spawn (median of all runs), \
         and the component's, less that, is what the component adds. Medians of {reps} run(s).\n",
        ms(median(&native))
    );
    println!(
        "| component | cache off | cache on, empty | cache on, warm | warm: added over native |"
    );
    println!("|---|---:|---:|---:|---:|");
    let mut smallest = None;
    for (c, row) in components.iter().zip(&rows) {
        let added: Vec<f64> = row.warm.iter().map(|(n, w)| ms(*w) - ms(*n)).collect();
        let added = crate::stats::median_f64(&added);
        smallest.get_or_insert(added);
        println!(
            "| {} ({} KiB) | {:.0} ms | {:.0} ms | {:.0} ms | {:+.0} ms |",
            c.label,
            c.size_kib(),
            ms(component(&row.off)),
            ms(component(&row.empty)),
            ms(component(&row.warm)),
            added
        );
    }
    if let Some(added) = smallest {
        println!(
            "\nThe smallest component's cold start with a warm cache adds {added:+.0} ms \
             (target ≤ +{COLD_BUDGET_MS:.0} ms: {}).\n",
            verdict(added <= COLD_BUDGET_MS)
        );
    }
    Ok(())
}

/// RSS of wf idle, then with `INSTANCES` spinning instances of each component.
async fn memory(env: &Env, components: &[Component]) -> anyhow::Result<()> {
    let spinning: Vec<&Component> = components.iter().filter(|c| c.spins).collect();
    let mut sources = Map::new();
    for c in &spinning {
        sources.insert(
            c.source.into(),
            source(
                c,
                json!({"timeout_ms": SPIN_MS, "max_instances": INSTANCES}),
            ),
        );
    }
    let state = env.scratch.join("state-wasm-memory");
    let _ = std::fs::remove_dir_all(&state);
    let cmd = wf_serve(env, "wasm-memory", Value::Object(sources), &state)?;
    let log = env.scratch.join("wasm-memory.stderr");
    eprintln!("wf-bench: wasm: memory per instance");
    let mut wf = McpProc::start("wf (wasm memory)", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let pid = wf.pid;
    let result = async {
        let peer = wf.peer();
        let names: Vec<String> = spinning.iter().map(|c| c.tool_name()).collect();
        wait_listed(&peer, &names).await?;
        let mut rows = Vec::new();
        for c in &spinning {
            for _ in 0..20 {
                call_expect(&peer, &c.tool_name(), &c.arguments, c.expect).await?;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let idle = rss_kib(pid).context("wf's RSS")?.0;
            let spin = format!("{}__spin", c.source);
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..INSTANCES {
                let peer = peer.clone();
                let spin = spin.clone();
                calls.spawn(async move { call(&peer, &spin, &json!({})).await });
            }
            // Sample while every instance is alive: between 300 ms and 90 % of the deadline.
            let t0 = Instant::now();
            let mut peak = idle;
            while t0.elapsed() < Duration::from_millis(SPIN_MS * 9 / 10) {
                if t0.elapsed() > Duration::from_millis(300) {
                    peak = peak.max(rss_kib(pid).map_or(0, |r| r.0));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut stopped = 0;
            let deadline = Instant::now() + Duration::from_millis(SPIN_MS) + CALL_TIMEOUT;
            while let Ok(Some(r)) =
                tokio::time::timeout_at(deadline.into(), calls.join_next()).await
            {
                match r.context("a spin call's task")? {
                    Err(e) if format!("{e:#}").contains("deadline") => stopped += 1,
                    Err(e) => bail!("{spin}: {e:#}"),
                    Ok(text) => bail!("{spin} returned {text:?}; it should loop until stopped"),
                }
            }
            if stopped != INSTANCES {
                bail!("{stopped} of {INSTANCES} {spin} calls were stopped at their deadline");
            }
            rows.push((c, idle, peak));
        }
        anyhow::Ok(rows)
    }
    .await;
    wf.stop().await;
    let rows = result.with_context(|| format!("wf's stderr: {}", log.display()))?;
    println!("### Memory per instance\n");
    println!(
        "wf's resident memory (VmRSS) idle, after 20 calls of the component, against its peak \
         while {INSTANCES} calls of the component's `spin` tool (a loop the CPU deadline stops \
         after {SPIN_MS} ms) hold {INSTANCES} instances at once (max_instances = {INSTANCES}); \
         the difference divided by {INSTANCES} is the resident memory one instance adds: the \
         linear memory it touched and its store, not the compiled code, which every instance \
         shares. echo-min and the JavaScript units example have no such tool and are not measured.\n"
    );
    println!("| component | wf idle | {INSTANCES} instances | per instance |");
    println!("|---|---:|---:|---:|");
    for (c, idle, peak) in rows {
        println!(
            "| {} | {:.1} MiB | {:.1} MiB | {:.2} MiB |",
            c.label,
            idle as f64 / 1024.0,
            peak as f64 / 1024.0,
            peak.saturating_sub(idle) as f64 / 1024.0 / INSTANCES as f64
        );
    }
    println!();
    Ok(())
}
