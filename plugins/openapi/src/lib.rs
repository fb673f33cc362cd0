//! wf-source-openapi: REST APIs described by OpenAPI 3.0/3.1 documents as wf
//! sources of kind `openapi`. Each operation is a tool and a workflow node;
//! the document is a resource and the `api_overview` prompt explains it.
//!
//! Discovery (`catalog`) reads the document again each time, so the host's
//! refresh picks up a changed document (and tells clients their lists
//! changed); calls use the document of the last discovery.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod api;
mod auth;
mod body;
mod call;
pub mod check;
mod docs;
mod document;
pub mod external;
mod fast;
mod http;
pub mod load;
mod multipart;
mod param;
mod refresh;
pub mod refs;
pub mod serialize;
pub mod settings;
#[cfg(unix)]
mod socket;
#[cfg(not(unix))]
#[path = "socket_portable.rs"]
mod socket;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// The plugin's own allocator. Discovery builds and frees hundreds of
/// thousands of small JSON values, and glibc's malloc spent over half of the
/// plugin's discovery time on them (consolidating its fast bins on each
/// large free); the host already uses mimalloc (docs/benchmarks.md,
/// "OpenAPI source").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use wf_plugin_api::prelude::*;

use crate::api::Api;
use crate::auth::TokenCache;
use crate::http::Client;
use crate::settings::Settings;

pub struct OpenApiPlugin {
    host: Host,
}

impl Plugin for OpenApiPlugin {
    type Source = OpenApiSource;

    fn manifest() -> Manifest {
        Manifest::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
            .kind("openapi")
            .description("REST APIs described by OpenAPI 3.0/3.1 documents: one tool and workflow node per operation")
            .settings_schema("openapi", settings::settings_schema())
    }

    fn new(host: Host) -> Result<Self, PluginError> {
        Ok(OpenApiPlugin { host })
    }

    fn create_source(&self, spec: SourceSpec) -> Result<OpenApiSource, PluginError> {
        let settings = Settings::parse(&spec.name, &spec.config)?;
        for secret in settings.auth.secrets() {
            wf_plugin_api::redact_in_logs(&secret);
        }
        let client = Client::new().map_err(|e| {
            PluginError::internal(format!("sources.{}: HTTP client: {e}", spec.name))
        })?;
        let source = OpenApiSource {
            name: spec.name,
            settings: Arc::new(settings),
            client,
            tokens: Arc::new(TokenCache::default()),
            current: Arc::new(RwLock::new(None)),
        };
        if let Some(every) = source.settings.refresh_interval {
            refresh::watch(&source, self.host.clone(), every);
        }
        Ok(source)
    }
}

/// The document understood, its parsed tree freed (and its pages handed
/// back) on this thread; with its text and media type.
fn built(
    loaded: load::Loaded,
    settings: &Settings,
    cancelled: &AtomicBool,
) -> (Result<Api, api::SpecError>, (String, &'static str)) {
    let api = api::build_until(&loaded, settings, cancelled);
    let load::Loaded {
        text, value, mime, ..
    } = loaded;
    drop(value);
    release_freed();
    (api, (text, mime))
}

/// Frees `garbage` on the plugin's runtime, after the caller has its answer:
/// a large document's parsed tree and the last discovery's operations are
/// hundreds of thousands of small allocations, a good part of a discovery's
/// time if freed before it answers (docs/benchmarks.md, "OpenAPI source").
fn drop_later<T: Send + 'static>(garbage: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(async move { drop(garbage) })),
        Err(_) => drop(garbage),
    }
}

/// Runs `work` on the plugin runtime's blocking threads, so the future that
/// waits for it yields: the host's `discovery_timeout_ms` can fire, and the
/// thread that polls discovery serves others meanwhile (issue #55: a 20 MB
/// document held `list_sources` for 30 s).
pub(crate) async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, PluginError> {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime
            .spawn_blocking(work)
            .await
            .map_err(|e| PluginError::internal(format!("discovery: {e}"))),
        Err(_) => Ok(work()),
    }
}

/// Hands the pages this thread's heap freed back to the system: a large
/// document's parsed tree is tens of MB that mimalloc otherwise keeps
/// resident for reuse (issue #55, GitHub's RSS added).
fn release_freed() {
    unsafe extern "C" {
        // mimalloc's own (libmimalloc-sys builds all of mimalloc; its Rust
        // declaration is behind the `extended` feature).
        fn mi_collect(force: bool);
    }
    // SAFETY: mi_collect takes no pointers; it only returns this thread's
    // free pages to the OS.
    unsafe { mi_collect(true) }
}

/// Sets its flag when dropped: a discovery the host gave up on (dropped
/// its future) stops building at the next operation.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The document of the last discovery, understood.
pub struct Current {
    pub api: Api,
    pub text: String,
    pub mime: &'static str,
}

pub struct OpenApiSource {
    name: String,
    settings: Arc<Settings>,
    client: Client,
    tokens: Arc<TokenCache>,
    /// Shared with the refresh task, which stops when the source is gone.
    current: Arc<RwLock<Option<Arc<Current>>>>,
}

