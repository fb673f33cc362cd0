//! The `wf` command line.

mod audit;
mod auth;
mod check;
mod check_calls;
pub mod log_filter;
mod log_format;
mod plugins;
mod policy;
mod run;
mod serve;
mod sources;
mod store;
mod tools;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::app::StartOptions;
use crate::config::MAX_WORKERS;

const DEFAULT_LOG: &str = crate::app::DEFAULT_LOG_FILTER;

#[derive(Parser, Debug)]
#[command(
    name = "wf",
    version,
    about = "Serves the capabilities of native source plugins to MCP hosts"
)]
pub struct Cli {
    /// Log filter for stderr, also handed to plugins: a level (error, warn, info, debug, trace)
    /// optionally followed by target=level pairs. WF_LOG also works.
    #[arg(long, global = true, env = "WF_LOG", default_value = DEFAULT_LOG)]
    pub log_level: String,
    /// Allow debug/trace logging of rmcp, which logs whole MCP messages (tool
    /// arguments and results). Without it, rmcp is held at info whatever
    /// --log-level says.
    #[arg(long, global = true, env = "WF_LOG_PAYLOADS")]
    pub log_payloads: bool,
    /// stderr log lines as text or JSON (one object per line). WF_LOG_FORMAT also works.
    #[arg(
        long,
        global = true,
        env = "WF_LOG_FORMAT",
        value_enum,
        default_value_t
    )]
    pub log_format: log_format::LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve MCP over stdio (default) or streamable HTTP.
    Serve(ServeArgs),
    /// List loaded plugins and refused plugin files.
    Plugins(PluginsArgs),
    /// Validate the config and the plugins, and try the plugins' default
    /// sources; exit non-zero on any problem (`--deep`: every source).
    Check(CheckArgs),
    /// Run a workflow file with live progress, then print its outputs.
    Run(RunArgs),
    /// List recent workflow runs.
    Runs(RunsArgs),
    /// List the configured sources (and plugins' default sources).
    Sources(SourcesArgs),
    /// Change a source in the config file (a running wf serve applies it).
    Source {
        #[command(subcommand)]
        command: SourceCommand,
    },
    /// Log in to upstream MCP servers behind OAuth (`auth.oauth` sources).
    Auth {
        #[command(subcommand)]
        command: auth::AuthCommand,
    },
    /// The state store: `wf store migrate`.
    Store {
        #[command(subcommand)]
        command: store::StoreCommand,
    },
    /// Policies: `wf policy test FILE REQUESTS` decides example requests.
    Policy {
        #[command(subcommand)]
        command: policy::PolicyCommand,
    },
    /// Tool pins: `wf tools pin [SOURCE...]`, `wf tools diff`, `wf tools approve NAME...`.
    Tools {
        #[command(subcommand)]
        command: tools::ToolsCommand,
    },
    /// The audit trail: who called what, when, with what result and why it
    /// was allowed, filtered (--since, --principal, --capability, --outcome…).
    Audit(audit::AuditArgs),
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Also try every configured source: create it in a throwaway state
    /// directory and discover it once (bounded by server.discovery_timeout_ms),
    /// reporting plugin config errors, missing commands, unreachable URLs
    /// and capabilities left out. Starts configured upstream servers.
    #[arg(long)]
    pub deep: bool,
    /// Also call each tool of each `wasm` source once (implies --deep), with
    /// arguments made from its input schema, each bounded by
    /// server.discovery_timeout_ms: a trap, a limit hit or a result that does
    /// not match its outputSchema is a problem. Only WebAssembly components
    /// are called (sandboxed); a tool can still act on what it was granted.
    #[arg(long)]
    pub call: bool,
}

