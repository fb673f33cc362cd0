//! The host-context object handed to each plugin: log forwarding into the
//! host's `tracing` subscriber (tagged with the plugin's name) and events.

use std::sync::{Arc, OnceLock};

use abi_stable::std_types::{RStr, RString};
use tokio::sync::mpsc;
use wf_plugin_api::ffi::HostContextFfi;
use wf_plugin_api::{CallerRequest, Event};

/// Answers a plugin's `AskCaller` event: `(call, ask, request)`. The sources
/// layer, which knows the calls in flight, sets it; plugins sit below it.
pub type AskHandler = fn(u64, u64, CallerRequest);

static ASK_HANDLER: OnceLock<AskHandler> = OnceLock::new();

/// Sets where `AskCaller` events go (once per process; later calls are no-ops).
pub fn set_ask_handler(handler: AskHandler) {
    let _ = ASK_HANDLER.set(handler);
}

/// An event a plugin emitted, tagged with the plugin's name.
#[derive(Debug, Clone)]
pub struct HostEvent {
    pub plugin: String,
    pub event: Event,
}

/// Where plugin events go. Cheap to clone; callable from plugin threads.
#[derive(Clone)]
pub struct HostEvents {
    tx: mpsc::UnboundedSender<HostEvent>,
}

impl HostEvents {
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<HostEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }
}

#[derive(Clone)]
pub(crate) struct HostContext {
    pub plugin: Arc<str>,
    pub events: HostEvents,
}

impl HostContextFfi for HostContext {
    fn log(&self, level: u8, target: RStr<'_>, message: RStr<'_>) {
        let message = crate::secrets::redact(message.as_str());
        let (plugin, target, message) = (&*self.plugin, target.as_str(), message.as_str());
        match level {
            1 => tracing::error!(target: "wf::plugin", plugin, target, "{message}"),
            2 => tracing::warn!(target: "wf::plugin", plugin, target, "{message}"),
            3 => tracing::info!(target: "wf::plugin", plugin, target, "{message}"),
            4 => tracing::debug!(target: "wf::plugin", plugin, target, "{message}"),
            _ => tracing::trace!(target: "wf::plugin", plugin, target, "{message}"),
        }
    }

    fn emit(&self, event_json: RString) {
        match serde_json::from_str::<Event>(event_json.as_str()) {
            // Answered at once, on the host's runtime: never behind other events.
            Ok(Event::AskCaller { call, ask, request }) => match ASK_HANDLER.get() {
                Some(answer) => answer(call, ask, request),
                None => {
                    tracing::debug!(call, ask, "no handler for a plugin's request to its caller")
                }
            },
            Ok(Event::Span { source, mut span }) => {
                span.error = span.error.map(|e| crate::secrets::redact(&e));
                crate::telemetry::traces::export_reported(&source, &span)
            }
            Ok(event) => {
                let _ = self.events.tx.send(HostEvent {
                    plugin: self.plugin.to_string(),
                    event,
                });
            }
            Err(e) => tracing::warn!(
                plugin = &*self.plugin,
                "ignoring malformed plugin event: {e}"
            ),
        }
    }
}
