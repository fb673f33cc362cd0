//! Forwards a plugin's `tracing` events to the host. `tracing`'s global
//! dispatcher is per dylib, so without this a plugin's logs would vanish.

use std::fmt::Write as _;

use abi_stable::std_types::RStr;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

use crate::ffi::HostContextBox;

struct ForwardLayer {
    host: HostContextBox,
    max: Level,
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
    fn enabled(&self, metadata: &tracing::Metadata<'_>, _: Context<'_, S>) -> bool {
        *metadata.level() <= self.max
    }
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
pub(crate) fn install(host: HostContextBox, _plugin: &str, level: &str) {
    if tracing::dispatcher::has_been_set() {
        return;
    }
    let max = level.parse::<Level>().unwrap_or(Level::INFO);
    let _ = tracing_subscriber::registry()
        .with(ForwardLayer { host, max })
        .try_init();
}
