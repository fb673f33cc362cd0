//! Since 1.7: the host's reactor watches a source's descriptors. A plugin's
//! own runtime has a thread that sleeps in its own `epoll` until an upstream
//! writes; every reply then costs two wake-ups, the plugin's thread and then
//! the host's that waits for the call. A source that reads a descriptor (the
//! MCP plugin: a stdio upstream's stdout) can offer it here instead. A host
//! that asks ([`crate::SourceRequest::NextWatch`]) gets a duplicate of it,
//! watches it in its own reactor and, each time it turns readable, sends
//! [`crate::SourceRequest::Readable`]: the source reads what is there on the
//! host's thread, inside the call that asked, and the calls it answers are
//! woken on that same thread (docs/performance/gateways.md).
//!
//! A host that never asks (an older one, or a plugin child's host) leaves
//! [`IoWatch::host_watches`] false, and the source reads as before.

#[cfg(unix)]
use std::collections::{HashMap, VecDeque};
#[cfg(unix)]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(unix)]
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// What one [`Pump::readable`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Readiness {
    /// Read until the descriptor had nothing more: wait until it is readable again.
    Drained,
    /// Stopped before the end (its consumer is behind): call again soon,
    /// without waiting for readiness.
    More,
    /// Nothing will be read from it any more: stop watching, close it.
    Closed,
}

impl Readiness {
    /// As JSON, the answer to `readable`, without serde.
    pub(crate) fn as_json(self) -> &'static str {
        match self {
            Readiness::Drained => r#""drained""#,
            Readiness::More => r#""more""#,
            Readiness::Closed => r#""closed""#,
        }
    }
}

/// Reads an offered descriptor when the host says it is readable. Runs on
/// the host's thread, inside this plugin's runtime context; it must not
/// block (the descriptor is non-blocking).
pub trait Pump: Send + Sync {
    /// Reads what the descriptor has now.
    fn readable(&self) -> Readiness;
}

/// The answer to [`crate::SourceRequest::NextWatch`]: a descriptor the host
/// now owns (a duplicate: closing it is the host's) and the id its
/// [`crate::SourceRequest::Readable`] names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchOffer {
    /// The id of the watch, for `readable`.
    pub watch: u64,
    /// The descriptor, readable and non-blocking, owned by the host.
    pub fd: i32,
}

/// A source's descriptors for the host to watch. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct IoWatch {
    #[cfg(unix)]
    inner: Arc<Inner>,
}

#[cfg(unix)]
#[derive(Default)]
struct Inner {
    /// A host has asked for descriptors: it watches what is offered.
    asked: AtomicBool,
    next: AtomicU64,
    state: Mutex<State>,
    offered_one: tokio::sync::Notify,
}

#[cfg(unix)]
#[derive(Default)]
struct State {
    /// Offers the host has not taken yet (their duplicates still ours).
    offers: VecDeque<(u64, std::os::fd::OwnedFd)>,
    pumps: HashMap<u64, Arc<dyn Pump>>,
}

/// An offered descriptor's registration: dropping it ends the watch (the
/// host's next `readable` answers [`Readiness::Closed`]).
pub struct Watched {
    #[cfg(unix)]
    inner: Arc<Inner>,
    #[cfg(unix)]
    id: u64,
}

impl Drop for Watched {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            let mut st = self.inner.lock();
            st.pumps.remove(&self.id);
            st.offers.retain(|(id, _)| *id != self.id);
        }
    }
}

