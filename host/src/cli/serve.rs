//! `wf serve`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ServeArgs;
use crate::app::App;
use crate::server::identity::principals::{AccessRules, static_tokens};
use crate::server::{
    HttpOptions, Isolation, Surfaces, ToolAccess, serve_http, serve_stdio_at, shutdown_signal,
};

pub async fn run(args: ServeArgs, log_level: &str) -> anyhow::Result<i32> {
    let mut opts = args.common.start_options(log_level);
    opts.replica_id = args.replica_id.clone();
    let app = App::start(&opts).await?;
    // Nothing but /metrics reads the per-call series: record them only when served.
    crate::telemetry::metrics::record_calls(app.config.config.telemetry.metrics_token.is_some());
    let telemetry = app.config.config.telemetry.traces();
    let traces = crate::telemetry::traces::start(&telemetry)
        .map_err(|e| anyhow::anyhow!("{}: {e}", app.config.file_label()))?;
    let otlp_metrics = crate::telemetry::otlp_metrics::start(&telemetry)
        .map_err(|e| anyhow::anyhow!("{}: {e}", app.config.file_label()))?;
    let audit = &app.config.config.audit;
    let otlp_logs =
        crate::telemetry::otlp_logs::start(&telemetry, audit.enabled && audit.otlp_logs)
            .map_err(|e| anyhow::anyhow!("{}: {e}", app.config.file_label()))?;
    if otlp_metrics.is_some() {
        // Weak: the reader lives in a static and must not keep the app alive.
        let app = std::sync::Arc::downgrade(&app);
        crate::telemetry::otlp_metrics::observe_gauges_with(move || {
            let Some(live) = app.upgrade() else {
                return Default::default();
            };
            let in_flight = live.sources.list().into_iter();
            let in_flight = in_flight
                .filter_map(|e| Some((e.name.clone(), e.handle.as_ref()?.calls_in_flight())))
                .collect();
            (
                in_flight,
                live.sessions.open_by_source().into_iter().collect(),
            )
        });
    }
    let mut surfaces = Surfaces::new(&app);
    // Approvals (`wf tools approve`) apply at once, whatever watch_config says.
    app.sources.watch_pins(&app.file_watch);
    if app.config.config.server.watch_config {
        app.watch_config(Duration::from_millis(300));
    }
    app.follow_replica_reloads();
    let server = &app.config.config.server;
    let label = app.config.file_label();
    surfaces.isolation = std::sync::Arc::new(Isolation::new(
        ToolAccess::from_config(server).map_err(|e| anyhow::anyhow!("{label}: {e}"))?,
    ));
    // The tool lists are the call pipeline's first `authorize` stage.
    app.pipeline.set_authorizer(
        crate::server::mcp::isolation::TOOL_LISTS,
        surfaces.isolation.clone(),
    );
    // The tool lists (tokens' and OAuth groups') follow the config.
    let isolation = surfaces.isolation.clone();
    app.live_config.on_reload(Box::new(move |c| {
        let rules = AccessRules::from_config(&c.config.server).map_err(|e| e.to_string())?;
        let isolation = isolation.clone();
        Ok(Box::new(move || isolation.access.replace(rules)))
    }));
    // `[endpoints.NAME]` follow the config: a reload replaces them whole.
    let endpoints = surfaces.endpoints.clone();
    app.live_config.on_reload(Box::new(move |c| {
        let compiled = crate::surfaces::endpoints::compile(&c.config)?;
        let endpoints = endpoints.clone();
        Ok(Box::new(move || endpoints.replace(compiled)))
    }));
    // `[policy] files`: in force once the catalog they name is discovered.
    super::policy::install(&app).await?;
    surfaces.catalog = std::sync::Arc::new(
        crate::server::mcp::catalog_view::CatalogView::from_config(server)
            .map_err(|e| anyhow::anyhow!("{label}: {e}"))?,
    );
    if let Some(e) = &server.catalog.embeddings {
        let semantic = crate::catalog::embed::Semantic::new(e, Some(app.store.clone()))
            .map_err(|e| anyhow::anyhow!("{label}: server.catalog.{e}"))?;
        let semantic = std::sync::Arc::new(semantic);
        crate::server::mcp::semantic::follow(app.clone(), semantic.clone());
        surfaces.semantic = Some(semantic);
    }
    let http = args.http.clone().or_else(|| server.http.clone());
    // Over either front: a reply then wakes the host's thread alone.
    #[cfg(unix)]
    crate::sources::io_watch::enable();
    if let (Some(name), Some(_)) = (&args.endpoint, &http) {
        anyhow::bail!(
            "--endpoint {name} is for stdio: over HTTP every endpoint is served at /mcp/NAME"
        );
    }
    let result = match http {
        None => serve_stdio_at(app.clone(), surfaces.clone(), args.endpoint.clone()).await,
        Some(addr) => {
            let bind: SocketAddr = addr
                .parse()
                .map_err(|e| anyhow::anyhow!("--http {addr}: not an IP:PORT address: {e}"))?;
            let (token, named) =
                static_tokens(server).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
            let opts = HttpOptions::new(bind, token, server).with_named_tokens(named);
            let stop = CancellationToken::new();
            let on_signal = stop.clone();
            let signal = shutdown_signal();
            let drain = Duration::from_millis(app.config.config.store.drain_timeout_ms());
            let store = app.store.clone();
            tokio::spawn(async move {
                signal.await;
                // Drain: /readyz says 503 and no run starts here, while the
                // runs in progress get up to `drain_timeout_ms` to finish;
                // then the server stops and what still runs is interrupted
                // (its leases released).
                store.set_draining();
                let until = tokio::time::Instant::now() + drain;
                let left = store.running_here();
                if left > 0 {
                    tracing::info!(
                        runs = left,
                        ms = drain.as_millis() as u64,
                        "draining: waiting for runs in progress"
                    );
                }
                while store.running_here() > 0 && tokio::time::Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                on_signal.cancel();
            });
            serve_http(app.clone(), surfaces.clone(), opts, stop).await
        }
    };
    tracing::info!("shutting down");
    app.shutdown().await;
    if let Some(t) = traces {
        // The batch exporter blocks while it flushes.
        let _ = tokio::task::spawn_blocking(move || t.shutdown()).await;
    }
    if let Some(m) = otlp_metrics {
        let _ = tokio::task::spawn_blocking(move || m.shutdown()).await;
    }
    if let Some(l) = otlp_logs {
        let _ = tokio::task::spawn_blocking(move || l.shutdown()).await;
    }
    result.map(|()| 0)
}
