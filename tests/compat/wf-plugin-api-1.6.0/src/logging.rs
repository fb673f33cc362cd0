//! Forwards a plugin's `tracing` events to the host. `tracing`'s global
//! dispatcher is per dylib, so without this a plugin's logs would vanish.

use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

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

/// Secrets this dylib learned at run time (tokens it was issued), blanked out
/// of every forwarded log line. The host redacts configured `${VAR}` values
/// itself; it cannot know secrets a plugin obtains later.
static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Bounds the list: the oldest are forgotten first (they have been replaced).
const MAX_SECRETS: usize = 64;
/// Shorter strings are too likely to be ordinary words.
const MIN_SECRET_LEN: usize = 8;

/// Blanks `secret` out of every log line this plugin sends the host from now
/// on (since 1.2.0). For secrets a plugin obtains while running, such as the
/// OAuth tokens an authorization server issues, which a library might quote
/// in a warning.
pub fn redact_in_logs(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut secrets = SECRETS.lock().unwrap_or_else(PoisonError::into_inner);
    if secrets.iter().any(|s| s == secret) {
        return;
    }
    if secrets.len() == MAX_SECRETS {
        secrets.remove(0);
    }
    secrets.push(secret.to_string());
}

fn redacted(mut line: String) -> String {
    let secrets = SECRETS.lock().unwrap_or_else(PoisonError::into_inner);
    for secret in secrets.iter() {
        if line.contains(secret.as_str()) {
            line = line.replace(secret.as_str(), "[REDACTED]");
        }
    }
    line
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
        let line = redacted(msg.0);
        if crate::lane::log(level_number(meta.level()), meta.target(), &line) {
            return;
        }
        self.host.log(
            level_number(meta.level()),
            RStr::from_str(meta.target()),
            RStr::from_str(&line),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learned_secret_is_blanked_and_short_strings_are_not_secrets() {
        redact_in_logs("tok-0123456789abcdef");
        redact_in_logs("short");
        let line = redacted("refresh failed: tok-0123456789abcdef is revoked (short)".into());
        assert_eq!(line, "refresh failed: [REDACTED] is revoked (short)");
    }

    #[test]
    fn the_list_is_bounded() {
        for i in 0..(MAX_SECRETS + 10) {
            redact_in_logs(&format!("bounded-secret-{i:04}"));
        }
        let secrets = SECRETS.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(secrets.len() <= MAX_SECRETS);
        assert!(
            secrets
                .iter()
                .any(|s| s == &format!("bounded-secret-{:04}", MAX_SECRETS + 9))
        );
    }
}
