//! The admin surface: plugins, sources and their health, catalog refresh,
//! staged source edits and reload, status. Served as the host-local source
//! `wf.admin`; access is limited by `[admin]` in the config. No output ever
//! contains a secret: source settings are never echoed, and plugins' status
//! reports names of env vars and headers only.

mod safety;
mod tools;

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use wf_plugin_api::CallResult;

use crate::app::App;
use crate::config::Principal;
use crate::config::{AdminOverHttp, Edit};
use crate::plugins::supported_api_range;
use crate::surfaces::failure::Failure;

pub const ADMIN_SOURCE: &str = "wf.admin";

/// How the caller reached wf, for access checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Stdio,
    /// Over HTTP, as `principal`, with the value of its `X-Wf-Admin-Token`
    /// header, if any.
    Http {
        admin_token: Option<String>,
        principal: Principal,
    },
    /// A web console request the console's own access rules admitted (a
    /// browser signed in with the link `wf serve --http` printed, as the
    /// operator: principal `local`).
    Console,
}

impl Caller {
    pub fn principal(&self) -> Principal {
        match self {
            Caller::Stdio | Caller::Console => Principal::local(),
            Caller::Http { principal, .. } => principal.clone(),
        }
    }
}

pub struct Admin {
    app: Arc<App>,
}

fn reply(v: Value) -> CallResult {
    CallResult::structured(v)
}

fn refuse(error: impl Into<String>, hint: &'static str) -> CallResult {
    Failure::refused(error, hint).into_result()
}

impl Admin {
    /// Registers the admin tools unless `[admin] enabled = false`.
    pub fn new(app: Arc<App>) -> Option<Arc<Self>> {
        if !app.config.config.admin.enabled {
            return None;
        }
        app.set_local(ADMIN_SOURCE, tools::catalog());
        Some(Arc::new(Self { app }))
    }

    /// Whether `caller` may use the admin surface (its tools are listed to it).
    pub fn permits(&self, caller: &Caller) -> bool {
        self.refusal(caller).is_none()
    }

    /// Why a caller may not use the admin surface, if it may not.
    pub fn refusal(&self, caller: &Caller) -> Option<CallResult> {
        let Caller::Http { admin_token, .. } = caller else {
            return None;
        };
        let admin = &self.app.config.config.admin;
        match admin.over_http() {
            AdminOverHttp::Open => None,
            AdminOverHttp::Off => Some(refuse(
                "admin call refused: the admin surface is limited to stdio (config: [admin] over_http = \"off\")",
                "use wf over stdio, or set [admin] over_http = \"token\" with a token",
            )),
            AdminOverHttp::Token => {
                let expected = admin
                    .token
                    .as_deref()
                    .and_then(|t| {
                        crate::config::expand_env(&Value::String(t.into()), "admin.token", &|k| {
                            std::env::var(k).ok()
                        })
                        .ok()
                    })
                    .and_then(|v| v.as_str().map(str::to_string));
                let ok = matches!((expected.as_deref(), admin_token.as_deref()), (Some(e), Some(g)) if !e.is_empty() && crate::secrets::constant_time_eq(e.as_bytes(), g.as_bytes()));
                (!ok).then(|| {
                    refuse(
                        "admin call refused: missing or wrong admin token",
                        "send the admin token in the X-Wf-Admin-Token header (config: [admin] token)",
                    )
                })
            }
        }
    }

