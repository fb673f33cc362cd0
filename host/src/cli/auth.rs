//! `wf auth login|status|logout`: tokens for `mcp` sources with `auth.oauth`
//! (upstream MCP servers behind OAuth 2.1). The protocol is in wf_mcp_oauth;
//! this is the terminal side: the loopback redirect, the URL to open, the
//! table. Nothing here prints a token.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use wf_mcp_oauth::loopback::Loopback;
use wf_mcp_oauth::{Notes, OAuthSettings, Summary, TokenFile, flow};

use super::CommonArgs;
use crate::config::LoadedConfig;

#[derive(Subcommand, Debug)]
pub enum AuthCommand {
    /// Log in to SOURCE: authorization code with PKCE through a loopback
    /// redirect (or client credentials, with no human step).
    Login(LoginArgs),
    /// The OAuth sources, who they are logged in as, scopes and expiry
    /// (never a token).
    Status(StatusArgs),
    /// Forget SOURCE's tokens.
    Logout(LogoutArgs),
}

#[derive(Args, Debug)]
pub struct LoginArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    pub source: String,
    /// Print the URL only; do not try to open a browser.
    #[arg(long)]
    pub no_browser: bool,
    /// How long to wait for the browser's redirect, in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct LogoutArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    pub source: String,
}

/// An `mcp` source with `auth.oauth`, as `wf auth` needs it.
struct OAuthSource {
    name: String,
    url: String,
    settings: OAuthSettings,
    store: TokenFile,
}

pub async fn run(command: AuthCommand, log_level: &str) -> anyhow::Result<i32> {
    match command {
        AuthCommand::Login(a) => login(a, log_level).await,
        AuthCommand::Status(a) => status(a, log_level),
        AuthCommand::Logout(a) => logout(a, log_level).await,
    }
}

async fn login(args: LoginArgs, log_level: &str) -> anyhow::Result<i32> {
    let source = find(&args.common, log_level, &args.source)?;
    // An authorization server's error may quote what it was sent.
    login_to(&source, &args).await.map_err(|e| {
        anyhow::anyhow!(wf_mcp_oauth::redact_for(
            &format!("{e:#}"),
            &source.store,
            &source.settings
        ))
    })
}

async fn login_to(source: &OAuthSource, args: &LoginArgs) -> anyhow::Result<i32> {
    let summary = if flow::is_machine(&source.settings) {
        flow::client_credentials(&source.url, &source.settings, &source.store).await?
    } else {
        let loopback = Loopback::bind().await?;
        let pending = flow::begin_login(
            &source.url,
            &source.settings,
            &source.store,
            &loopback.redirect_uri(),
            None,
        )
        .await?;
        let url = pending.authorization_url().to_string();
        eprintln!(
            "To log in to {}, open this URL in a browser:\n\n  {url}\n",
            source.name
        );
        if !args.no_browser {
            open_browser(&url);
        }
        let callback = tokio::time::timeout(Duration::from_secs(args.timeout), loopback.wait())
            .await
            .map_err(|_| {
                anyhow::anyhow!("no redirect within {} s; run the login again", args.timeout)
            })??;
        pending.finish(&callback, &source.store).await?
    };
    eprintln!("logged in to {}: {}", source.name, describe(&summary));
    Ok(0)
}

