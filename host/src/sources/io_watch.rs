//! The host's side of `wf_plugin_api::io_watch`: descriptors an in-process
//! source offers (the MCP plugin: each stdio upstream's stdout) are watched
//! by this runtime's reactor, and read by the source on this thread as soon
//! as they turn readable. A reply then wakes one thread, this one, instead
//! of the plugin runtime's and then this one (docs/performance/gateways.md,
//! "The host's reactor reads the upstream").

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use abi_stable::std_types::RString;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use wf_plugin_api::ffi::SourceBox;
use wf_plugin_api::io_watch::{Readiness, WatchOffer};
use wf_plugin_api::{ErrorCode, PluginError};

use super::call::CallCtx;

/// How often a descriptor is asked whether its watch still stands, readable
/// or not: a session that ended without its pipe closing (a grandchild that
/// kept the write end) must not keep its descriptor here for ever.
const QUIET_CHECK: Duration = Duration::from_secs(30);

/// How long to wait before reading again a descriptor whose source could
/// not take everything (its consumer behind).
const BACKLOG_PAUSE: Duration = Duration::from_millis(1);

/// Whether this process reads its sources' descriptors ([`enable`]).
static ENABLED: AtomicBool = AtomicBool::new(false);
static TURNED_ON: Notify = Notify::const_new();

/// From now on, sources' descriptors are watched here. `wf serve` turns it
/// on, over HTTP and over stdio: under many sessions a reply that wakes one
/// thread instead of two is what lets calls a second grow, and one call at a
/// time over stdio it took 28–39 µs off the official TypeScript SDK's and a
/// plain Python client's p50 (docs/performance/gateways.md, "The host reads
/// the upstream over stdio too").
pub fn enable() {
    ENABLED.store(true, Ordering::Release);
    TURNED_ON.notify_waiters();
}

async fn enabled() {
    loop {
        let turned_on = TURNED_ON.notified();
        if ENABLED.load(Ordering::Acquire) {
            return;
        }
        turned_on.await;
    }
}

/// Watches what the source `obj` offers, once [`enable`]d, until the
/// returned guard is dropped (with the source). A source that offers nothing
/// answers at once, and this ends.
pub fn start(name: String, obj: Arc<SourceBox>) -> Option<Stop> {
    let rt = tokio::runtime::Handle::try_current().ok()?;
    Some(Stop(
        rt.spawn(async move {
            enabled().await;
            offers(name, obj).await
        })
        .abort_handle(),
    ))
}

/// Stops the watch (and every descriptor's) when dropped.
pub struct Stop(tokio::task::AbortHandle);

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Takes the source's offers one at a time; each is watched by a task of
/// this one's, which ends with it.
async fn offers(name: String, obj: Arc<SourceBox>) {
    let mut watches = JoinSet::new();
    loop {
        let offer = tokio::select! {
            offer = request(&obj, r#"{"op":"next_watch"}"#.to_string()) => offer,
            Some(_) = watches.join_next(), if !watches.is_empty() => continue,
        };
        let offer = match offer {
            Ok(text) => match serde_json::from_str::<WatchOffer>(&text) {
                Ok(offer) => offer,
                Err(e) => {
                    tracing::warn!(source = %name, "a malformed descriptor offer: {e}; the source reads its own");
                    return;
                }
            },
            Err(e) if e.code == ErrorCode::Unsupported => return,
            Err(e) => {
                tracing::warn!(source = %name, "asking for descriptors to watch: {e}");
                return;
            }
        };
        if offer.fd < 0 {
            tracing::warn!(source = %name, fd = offer.fd, "a malformed descriptor offer");
            return;
        }
        // SAFETY: the offer passes us a duplicate the source made for us
        // (`IoWatch::offer`) and will never use again: it is ours to own.
        let fd = unsafe { OwnedFd::from_raw_fd(offer.fd) };
        watches.spawn(watch(name.clone(), obj.clone(), offer.watch, fd));
    }
}

/// Reads `fd` through its source whenever it is readable, until the source
/// says the watch has ended.
async fn watch(name: String, obj: Arc<SourceBox>, watch: u64, fd: OwnedFd) {
    // SAFETY: an `OwnedFd` is open until dropped, which only the `AsyncFd`
    // does, and always gives the same descriptor.
    let fd = match unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) } {
        Ok(fd) => fd,
        Err(e) => {
            // The source never hears of it: its calls would wait in vain.
            tracing::error!(source = %name, "cannot watch an upstream's descriptor: {e}");
            return;
        }
    };
    let readable = format!(r#"{{"op":"readable","watch":{watch}}}"#);
    // One timer for the watch's life, not one a wait: every reply waits here.
    let quiet = tokio::time::sleep(QUIET_CHECK);
    tokio::pin!(quiet);
    loop {
        let ready = tokio::select! {
            ready = fd.readable() => match ready {
                Ok(guard) => Some(guard),
                Err(e) => {
                    tracing::error!(source = %name, "watching an upstream's descriptor: {e}");
                    return;
                }
            },
            () = &mut quiet => {
                quiet.as_mut().reset(tokio::time::Instant::now() + QUIET_CHECK);
                None
            }
        };
        let answer = request(&obj, readable.clone()).await.and_then(|text| {
            readiness(&text)
                .map_err(|e| PluginError::internal(format!("malformed plugin reply: {e}")))
        });
        match answer {
            Ok(Readiness::Drained) => {
                if let Some(mut guard) = ready {
                    guard.clear_ready();
                }
            }
            // Still readable: not cleared, read again after a pause.
            Ok(Readiness::More) => tokio::time::sleep(BACKLOG_PAUSE).await,
            Ok(Readiness::Closed) => return,
            Err(e) => {
                tracing::error!(source = %name, "reading an upstream's descriptor: {e}");
                return;
            }
        }
    }
}

/// An answer to `readable`: the three texts the export glue writes read at
/// once, anything else through serde.
fn readiness(text: &str) -> serde_json::Result<Readiness> {
    match text {
        r#""drained""# => Ok(Readiness::Drained),
        r#""more""# => Ok(Readiness::More),
        r#""closed""# => Ok(Readiness::Closed),
        _ => serde_json::from_str(text),
    }
}

/// One source request, outside any call.
async fn request(obj: &Arc<SourceBox>, text: String) -> Result<String, PluginError> {
    let (ffi, _call) = CallCtx::new().into_ffi(None, None);
    match obj.request(RString::from(text), ffi).await.into_result() {
        Ok(json) => Ok(json.into_string()),
        Err(e) => Err(PluginError::from_json(e.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_reads_as_serde_does() {
        for r in [Readiness::Drained, Readiness::More, Readiness::Closed] {
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(readiness(&text).unwrap(), r);
            assert_eq!(readiness(&format!(" {text} ")).unwrap(), r);
        }
        assert!(readiness(r#""later""#).is_err());
    }
}