    pub async fn call(&self, name: &str, args: Value, caller: &Caller) -> CallResult {
        if let Some(r) = self.refusal(caller) {
            return r;
        }
        let str_arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        match name {
            "list_plugins" => reply(self.list_plugins()),
            "list_sources" => reply(self.list_sources().await),
            "pin_tools" | "diff_tools" | "approve_tools" => self.tool_pins(name, &args, caller),
            "refresh_catalog" => self.refresh(str_arg("source")).await,
            "query_audit" => self.query_audit(args).await,
            "status" => reply(self.status(caller)),
            "reload" => {
                let outcome = self.app.reload_everywhere().await;
                let failed = outcome.error.is_some();
                CallResult {
                    is_error: failed,
                    ..reply(json!(outcome))
                }
            }
            "add_source" | "update_source" => {
                let (Some(source), Some(table)) = (
                    str_arg("name"),
                    args.get("config").and_then(Value::as_object).cloned(),
                ) else {
                    return refuse(
                        "needs `name` and a `config` object",
                        "see the tool's input schema",
                    );
                };
                let table = with_kind(table, str_arg("kind"));
                if let Some(r) = self.unsafe_table(&source, &table, caller) {
                    return r;
                }
                // An update without `kind` keeps the source's current kind.
                let current = self.app.sources.get(&source).map(|e| e.kind.clone());
                let checked = crate::sources::settings::check_table(
                    &self
                        .app
                        .plugins
                        .read()
                        .unwrap_or_else(PoisonError::into_inner),
                    &with_kind(
                        table.clone(),
                        table.get("kind").is_none().then_some(current).flatten(),
                    ),
                    &format!(
                        "{}: sources.{source}",
                        self.app.live_config.with(|c| c.file_label())
                    ),
                );
                if let Err(e) = checked {
                    return refuse(
                        e,
                        "fix the settings and try again; the file was not changed",
                    );
                }
                let edit = if name == "add_source" {
                    Edit::Add {
                        name: source,
                        table,
                    }
                } else {
                    Edit::Update {
                        name: source,
                        table,
                    }
                };
                self.stage(edit, caller)
            }
            "remove_source" | "enable_source" | "disable_source" => {
                let Some(source) = str_arg("name") else {
                    return refuse("needs `name`", "see the tool's input schema");
                };
                let edit = match name {
                    "remove_source" => Edit::Remove { name: source },
                    "enable_source" => Edit::SetEnabled {
                        name: source,
                        enabled: true,
                    },
                    _ => Edit::SetEnabled {
                        name: source,
                        enabled: false,
                    },
                };
                self.stage(edit, caller)
            }
            other => refuse(
                format!("no admin tool {other:?}"),
                "list the server's tools",
            ),
        }
    }

    /// A refusal when `table` would start a program or carry credentials
    /// and the operator has not allowed that (`[admin] allow_process_sources`).
    fn unsafe_table(
        &self,
        source: &str,
        table: &Map<String, Value>,
        caller: &Caller,
    ) -> Option<CallResult> {
        // The start config: like all of [admin], it changes at the next start.
        let allowed = self.app.config.config.admin.allow_process_sources;
        let reasons = safety::reasons(table);
        if allowed || reasons.is_empty() {
            return None;
        }
        tracing::warn!(
            principal = caller.principal().name(),
            source,
            "admin change refused: {}",
            reasons.join("; ")
        );
        Some(refuse(
            format!(
                "admin call refused: source {source:?} {} and [admin] allow_process_sources is not set; nothing was written",
                reasons.join("; ")
            ),
            "only the operator can allow this: edit the config file by hand, or set [admin] allow_process_sources = true",
        ))
    }

    fn stage(&self, edit: Edit, caller: &Caller) -> CallResult {
        // Replicas on one PostgreSQL each read their own copy of the same
        // file; an edit here would make this replica's copy differ from the
        // others', so the file stays the operator's to change everywhere.
        if self.app.store.backend() == "postgres" {
            tracing::warn!(principal = caller.principal().name(), edit = %describe(&edit), "admin change refused: several replicas");
            return refuse(
                "admin call refused: config edits are off with several replicas ([store] url is PostgreSQL); the config file on every replica is the source of truth, and nothing was written",
                "edit the config file on every replica (the same file everywhere), then call reload on each or let the file watcher apply it",
            );
        }
        let config = self.app.live_config.current();
        let staged = config.stage(&edit);
        if staged.is_ok() {
            tracing::info!(principal = caller.principal().name(), edit = %describe(&edit), "admin change staged");
        }
        match staged {
            Ok(()) => reply(json!({
                "staged": true,
                "requires_reload": true,
                "file": config.file_label(),
                "hint": "the change is in the config file; call reload to apply it now (the file watcher applies it within a second)",
            })),
            Err(e) => refuse(
                e.to_string(),
                "fix the value and try again; the file was not changed",
            ),
        }
    }