fn status(args: StatusArgs, log_level: &str) -> anyhow::Result<i32> {
    let mut rows = Vec::new();
    for source in all(&args.common, log_level)? {
        let notes = Notes::load(source.store.dir());
        let row = match flow::summary(&source.store) {
            Ok(Some(s)) => {
                let mut row = json!({"source": source.name, "state": state(&s), "grant": source.settings.grant,
                "client_id": s.client_id, "issuer": s.issuer, "scopes": s.scopes, "expires_at": s.expires_at,
                "refreshable": s.has_refresh_token});
                // What `wf serve` learned: the tokens were refused, or a call needs more scope.
                if let Some(why) = &notes.needs_login {
                    row["state"] = json!("needs_login");
                    row["why"] = json!(why);
                    row["command"] = json!(format!("wf auth login {}", source.name));
                }
                if !notes.step_up_scopes.is_empty() {
                    row["step_up_scopes"] = json!(notes.step_up_scopes);
                    row["command"] = json!(format!("wf auth login {}", source.name));
                }
                row
            }
            Ok(None) => {
                json!({"source": source.name, "state": "needs_login", "grant": source.settings.grant,
                "why": "not logged in", "command": format!("wf auth login {}", source.name)})
            }
            Err(e) => json!({"source": source.name, "state": "error", "why": e.to_string()}),
        };
        rows.push(row);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    println!("{:<24} {:<12} {:<24} expires", "source", "state", "scopes");
    for r in &rows {
        let scopes: Vec<&str> = r["scopes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let expires = r["expires_at"]
            .as_u64()
            .map(in_words)
            .unwrap_or_else(|| "-".into());
        let note = match (r["command"].as_str(), r["why"].as_str()) {
            (Some(c), _) => format!("  (run `{c}`)"),
            (None, Some(w)) => format!("  ({w})"),
            _ => String::new(),
        };
        println!(
            "{:<24} {:<12} {:<24} {expires}{note}",
            r["source"].as_str().unwrap_or(""),
            r["state"].as_str().unwrap_or(""),
            scopes.join(" ")
        );
    }
    Ok(0)
}

async fn logout(args: LogoutArgs, log_level: &str) -> anyhow::Result<i32> {
    let source = find(&args.common, log_level, &args.source)?;
    // Best effort: an unreachable server must not keep the tokens on disk.
    match flow::revoke(&source.url, &source.settings, &source.store).await {
        Ok(true) => eprintln!(
            "revoked {}'s tokens at its authorization server",
            source.name
        ),
        Ok(false) => {}
        Err(e) => eprintln!(
            "could not revoke {}'s tokens ({}); deleting them anyway",
            source.name,
            wf_mcp_oauth::redact_for(&e.to_string(), &source.store, &source.settings)
        ),
    }
    if source.store.delete()? {
        eprintln!("logged out of {}: its tokens are deleted", source.name);
    } else {
        eprintln!("{} had no stored tokens", source.name);
    }
    Ok(0)
}

fn state(s: &Summary) -> &'static str {
    match s.expires_at {
        Some(at) if at <= flow::now() && !s.has_refresh_token => "expired",
        _ => "logged_in",
    }
}

fn describe(s: &Summary) -> String {
    let scopes = if s.scopes.is_empty() {
        "-".to_string()
    } else {
        s.scopes.join(" ")
    };
    let expires = s
        .expires_at
        .map(in_words)
        .unwrap_or_else(|| "no expiry given".into());
    format!("scopes {scopes}; access token {expires}")
}

fn in_words(at: u64) -> String {
    let now = flow::now();
    if at <= now {
        format!("expired {} s ago", now - at)
    } else {
        format!("expires in {} s", at - now)
    }
}

/// Opens `url` in a browser where one exists: a desktop session with
/// `xdg-open` (Linux) or `open` (macOS). Failing is fine: the URL is printed.
fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        "xdg-open"
    } else {
        return;
    };
    let _ = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

fn all(common: &CommonArgs, log_level: &str) -> anyhow::Result<Vec<OAuthSource>> {
    let opts = common.start_options(log_level);
    let config = LoadedConfig::open(opts.config.as_deref())?;
    let state_dir = crate::app::state_dir(&opts, &config);
    let mut out = Vec::new();
    for (name, sc) in config.sources()? {
        let has_oauth = sc
            .settings
            .get("auth")
            .and_then(|a| a.get("oauth"))
            .is_some();
        if sc.kind != "mcp" || !has_oauth {
            continue;
        }
        out.push(oauth_source(
            &name,
            &sc.settings,
            state_dir.join("sources").join(&name),
        )?);
    }
    Ok(out)
}

fn find(common: &CommonArgs, log_level: &str, name: &str) -> anyhow::Result<OAuthSource> {
    let opts = common.start_options(log_level);
    let config = LoadedConfig::open(opts.config.as_deref())?;
    let state_dir = crate::app::state_dir(&opts, &config);
    let sources = config.sources()?;
    let Some(sc) = sources.get(name) else {
        bail!("no source {name:?} in the config");
    };
    if sc.kind != "mcp" {
        bail!(
            "source {name:?} is of kind {:?}: `wf auth` is for mcp url sources",
            sc.kind
        );
    }
    oauth_source(name, &sc.settings, state_dir.join("sources").join(name))
}

fn oauth_source(
    name: &str,
    settings: &serde_json::Map<String, Value>,
    dir: PathBuf,
) -> anyhow::Result<OAuthSource> {
    let key = format!("sources.{name}");
    let lookup = |v: &str| std::env::var(v).ok();
    let settings = crate::config::expand_env(&Value::Object(settings.clone()), &key, &lookup)?;
    let Some(url) = settings["url"].as_str() else {
        bail!("source {name:?} has no `url`: OAuth is for streamable HTTP servers");
    };
    let Some(oauth) = settings.get("auth").and_then(|a| a.get("oauth")) else {
        bail!("source {name:?} has no `auth.oauth` table (add `[sources.{name}.auth.oauth]`)");
    };
    let settings: OAuthSettings =
        serde_json::from_value(oauth.clone()).with_context(|| format!("{key}.auth.oauth"))?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let store = TokenFile::new(dir);
    store.check_permissions()?;
    Ok(OAuthSource {
        name: name.to_string(),
        url: url.to_string(),
        settings,
        store,
    })
}
