//! `refresh_interval_ms`: the document is fetched again on a timer, and a
//! changed one is announced to the host (`CapabilitiesChanged`), which
//! rediscovers the source and tells clients their lists changed. The
//! watcher compares the root document's text; a change only in a
//! referenced document is seen on the next refresh of the catalog.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use wf_plugin_api::prelude::*;

use crate::{OpenApiSource, load};

/// Starts the watcher on the plugin's runtime; it ends with the source.
pub fn watch(source: &OpenApiSource, host: Host, every: Duration) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(source = %source.name, "refresh_interval_ms: no runtime; the document is not watched");
        return;
    };
    let current = Arc::downgrade(&source.current);
    let settings = source.settings.clone();
    let client = source.client.clone();
    let tokens = source.tokens.clone();
    let name = source.name.clone();
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        // The text last fetched, for a source that has not discovered yet.
        let mut last: Option<String> = None;
        loop {
            tick.tick().await;
            let Some(current) = current.upgrade() else {
                return;
            };
            let served = current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map(|c| c.text.clone());
            drop(current);
            let text = match load::load(&settings, &client, &tokens).await {
                Ok(loaded) => loaded.text,
                Err(e) => {
                    tracing::warn!(source = %name, "refresh_interval_ms: {e}");
                    continue;
                }
            };
            let before = served.or_else(|| last.clone());
            if before.as_ref().is_some_and(|b| *b != text) {
                tracing::info!(source = %name, "the OpenAPI document changed");
                host.emit(&Event::CapabilitiesChanged {
                    source: name.clone(),
                });
            }
            last = Some(text);
        }
    });
}