#[derive(Args, Debug)]
pub struct SourcesArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A source's table, as `wf source add` and `update` take it.
#[derive(Args, Debug)]
pub struct SourceTableArgs {
    /// The source's table as a JSON object.
    #[arg(long)]
    pub json: Option<String>,
    /// A setting as key=value (JSON values allowed); repeatable.
    #[arg(long)]
    pub set: Vec<String>,
    #[arg(long)]
    pub kind: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum SourceCommand {
    /// Add a source: `wf source add fs --config wf.toml --set command=npx --set 'args=["-y","x"]'`.
    Add {
        name: String,
        #[command(flatten)]
        table: SourceTableArgs,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Replace a source's table.
    Update {
        name: String,
        #[command(flatten)]
        table: SourceTableArgs,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Remove a source.
    Remove {
        name: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Enable a source.
    Enable {
        name: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Disable a source.
    Disable {
        name: String,
        #[command(flatten)]
        common: CommonArgs,
    },
}

impl SourceCommand {
    fn common(&self) -> CommonArgs {
        match self {
            SourceCommand::Add { common, .. }
            | SourceCommand::Update { common, .. }
            | SourceCommand::Remove { common, .. }
            | SourceCommand::Enable { common, .. }
            | SourceCommand::Disable { common, .. } => common.clone(),
        }
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The workflow document (JSON).
    pub file: PathBuf,
    /// A workflow input as key=value (the value is parsed as JSON when it can be); repeatable.
    #[arg(long = "input", value_name = "KEY=VALUE")]
    pub input: Vec<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct RunsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// How many runs to show.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Only runs with this status (running, succeeded, failed, cancelled, interrupted).
    #[arg(long)]
    pub status: Option<crate::status::RunStatus>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// Config file (.toml or .json). Without it, the embedded default: no
    /// configured sources; the plugins' default sources (wf.std and others) are served.
    #[arg(long, env = "WF_CONFIG")]
    pub config: Option<PathBuf>,
    /// An extra plugin folder (repeatable).
    #[arg(long = "plugins", value_name = "DIR")]
    pub plugins: Vec<PathBuf>,
    /// Where wf keeps its state (default: $XDG_STATE_HOME/wf).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Load plugins even from folders or files that other users can write or
    /// that belong to another user (refused by default: loading runs code).
    #[arg(long)]
    pub allow_insecure_plugin_dir: bool,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Serve streamable HTTP on ADDR (e.g. 127.0.0.1:8765) at /mcp instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Over stdio, serve endpoint NAME (`[endpoints.NAME]`) instead of the
    /// whole surface. Over HTTP every endpoint is at /mcp/NAME.
    #[arg(long, value_name = "NAME")]
    pub endpoint: Option<String>,
    /// This replica's id, recorded with its runs and their leases (several
    /// replicas on one `[store] url`); default `hostname:pid:start`.
    #[arg(long, value_name = "ID", env = "WF_REPLICA_ID")]
    pub replica_id: Option<String>,
    /// Threads that run wf's own work (plugins run theirs); overrides
    /// `[server] workers`. Default: 1 over stdio, whose one client gains
    /// nothing from more while every hand-off of a call between threads
    /// costs a wake-up; one per CPU but one over HTTP (--http or
    /// `[server] http`), at least 1.
    #[arg(long, value_name = "N", env = "WF_WORKERS",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_WORKERS)))]
    pub workers: Option<u16>,
}

impl ServeArgs {
    /// The runtime's worker threads, or `None` for one per CPU but one
    /// (`main` asks `available_parallelism`).
    pub fn worker_threads(&self) -> Option<usize> {
        if let Some(n) = self.workers {
            return Some(usize::from(n));
        }
        if self.http.is_some() {
            return None;
        }
        // `[server] workers`, and `[server] http` (which serves HTTP too).
        // The runtime starts before the config is loaded for real, so it is
        // read here once more; a file that does not load, or a `workers`
        // out of range, fails at start right after.
        let Ok(c) = crate::config::LoadedConfig::open(self.common.config.as_deref()) else {
            return None;
        };
        match (c.config.server.workers, &c.config.server.http) {
            (Some(n), _) => (1..=MAX_WORKERS).contains(&n).then_some(usize::from(n)),
            (None, None) => Some(1),
            (None, Some(_)) => None,
        }
    }
}

#[derive(Args, Debug)]
pub struct PluginsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Exit 0 even when files were refused (the default exit is 1 then).
    #[arg(long)]
    pub allow_refused: bool,
    /// Pin a plugin file (repeatable): record its sha256, name and version
    /// in plugins.lock beside the config; a pinned file that changes is
    /// refused. The file must be in a plugin folder and load.
    #[arg(long, value_name = "FILE")]
    pub pin: Vec<PathBuf>,
}

impl CommonArgs {
    pub fn start_options(&self, log_level: &str) -> StartOptions {
        StartOptions {
            config: self.config.clone(),
            plugin_dirs: self.plugins.clone(),
            state_dir: self.state_dir.clone(),
            log_level: log_level.into(),
            allow_insecure_plugin_dir: self.allow_insecure_plugin_dir,
            repin: Vec::new(),
            replica_id: None,
        }
    }
}

fn init_logging(filter: &str, format: log_format::LogFormat) {
    // stdout is the MCP stdio channel: logs go to stderr only.
    log_format::init(filter, format);
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    let mut cli = Cli::parse();
    // `wf check` reports every problem itself; the default log would repeat them.
    if matches!(cli.command, Command::Check(_)) && cli.log_level == DEFAULT_LOG {
        init_logging("error", cli.log_format);
    } else if !cli.log_payloads {
        let (filter, lowered) = log_filter::without_payloads(&cli.log_level);
        init_logging(&filter, cli.log_format);
        if !lowered.is_empty() {
            tracing::warn!(
                "log filter {} lowered to info: those logs carry whole MCP messages; add --log-payloads to keep them",
                lowered.join(",")
            );
        }
        // Plugins get the same filter.
        cli.log_level = filter;
    } else {
        init_logging(&cli.log_level, cli.log_format);
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    // Multi-threaded even with one worker: blocking waits (`block_in_place`)
    // stay possible.
    if let Command::Serve(a) = &cli.command {
        // Over HTTP, one worker per CPU but one: every upstream call also
        // runs on the mcp plugin's I/O thread (and the upstream's own), and
        // a worker per CPU made calls hop between workers (docs/manual/
        // commands.md, "Worker threads").
        let workers = a.worker_threads().unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
        });
        builder.worker_threads(workers);
        // tokio starts the workers before any blocking thread: they get a
        // name of their own, so `/proc` (and a profile) tells them apart.
        let started = std::sync::atomic::AtomicUsize::new(0);
        builder.thread_name_fn(move || {
            let n = started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n < workers {
                "wf-worker"
            } else {
                "wf-blocking"
            }
            .to_string()
        });
    }
    let rt = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("wf: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Serve(a) => serve::run(a, &cli.log_level).await,
            Command::Plugins(a) => plugins::run(a, &cli.log_level).await,
            Command::Check(a) => check::run(a, &cli.log_level).await,
            Command::Run(a) => run::run(a, &cli.log_level).await,
            Command::Runs(a) => run::runs(a, &cli.log_level).await,
            Command::Sources(a) => sources::list(a, &cli.log_level),
            Command::Source { command } => {
                let common = command.common();
                sources::edit(command, &common)
            }
            Command::Auth { command } => auth::run(command, &cli.log_level).await,
            Command::Store { command } => store::run(command, &cli.log_level).await,
            Command::Tools { command } => tools::run(command, &cli.log_level).await,
            Command::Policy { command } => policy::run(command, &cli.log_level).await,
            Command::Audit(args) => audit::run(args, &cli.log_level).await,
        }
    });
    // Plugin runtimes and upstream clients may hold threads; do not wait for them.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wf: {e:#}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers(args: &[&str]) -> Option<usize> {
        let cli = Cli::try_parse_from(args).expect("parses");
        let Command::Serve(a) = cli.command else {
            panic!("not serve")
        };
        a.worker_threads()
    }

    #[test]
    fn stdio_runs_on_one_worker_and_http_on_the_default() {
        assert_eq!(workers(&["wf", "serve"]), Some(1));
        assert_eq!(workers(&["wf", "serve", "--http", "127.0.0.1:0"]), None);
        assert_eq!(workers(&["wf", "serve", "--workers", "3"]), Some(3));
        let http = "127.0.0.1:0";
        assert_eq!(
            workers(&["wf", "serve", "--http", http, "--workers", "2"]),
            Some(2)
        );
        assert!(Cli::try_parse_from(["wf", "serve", "--workers", "0"]).is_err());
    }

    #[test]
    fn a_config_that_serves_http_keeps_the_default() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("wf.toml");
        std::fs::write(&file, "[server]\nhttp = \"127.0.0.1:0\"\n").expect("write");
        let file = file.to_str().expect("utf-8");
        assert_eq!(workers(&["wf", "serve", "--config", file]), None);
        std::fs::write(dir.path().join("stdio.toml"), "[server]\n").expect("write");
        let stdio = dir.path().join("stdio.toml");
        assert_eq!(
            workers(&["wf", "serve", "--config", stdio.to_str().expect("utf-8")]),
            Some(1)
        );
    }
}
