//! Forwards a plugin's `tracing` events to the host. `tracing`'s global
//! dispatcher is per dylib, so without this a plugin's logs would vanish.

use std::fmt::Write as _;

use abi_stable::std_types::RStr;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

use crate::ffi::HostContextBox;

struct ForwardLayer {
    host: HostContextBox,
}

#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

fn level_number(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

impl<S: Subscriber> Layer<S> for ForwardLayer {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut msg = Message::default();
        event.record(&mut msg);
        let meta = event.metadata();
        self.host.log(
            level_number(meta.level()),
            RStr::from_str(meta.target()),
            RStr::from_str(&msg.0),
        );
    }
}

/// Installs the forwarding subscriber as this dylib's global default, unless
/// one is already set (e.g. when the plugin runs in-process in a test).
/// `filter` uses `tracing` target syntax (`info,rmcp=warn`); events it
/// rejects never cross the ABI.
pub(crate) fn install(host: HostContextBox, filter: &str) {
    if tracing::dispatcher::has_been_set() {
        return;
    }
    let targets: Targets = filter
        .parse()
        .unwrap_or_else(|_| Targets::new().with_default(Level::INFO));
    let installed = tracing_subscriber::registry()
        .with(ForwardLayer { host }.with_filter(targets))
        .try_init();
    if installed.is_ok() {
        // Panics are caught at the ABI boundary and returned as errors; report
        // them through the host's log rather than on the process's stderr.
        std::panic::set_hook(Box::new(|info| tracing::error!(target: "panic", "{info}")));
    }
}
