//! One poll for every file `wf serve` watches: the config file, the policy
//! files and the tools lock. One thread stats them all once a tick, so an
//! idle wf wakes once a tick, not once per watcher per tick (three watchers,
//! each on its own timer, fired 14 times a second), and not at
//! all while nothing is watched.
//!
//! Polling, not inotify: it sees a file that an editor replaces, one on a
//! network or container mount, and one that appears after start, the same way
//! everywhere, for a `stat` per file per tick.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime};

/// How often the watched files are looked at.
pub const TICK: Duration = Duration::from_millis(250);

/// A file's size and modification time; `None`: it cannot be read.
pub type Stamp = Option<(u64, Option<SystemTime>)>;

/// What a watch saw of its files: each path with its stamp.
pub type Seen = Vec<(PathBuf, Stamp)>;

/// Work a watch starts when its files changed; run on its own task.
pub type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The stamp of `path` now.
pub fn stamp(path: &std::path::Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

/// The stamps of `paths` now.
pub fn seen(paths: Vec<PathBuf>) -> Seen {
    paths
        .into_iter()
        .map(|p| {
            let s = stamp(&p);
            (p, s)
        })
        .collect()
}

/// One watcher: which files, how long an edit must hold still, and what to
/// do then.
pub struct Watch {
    /// The files to watch now (they may change with the config); `None`
    /// ends the watch (its owner is gone).
    files: Box<dyn FnMut() -> Option<Vec<PathBuf>> + Send>,
    /// Called once the files changed and then held still for `settle`;
    /// may hand back work to run on a task of its own.
    changed: Box<dyn FnMut() -> Option<Work> + Send>,
    settle: Duration,
    seen: Option<Seen>,
    /// A change not yet settled: what was seen, and since when.
    moving: Option<(Seen, Instant)>,
}

impl Watch {
    /// Watches `files`; `baseline` is what counts as unchanged (`None`:
    /// what the first tick sees). Editors write in several steps, so
    /// `changed` runs only after the files held still for `settle` (at the
    /// tick's granularity; zero: at the first tick that sees the change).
    pub fn new(
        baseline: Option<Seen>,
        settle: Duration,
        files: impl FnMut() -> Option<Vec<PathBuf>> + Send + 'static,
        changed: impl FnMut() -> Option<Work> + Send + 'static,
    ) -> Self {
        Watch {
            files: Box::new(files),
            changed: Box::new(changed),
            settle,
            seen: baseline,
            moving: None,
        }
    }

    /// One look at the files at `now`: `None` when the watch has ended,
    /// else the work its change asks for, if any.
    fn look(&mut self, now: Instant) -> Option<Option<Work>> {
        let current = seen((self.files)()?);
        let Some(before) = &self.seen else {
            self.seen = Some(current);
            return Some(None);
        };
        if *before == current {
            self.moving = None;
            return Some(None);
        }
        let since = match &self.moving {
            Some((moving, since)) if *moving == current => *since,
            _ => now,
        };
        if now.duration_since(since) < self.settle {
            self.moving = Some((current, since));
            return Some(None);
        }
        self.moving = None;
        self.seen = Some(current);
        Some((self.changed)())
    }
}

/// The poll: a handle that adds watches to its thread. The thread ends when
/// every handle is dropped.
///
/// A thread of its own, not a task: a tokio timer more than 64 ms away
/// wakes its runtime twice (once when the timer wheel moves it down a level,
/// 10–60 ms early, and once when it fires), so a task ticking four times a
/// second woke wf eight times; the thread's timed wait wakes once a tick,
/// and a runtime worker only when a watch has work to run.
#[derive(Clone)]
pub struct FileWatch {
    add: std::sync::mpsc::Sender<Watch>,
}

impl FileWatch {
    /// Starts the poll, looking every `tick`; work runs on the current
    /// runtime.
    pub fn start(tick: Duration) -> Self {
        let (add, rx) = std::sync::mpsc::channel();
        let runtime = tokio::runtime::Handle::current();
        let started = std::thread::Builder::new()
            .name("wf-file-watch".into())
            .spawn(move || poll(&rx, tick, &runtime));
        if let Err(e) = started {
            tracing::warn!("cannot start the file watch thread; files are not watched: {e}");
        }
        FileWatch { add }
    }

    /// Adds a watch; it lasts until its `files` says `None`.
    pub fn add(&self, watch: Watch) {
        // A send fails only when the thread did not start (logged there).
        let _ = self.add.send(watch);
    }
}

fn poll(add: &std::sync::mpsc::Receiver<Watch>, tick: Duration, runtime: &tokio::runtime::Handle) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut watches: Vec<Watch> = Vec::new();
    let mut next = Instant::now() + tick;
    loop {
        // Nothing watched: no timed wait, only a wait for the first watch.
        if watches.is_empty() {
            match add.recv() {
                Ok(w) => watches.push(w),
                Err(_) => return,
            }
            next = Instant::now() + tick;
        }
        match add.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok(w) => watches.push(w),
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                next += tick;
                let now = Instant::now();
                watches.retain_mut(|w| match w.look(now) {
                    None => false,
                    Some(work) => {
                        if let Some(work) = work {
                            runtime.spawn(work);
                        }
                        true
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(dir: &std::path::Path, settle: Duration) -> (Watch, Arc<AtomicUsize>) {
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        let file = dir.join("watched");
        let w = Watch::new(
            Some(seen(vec![file.clone()])),
            settle,
            move || Some(vec![file.clone()]),
            move || {
                f.fetch_add(1, Ordering::SeqCst);
                None
            },
        );
        (w, fired)
    }

    #[test]
    fn a_change_fires_once_it_held_still_for_the_settle_time() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, fired) = counting(dir.path(), Duration::from_millis(300));
        let t0 = Instant::now();
        assert!(w.look(t0).unwrap().is_none());
        std::fs::write(dir.path().join("watched"), "a").unwrap();
        w.look(t0 + Duration::from_millis(250));
        assert_eq!(fired.load(Ordering::SeqCst), 0, "not settled yet");
        // Written again before it settled: the wait starts over.
        std::fs::write(dir.path().join("watched"), "ab").unwrap();
        w.look(t0 + Duration::from_millis(500));
        w.look(t0 + Duration::from_millis(750));
        assert_eq!(fired.load(Ordering::SeqCst), 0, "moved at 500 ms");
        w.look(t0 + Duration::from_millis(1000));
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        // Unchanged since: nothing more.
        w.look(t0 + Duration::from_millis(2000));
        assert_eq!(fired.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn no_settle_time_fires_at_the_first_look_and_a_removed_file_counts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("watched"), "a").unwrap();
        let (mut w, fired) = counting(dir.path(), Duration::ZERO);
        std::fs::remove_file(dir.path().join("watched")).unwrap();
        w.look(Instant::now());
        assert_eq!(fired.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_watch_without_a_baseline_takes_the_first_look_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        let file = dir.path().join("watched");
        std::fs::write(&file, "a").unwrap();
        let mut w = Watch::new(
            None,
            Duration::ZERO,
            move || Some(vec![file.clone()]),
            move || {
                f.fetch_add(1, Ordering::SeqCst);
                None
            },
        );
        w.look(Instant::now());
        w.look(Instant::now());
        assert_eq!(fired.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn the_thread_runs_the_work_and_drops_ended_watches() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("watched");
        let ran = Arc::new(tokio::sync::Notify::new());
        let r = ran.clone();
        let alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let looks = Arc::new(AtomicUsize::new(0));
        let (a, l) = (alive.clone(), looks.clone());
        let tick = Duration::from_millis(20);
        let watch = FileWatch::start(tick);
        watch.add(Watch::new(
            Some(seen(vec![file.clone()])),
            Duration::ZERO,
            move || {
                l.fetch_add(1, Ordering::SeqCst);
                a.load(Ordering::SeqCst).then(|| vec![file.clone()])
            },
            move || {
                let r = r.clone();
                Some(Box::pin(async move { r.notify_one() }))
            },
        ));
        std::fs::write(dir.path().join("watched"), "a").unwrap();
        tokio::time::timeout(Duration::from_secs(5), ran.notified())
            .await
            .expect("the work ran");
        alive.store(false, Ordering::SeqCst);
        tokio::time::sleep(tick * 3).await;
        let after = looks.load(Ordering::SeqCst);
        tokio::time::sleep(tick * 5).await;
        assert_eq!(
            looks.load(Ordering::SeqCst),
            after,
            "an ended watch is not looked at"
        );
    }
}