    fn list_plugins(&self) -> Value {
        let plugins = self
            .app
            .plugins
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let loaded: Vec<Value> = plugins
            .loaded
            .iter()
            .map(|p| json!({"name": p.manifest.name, "version": p.manifest.version, "api_version": p.manifest.api_version, "file": p.file, "kinds": p.manifest.kinds, "isolation": p.isolation, "process": p.child.as_deref().map(crate::plugins::process::describe)}))
            .collect();
        json!({
            "loaded": loaded,
            "refused": plugins.refused,
            "supported_api": supported_api_range(),
            "restart_needed": plugins.changed_files(),
        })
    }

    pub async fn list_sources(&self) -> Value {
        let now = crate::store::now_ms();
        let entries = self.app.sources.list();
        let rows = entries.iter().map(|e| async move {
            let st = e.status();
            let counts = st.catalog.as_ref().map(|c| {
                json!({"tools": c.tools.len(), "nodes": c.node_specs.len(), "prompts": c.prompts.len(), "resources": c.resources.len(), "resource_templates": c.resource_templates.len()})
            });
            let runtime = match &e.handle {
                Some(h) => tokio::time::timeout(Duration::from_secs(2), h.status()).await.unwrap_or(Value::Null),
                None => Value::Null,
            };
            json!({
                "name": e.name, "kind": e.kind, "plugin": e.plugin, "enabled": e.enabled,
                "state": st.state, "error": st.error,
                "last_discovery_at": st.discovered_at, "discovery_ms": st.discovery_ms,
                "catalog_from_snapshot": st.from_snapshot,
                "catalog_age_ms": st.discovered_at.map(|t| now - t),
                "session_epoch": runtime.get("epoch"),
                // An `mcp` source's generation: its `protocol` setting and what it speaks.
                "protocol": runtime.get("protocol"),
                "calls_in_flight": e.handle.as_ref().map(|h| h.calls_in_flight()),
                // In a plugin child: calls it has said nothing of for a while.
                "stalled_calls": e.plugin.as_deref().and_then(|p| crate::plugins::process::stalled_calls(p, &e.name)),
                "capabilities": counts,
                // Capabilities left out of every surface because they fail the checks.
                "rejected": st.rejected,
                // Tools the hold stage keeps out (pinned and changed, new, or
                // flagged under screen = "hold"), and screening's findings.
                "held": st.held,
                "warnings": st.warnings,
                "sessions": self.app.sessions.describe(&e.name, &runtime),
                "runtime": runtime,
            })
        });
        json!({"sources": futures::future::join_all(rows).await})
    }