impl OpenApiSource {
    /// Reads and understands the document; the first problem fails it.
    async fn load(&self) -> Result<Arc<Current>, PluginError> {
        let fail = |e: load::LoadError| PluginError::failed(format!("{}: {e}", self.name));
        let (text, url) = load::read(&self.settings, &self.client, &self.tokens)
            .await
            .map_err(fail)?;
        let spec_error = |e: api::SpecError| {
            PluginError::failed(format!("{}: {}: {e}", self.name, self.settings.spec))
                .with_data(json!({"pointer": e.pointer, "reason": e.message}))
        };
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel = CancelOnDrop(cancelled.clone());
        // Parsed, built and freed on one blocking thread: mimalloc keeps a
        // page freed by another thread than the one that allocated it until
        // that thread allocates again, and a large document's tree freed on
        // a second blocking thread stayed resident (issue #55: GitHub's RSS
        // added was 60 MiB higher in half the runs).
        let (settings, stop) = (self.settings.clone(), cancelled.clone());
        let first = off_thread(move || {
            let loaded = load::parsed(text, url, &settings.spec)?;
            if external::refers_out(&loaded.value) {
                return Ok(Err(loaded));
            }
            Ok(Ok(built(loaded, &settings, &stop)))
        })
        .await?
        .map_err(fail)?;
        let (api, loaded) = match first {
            Ok(done) => done,
            Err(mut loaded) => {
                // Other documents to fetch first (async): built on a second thread.
                external::bundle(&mut loaded, &self.settings, &self.client, &self.tokens)
                    .await
                    .map_err(spec_error)?;
                let settings = self.settings.clone();
                off_thread(move || built(loaded, &settings, &cancelled)).await?
            }
        };
        let api = api.map_err(spec_error)?;
        if let Some((_, reason)) = &api.over_budget {
            tracing::warn!(source = %self.name, "{reason}");
        }
        let current = Arc::new(Current {
            api,
            text: loaded.0,
            mime: loaded.1,
        });
        let old = self
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(current.clone());
        drop_later(old);
        Ok(current)
    }

    /// The last discovered document, or a fresh one if there was none.
    async fn current(&self) -> Result<Arc<Current>, PluginError> {
        let have = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match have {
            Some(c) => Ok(c),
            None => self.load().await,
        }
    }
}

/// The catalog of source `name` serving `current`.
fn catalog_of(name: &str, current: &Current) -> Catalog {
    let catalog = current
        .api
        .operations
        .iter()
        .fold(Catalog::default(), |c, op| c.node(op.node_spec()));
    catalog
        .resource(docs::document_resource(name, current))
        .prompt(docs::prompt(name))
}

impl Source for OpenApiSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        let current = self.load().await?;
        // Built on the thread that serializes and frees it: mimalloc keeps a
        // page another thread freed until its own thread collects, and a
        // blocking thread's catalog stayed resident (issue #55).
        Ok(catalog_of(&self.name, &current))
    }

    async fn list_resources(&self) -> Result<Vec<Resource>, PluginError> {
        // The document, as in the catalog (not every tool built to get it).
        let current = self.current().await?;
        Ok(vec![docs::document_resource(&self.name, &current)])
    }

    async fn list_prompts(&self) -> Result<Vec<Prompt>, PluginError> {
        Ok(vec![docs::prompt(&self.name)])
    }

    async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, PluginError> {
        Ok(vec![])
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<CallResult, PluginError> {
        let current = self.current().await?;
        let op = current.api.operation(name).ok_or_else(|| {
            PluginError::not_found(format!("{} has no operation {name}", self.name))
        })?;
        let base = current
            .api
            .base
            .as_ref()
            .map_err(|e| PluginError::invalid_config(format!("sources.{}: {e}", self.name)))?;
        call::Call {
            source: &self.name,
            settings: &self.settings,
            client: &self.client,
            tokens: &self.tokens,
            base,
        }
        .run(op, arguments, &ctx)
        .await
    }

    async fn read_resource(
        &self,
        uri: &str,
        _ctx: CallContext,
    ) -> Result<ReadResourceResult, PluginError> {
        if uri != docs::document_uri(&self.name) {
            return Err(PluginError::not_found(format!(
                "{} has no resource {uri}",
                self.name
            )));
        }
        let current = self.current().await?;
        Ok(ReadResourceResult::text(
            uri,
            current.mime,
            current.text.clone(),
        ))
    }

    async fn get_prompt(
        &self,
        name: &str,
        _arguments: Map<String, Value>,
        _ctx: CallContext,
    ) -> Result<GetPromptResult, PluginError> {
        if name != docs::PROMPT {
            return Err(PluginError::not_found(format!(
                "{} has no prompt {name}",
                self.name
            )));
        }
        let current = self.current().await?;
        Ok(docs::overview(&self.name, &current.api))
    }

    async fn status(&self) -> Value {
        let current = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let spec = match url::Url::parse(&self.settings.spec) {
            // A query may hold a key: never shown.
            Ok(mut u) => {
                u.set_query(None);
                u.to_string()
            }
            Err(_) => self.settings.spec.clone(),
        };
        match current {
            None => json!({"spec": spec, "loaded": false}),
            Some(c) => json!({
                "spec": spec,
                "loaded": true,
                "openapi": c.api.openapi,
                "title": c.api.title,
                "operations": c.api.operations.len(),
                "left_out": c.api.left_out,
                "left_out_over_budget": c.api.over_budget.as_ref().map(|(_, why)| why),
                "schema_nodes": c.api.schema_nodes,
                "strict_responses": self.settings.strict_responses,
                "base_url": c.api.base.as_ref().map(|u| u.to_string()).unwrap_or_else(|e| e.clone()),
                "auth": format!("{:?}", self.settings.auth),
                "security_schemes": c.api.schemes,
                "operations_with_credentials": c.api.operations.iter().filter(|o| o.credentials).count(),
                // Operations whose schemes want another kind of credential
                // than `auth`: they are called without any.
                "operations_wanting_other_credentials": c.api.operations.iter()
                    .filter(|o| !o.credentials && !o.schemes.is_empty()).count(),
                "refresh_interval_ms": self.settings.refresh_interval.map(|d| d.as_millis() as u64),
            }),
        }
    }
}

wf_plugin_api::export_plugin!(OpenApiPlugin);
