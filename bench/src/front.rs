//! The HTTP front: echo through `wf serve --http` to a stdio upstream, against
//! the same upstream over stdio directly, in interleaved rounds. Covers a
//! 2025-11-25 client on its session (rmcp answers it with an event stream)
//! and a stateless 2026-07-28 client (a JSON body when the answer is the
//! only message); with `--compare`, the other build's answers too.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::proc::{Cpu, McpProc, echo};
use crate::stats::{delta_us, percentile, us, verdict};
use crate::web::{Generation, HttpWf, WebClient};
use crate::{Env, HANDSHAKE_TIMEOUT};

/// Target: the HTTP front adds at most this much to the direct stdio p50.
const P50_BUDGET_US: f64 = 300.0;

enum Path {
    Direct(Box<McpProc>),
    /// A stdio front (`wf serve`, a relay) and the echo tool's name behind it.
    Stdio(Box<McpProc>, &'static str),
    /// A client and the name the echo tool has behind that front.
    Web(WebClient, &'static str),
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: http front");
    let (warmup, batch, rounds) = if env.quick {
        (50, 50, 4)
    } else {
        (300, 200, 15)
    };
    let http = reqwest::Client::new();
    let mut names = vec!["direct (stdio, rmcp client)".to_string()];
    let mut paths = vec![Path::Direct(Box::new(
        McpProc::start(
            "fixture (direct)",
            env.fixture_command(0),
            None,
            HANDSHAKE_TIMEOUT,
        )
        .await?,
    ))];
    // The process whose CPU a path's calls are charged to: the front (wf or
    // the peer), none for direct.
    let mut fronts: Vec<Option<u32>> = vec![None];
    // wf's stdio front on the same upstream: what the HTTP front adds is the
    // difference between its rows and this one.
    let (cmd, log) = env.wf_command("front-stdio", json!({"fx": env.fixture_source(0)}))?;
    let stdio = McpProc::start("wf (stdio)", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    names.push("wf (stdio front, rmcp client)".to_string());
    fronts.push(Some(stdio.pid));
    paths.push(Path::Stdio(Box::new(stdio), "fx__echo"));
    let mut builds = vec![("wf".to_string(), env.wf.clone())];
    if let Some(other) = &env.compare {
        builds.push((format!("wf `{}`", other.display()), other.clone()));
    }
    let mut servers = Vec::new();
    for (i, (name, binary)) in builds.iter().enumerate() {
        // The default (a lone stateless answer as JSON), then always streaming.
        for (j, json_response) in [true, false].into_iter().enumerate() {
            if !json_response && i > 0 {
                continue;
            }
            let (cmd, log) = env.wf_command_with_server(
                binary,
                &format!("front-{i}-{j}"),
                json!({"fx": env.fixture_source(0)}),
                // Only set when not the default: an older --compare build may not know it.
                if json_response {
                    json!({})
                } else {
                    json!({"http_json_response": false})
                },
            )?;
            let server = HttpWf::start(cmd, &log).await?;
            let clients: &[(Generation, &str)] = if json_response {
                &[
                    (Generation::Sessions2025, "2025-11-25 client, session"),
                    (Generation::Stateless2026, "2026-07-28 client, stateless"),
                ]
            } else {
                &[(
                    Generation::Stateless2026,
                    "2026-07-28 client, stateless, `http_json_response = false`",
                )]
            };
            let prefix = format!("{name} --http");
            for (label, path) in web_paths(&http, &server, &prefix, clients, "fx__echo").await? {
                names.push(label);
                fronts.push(Some(server.pid));
                paths.push(path);
            }
            servers.push(server);
        }
    }
    // --peers: FastMCP's proxy with its streamable HTTP front, same upstream.
    let mut missing_peers = Vec::new();
    if let Some(python) = &env.fastmcp_python {
        let name = "FastMCP proxy --http, 2025-11-25 client, session";
        let mut cmd = tokio::process::Command::new(python);
        cmd.arg(crate::peers::fastmcp_script())
            .arg(&env.fixture)
            .args(env.fixture_command(0).as_std().get_args());
        let log = env.scratch.join("front-fastmcp.stderr");
        let peer = async {
            let server = HttpWf::start(cmd, &log).await?;
            let client = WebClient::connect(&http, &server.url, Generation::Sessions2025).await?;
            anyhow::Ok((server, client))
        };
        match peer.await {
            Ok((server, client)) => {
                names.push(name.to_string());
                fronts.push(Some(server.pid));
                paths.push(Path::Web(client, "echo"));
                servers.push(server);
            }
            Err(e) => missing_peers.push(format!("{name} (`{}`): {e:#}", python.display())),
        }
    }

    // Reference rows, not wf: the lean stdio relay, and rmcp's streamable HTTP
    // server and the least an HTTP front can do in front of the same relay
    // (bench/src/relay.rs). They price an HTTP hop with nothing of wf's in it.
    let relay_cmd = |mode: &str| -> anyhow::Result<tokio::process::Command> {
        let mut cmd = tokio::process::Command::new(std::env::current_exe()?);
        cmd.args(["--relay", mode, "--"])
            .arg(&env.fixture)
            .args(env.fixture_command(0).as_std().get_args());
        Ok(cmd)
    };
    let relay = McpProc::start(
        "relay (stdio_pipes)",
        relay_cmd("pipes")?,
        None,
        HANDSHAKE_TIMEOUT,
    )
    .await?;
    names.push("relay (stdio_pipes), rmcp client".to_string());
    fronts.push(Some(relay.pid));
    paths.push(Path::Stdio(Box::new(relay), "echo"));
    let relays: [(&str, &[(Generation, &str)]); 2] = [
        (
            "http",
            &[
                (Generation::Sessions2025, "2025-11-25 client, session"),
                (Generation::Stateless2026, "2026-07-28 client, stateless"),
            ],
        ),
        (
            "http-min",
            &[(Generation::Stateless2026, "2026-07-28 client")],
        ),
    ];
    for (mode, clients) in relays {
        let log = env.scratch.join(format!("front-relay-{mode}.stderr"));
        let server = HttpWf::start_with(relay_cmd(mode)?, &log, |cmd, addr| {
            cmd.env(crate::relay::LISTEN_ENV, addr);
        })
        .await?;
        let prefix = format!("relay --{mode}");
        for (label, path) in web_paths(&http, &server, &prefix, clients, "echo").await? {
            names.push(label);
            fronts.push(Some(server.pid));
            paths.push(path);
        }
        servers.push(server);
    }

    let n = paths.len();
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut cpu = vec![Cpu::default(); n];
    for (k, p) in paths.iter_mut().enumerate() {
        for i in 0..warmup {
            call(p, &format!("wf-bench http warm-up {k} {i:06}")).await?;
        }
    }
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..n).collect();
        order.rotate_left(round % n);
        for k in order {
            let before = fronts[k].map(Cpu::of);
            for i in 0..batch {
                let msg = format!("wf-bench http {round:03} {i:06}");
                let t = Instant::now();
                call(&mut paths[k], &msg).await?;
                lat[k].push(t.elapsed());
            }
            if let (Some(pid), Some(before)) = (fronts[k], before) {
                cpu[k].add(Cpu::of(pid).since(before));
            }
        }
    }

    println!("## HTTP front: echo through `wf serve --http` versus stdio direct\n");
    println!(
        "Concurrency 1, the Rust fixture upstream (stdio), one client per path; {rounds} rounds of \
         {batch} calls per path, the paths taking turns ({} calls per path after {warmup} warm-up \
         calls). Raw JSON-RPC over one keep-alive HTTP/1.1 connection per client.\n",
        rounds * batch
    );
    println!(
        "Front CPU and wake-ups: the on-CPU time of the front process (wf, or the peer) per call, \
         summed over its threads from /proc/PID/task/*/schedstat around each batch, and how often \
         its threads were put on a CPU per call.\n"
    );
    println!(
        "| path | p50 | p50 added over direct | p99 | front CPU µs/call | front wake-ups/call | answers as JSON / as SSE | target: +≤ {P50_BUDGET_US:.0} µs |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---|");
    let d50 = percentile(&lat[0], 0.5);
    for (k, name) in names.iter().enumerate() {
        let p50 = percentile(&lat[k], 0.5);
        let (bodies, target) = match &paths[k] {
            Path::Direct(_) | Path::Stdio(..) => ("–".to_string(), "–".to_string()),
            // The relays are references, not judged.
            Path::Web(c, _) if name.starts_with("relay") => {
                (format!("{} / {}", c.bodies.0, c.bodies.1), "–".to_string())
            }
            Path::Web(c, _) => (
                format!("{} / {}", c.bodies.0, c.bodies.1),
                verdict(us(p50) - us(d50) <= P50_BUDGET_US).to_string(),
            ),
        };
        let calls = lat[k].len().max(1) as f64;
        let (front_cpu, wakeups) = match fronts[k] {
            Some(_) => (
                format!("{:.0}", cpu[k].ns as f64 / 1e3 / calls),
                format!("{:.1}", cpu[k].switches as f64 / calls),
            ),
            None => ("–".to_string(), "–".to_string()),
        };
        println!(
            "| {name} | {:.0} µs | {} µs | {:.0} µs | {front_cpu} | {wakeups} | {bodies} | {target} |",
            us(p50),
            delta_us(p50, d50),
            us(percentile(&lat[k], 0.99)),
        );
    }
    println!();
    // The peer's added p50 against wf's, for the same client (2025 session).
    if let (Some(f), Some(w)) = (
        names.iter().position(|n| n.starts_with("FastMCP")),
        names.iter().position(|n| n.starts_with("wf --http, 2025")),
    ) {
        let added = |k: usize| us(percentile(&lat[k], 0.5)) - us(d50);
        let ratio = added(f) / added(w).max(1.0);
        println!(
            "FastMCP's p50 added / wf's, 2025-11-25 session client: {ratio:.1}× (target ≥ 5×: {})\n",
            verdict(ratio >= 5.0)
        );
    }
    for m in &missing_peers {
        println!("Not measured: {m}\n");
    }
    for p in &mut paths {
        if let Path::Direct(d) | Path::Stdio(d, _) = p {
            d.stop().await;
        }
    }
    for mut s in servers {
        s.stop().await;
    }
    Ok(())
}

/// A connected client of `server` per `(generation, label)`, its path named
/// `prefix, label`; `tool` is the echo tool's name behind that front.
async fn web_paths(
    http: &reqwest::Client,
    server: &HttpWf,
    prefix: &str,
    clients: &[(Generation, &str)],
    tool: &'static str,
) -> anyhow::Result<Vec<(String, Path)>> {
    let mut out = Vec::with_capacity(clients.len());
    for &(generation, label) in clients {
        let client = WebClient::connect(http, &server.url, generation).await?;
        out.push((format!("{prefix}, {label}"), Path::Web(client, tool)));
    }
    Ok(out)
}

async fn call(path: &mut Path, msg: &str) -> anyhow::Result<()> {
    match path {
        Path::Direct(p) => echo(&p.peer(), "echo", msg).await,
        Path::Stdio(p, tool) => echo(&p.peer(), tool, msg).await,
        Path::Web(c, tool) => c.echo(tool, msg).await,
    }
}