    /// `pin_tools`, `diff_tools`, `approve_tools`: the tool pins over what
    /// the sources serve now (`tools.lock` beside the config; the pins are
    /// applied at once).
    pub fn tool_pins(&self, action: &str, args: &Value, caller: &Caller) -> CallResult {
        use crate::sources::tool_pins::{ToolLock, actions};
        let list = |k: &str| -> Vec<String> {
            args.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let config = self.app.live_config.current();
        let path = match ToolLock::path_for(config.file.as_deref()) {
            Ok(p) => p,
            Err(e) => return refuse(e.to_string(), "serve with --config FILE to keep pins"),
        };
        let catalogs = self.app.sources.unheld_catalogs();
        let done = match action {
            "pin_tools" => actions::pin(&path, &catalogs, &list("sources")).map(|p| {
                json!({"pinned": p.into_iter().map(|(s, n)| json!({"source": s, "tools": n})).collect::<Vec<_>>(), "file": path})
            }),
            "diff_tools" => actions::diff(&path, &catalogs).map(|d| json!({"changes": d, "file": path})),
            _ => {
                let names = list("names");
                if names.is_empty() {
                    return refuse("needs `names`", "source.tool refs, or a source name for all its changes");
                }
                actions::approve(&path, &catalogs, &names).map(|a| json!({"approved": a, "file": path}))
            }
        };
        match done {
            Ok(v) => {
                if action != "diff_tools" {
                    tracing::info!(
                        principal = caller.principal().name(),
                        action,
                        "tool pins changed"
                    );
                    self.app.sources.reload_pins();
                }
                reply(v)
            }
            Err(e) => refuse(e.to_string(), "see diff_tools"),
        }
    }

    async fn refresh(&self, source: Option<String>) -> CallResult {
        let entries = match &source {
            Some(name) => match self.app.sources.get(name) {
                Some(e) => vec![e],
                None => return refuse(format!("no source {name:?}"), "see list_sources"),
            },
            None => self.app.sources.list(),
        };
        let timeout = self.app.discovery_timeout();
        let runs = entries.iter().filter(|e| e.handle.is_some()).map(|e| async move {
            let changed = self.app.sources.discover(e, timeout).await;
            let st = e.status();
            json!({"source": e.name, "state": st.state, "changed": changed, "error": st.error, "discovery_ms": st.discovery_ms})
        });
        reply(json!({"refreshed": futures::future::join_all(runs).await}))
    }

    /// `query_audit`: the trail, filtered as `wf audit` filters it.
    async fn query_audit(&self, mut args: Value) -> CallResult {
        let now = crate::store::now_ms();
        for key in ["since", "until"] {
            if let Some(t) = args.get(key).and_then(Value::as_str).map(str::to_string) {
                match crate::audit::query::parse_time(&t, now) {
                    Ok(ms) => args[key] = json!(ms),
                    Err(e) => return refuse(format!("{key}: {e}"), "see the tool's input schema"),
                }
            }
        }
        let filter: crate::store::AuditFilter = match serde_json::from_value(args) {
            Ok(f) => f,
            Err(e) => return refuse(format!("bad filter: {e}"), "see the tool's input schema"),
        };
        match self.app.store.audit(&filter).await {
            Ok(records) => reply(json!({"records": records, "count": records.len()})),
            Err(e) => refuse(
                format!("cannot read the audit trail: {e}"),
                "try again; see wf's log",
            ),
        }
    }

    fn status(&self, caller: &Caller) -> Value {
        let proj = self.app.projection();
        let principals: Vec<Value> = self
            .app
            .config
            .config
            .server
            .tokens
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "allow_tools": t.allow_tools,
                    "deny_tools": t.deny_tools,
                })
            })
            .collect();
        let sources = self.app.sources.list();
        let plugins = self
            .app
            .plugins
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "plugin_api": wf_plugin_api::API_VERSION,
            "supported_plugin_api": supported_api_range(),
            "uptime_ms": self.app.started.elapsed().as_millis() as u64,
            "config_file": self.app.live_config.with(|c| c.file_label()),
            "counts": {
                "plugins": plugins.loaded.len(), "refused_plugin_files": plugins.refused.len(),
                "sources": sources.len(), "tools": proj.tools.len(), "prompts": proj.prompts.len(),
                "resources": proj.resources.len(), "resource_templates": proj.templates.len(),
            },
            "front": {
                "http_connections": self.app.front.http_connections.load(Ordering::Relaxed),
                "http_sessions": self.app.front.http_sessions.load(Ordering::Relaxed),
                "list_followers": self.app.front.list_followers.load(Ordering::Relaxed),
            },
            "calls_in_flight": sources
                .iter()
                .filter_map(|e| Some((e.name.clone(), json!(e.handle.as_ref()?.calls_in_flight()))))
                .collect::<Map<String, Value>>(),
            "sessions": self.app.sessions.totals(),
            "audit": {
                "enabled": self.app.audit.enabled(),
                "written": self.app.audit.counts().written.load(Ordering::Relaxed),
                "dropped": self.app.audit.counts().dropped.load(Ordering::Relaxed),
                "pruned": self.app.audit.counts().pruned.load(Ordering::Relaxed),
            },
            "name_collisions": proj.collisions,
            "last_reload": self.app.live_config.last_reload(),
            "restart_needed": plugins.changed_files(),
            // Names only: tokens are never shown.
            "principal": caller.principal().name(),
            "principals": principals,
            "allow_process_sources": self.app.config.config.admin.allow_process_sources,
        })
    }
}

/// An edit for the log: what and which source, never the table's values.
fn describe(edit: &Edit) -> String {
    match edit {
        Edit::Add { name, .. } => format!("add {name}"),
        Edit::Update { name, .. } => format!("update {name}"),
        Edit::Remove { name } => format!("remove {name}"),
        Edit::SetEnabled { name, enabled } => {
            format!("{} {name}", if *enabled { "enable" } else { "disable" })
        }
    }
}

/// `kind` given beside the table goes into it.
fn with_kind(mut table: Map<String, Value>, kind: Option<String>) -> Map<String, Value> {
    if let Some(k) = kind {
        table.insert("kind".into(), Value::String(k));
    }
    table
}