#[cfg(unix)]
impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl IoWatch {
    /// A new, empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a host watches offered descriptors (it has asked for one).
    /// Until then, a source reads its descriptors itself.
    pub fn host_watches(&self) -> bool {
        #[cfg(unix)]
        return self.inner.asked.load(Ordering::Acquire);
        #[cfg(not(unix))]
        false
    }

    /// Offers `fd` (duplicated here; the caller keeps its own) for the host
    /// to watch; `pump` reads it when the host says it is readable. Fails
    /// when the descriptor cannot be duplicated: the caller then reads it
    /// itself.
    #[cfg(unix)]
    pub fn offer(
        &self,
        fd: std::os::fd::BorrowedFd<'_>,
        pump: Arc<dyn Pump>,
    ) -> std::io::Result<Watched> {
        let dup = fd.try_clone_to_owned()?;
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed) + 1;
        {
            let mut st = self.inner.lock();
            st.pumps.insert(id, pump);
            st.offers.push_back((id, dup));
        }
        self.inner.offered_one.notify_one();
        Ok(Watched {
            inner: self.inner.clone(),
            id,
        })
    }

    /// The host's side (and a test's): the next offer, when there is one
    /// (the host's long poll). Marks the host as watching. The duplicate
    /// passes to the caller only in the poll that answers, so an abandoned
    /// request loses nothing.
    pub async fn next(&self) -> Option<WatchOffer> {
        #[cfg(unix)]
        {
            use std::os::fd::IntoRawFd;
            self.inner.asked.store(true, Ordering::Release);
            loop {
                let notified = self.inner.offered_one.notified();
                if let Some((watch, fd)) = self.inner.lock().offers.pop_front() {
                    return Some(WatchOffer {
                        watch,
                        fd: fd.into_raw_fd(),
                    });
                }
                notified.await;
            }
        }
        #[cfg(not(unix))]
        None
    }

    /// The host's side (and a test's): watch `watch` is readable; its pump
    /// reads, or [`Readiness::Closed`] when it has ended.
    pub fn readable(&self, watch: u64) -> Readiness {
        #[cfg(unix)]
        {
            let pump = self.inner.lock().pumps.get(&watch).cloned();
            match pump {
                Some(p) => p.readable(),
                None => Readiness::Closed,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = watch;
            Readiness::Closed
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn readiness_is_written_as_serde_writes_it() {
        for r in [Readiness::Drained, Readiness::More, Readiness::Closed] {
            assert_eq!(r.as_json(), serde_json::to_string(&r).unwrap());
        }
    }

    struct Count(AtomicUsize);
    impl Pump for Count {
        fn readable(&self) -> Readiness {
            self.0.fetch_add(1, Ordering::Relaxed);
            Readiness::Drained
        }
    }

    /// An offer reaches the host as a duplicate it owns, marks the host as
    /// watching, and its pump runs until the registration is dropped.
    #[tokio::test]
    async fn offers_pass_duplicates_and_pumps_end_with_their_registration() {
        let watch = IoWatch::new();
        assert!(!watch.host_watches());
        let (r, _w) = std::io::pipe().unwrap();
        let r: OwnedFd = r.into();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let watched = watch.offer(r.as_fd(), count.clone()).unwrap();
        let offer = watch.next().await.unwrap();
        assert!(watch.host_watches());
        assert_ne!(offer.fd, std::os::fd::AsRawFd::as_raw_fd(&r));
        // SAFETY: the offer's descriptor is a fresh duplicate passed to us.
        drop(unsafe { OwnedFd::from_raw_fd(offer.fd) });
        assert_eq!(watch.readable(offer.watch), Readiness::Drained);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        drop(watched);
        assert_eq!(watch.readable(offer.watch), Readiness::Closed);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
    }

    /// An offer dropped before the host took it is never handed out; a
    /// waiting host gets the next one.
    #[tokio::test]
    async fn a_withdrawn_offer_is_not_handed_out() {
        let watch = IoWatch::new();
        let (r, _w) = std::io::pipe().unwrap();
        let r: OwnedFd = r.into();
        let first = watch
            .offer(r.as_fd(), Arc::new(Count(AtomicUsize::new(0))))
            .unwrap();
        drop(first);
        let waiting = tokio::spawn({
            let watch = watch.clone();
            async move { watch.next().await.unwrap() }
        });
        tokio::task::yield_now().await;
        let second = watch
            .offer(r.as_fd(), Arc::new(Count(AtomicUsize::new(0))))
            .unwrap();
        let offer = waiting.await.unwrap();
        assert_eq!(offer.watch, 2);
        // SAFETY: as above.
        drop(unsafe { OwnedFd::from_raw_fd(offer.fd) });
        drop(second);
    }
}
