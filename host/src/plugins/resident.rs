//! What wf keeps resident once start-up is over.
//!
//! Most of wf's memory at rest is code: pages of the `wf` executable and of
//! the plugin libraries loaded in process (code and constants) that the
//! kernel mapped while wf started (config, store, plugin loading,
//! discovery), each fault mapping up to 64 KiB around the page it needed.
//! Once the first discovery is done those pages leave wf's page tables, so
//! what stays resident is what wf runs while it serves: the call path maps
//! back what it uses (minor faults: the pages stay in the page cache).
//! Measured in docs/performance/gateways.md. Only the `wf` binary turns this
//! on ([`enable`]), not embedders or tests; `WF_KEEP_CODE_PAGES=1` keeps the
//! pages.

use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Lets [`after_start`] release the start-up code (the `wf` binary calls it).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Called once the first discovery is done: releases the start-up code
/// when [`enable`]d, off the async workers.
pub fn after_start() {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("wf-trim".into())
        .spawn(|| {
            release_startup_code();
        });
}

/// Returns the allocator's free memory to the system, and unmaps the pages
/// of read-only file mappings (code, constants) that are the file's own;
/// private copies (relocated constants) stay. Returns how many KiB it
/// unmapped (0 where unsupported).
pub fn release_startup_code() -> u64 {
    if std::env::var_os("WF_KEEP_CODE_PAGES").is_some_and(|v| v == "1") {
        tracing::debug!("start-up code pages kept (WF_KEEP_CODE_PAGES=1)");
        return 0;
    }
    collect_heap();
    #[cfg(target_os = "linux")]
    {
        linux::release()
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// mimalloc (the `wf` binary's allocator) and the C heap (SQLite, the
/// plugins' Rust allocations) give their free pages back.
fn collect_heap() {
    use mimalloc as _;
    unsafe extern "C" {
        // mimalloc's own; its Rust declaration is behind a feature.
        fn mi_collect(force: bool);
    }
    // SAFETY: mi_collect takes a plain flag and returns free pages only.
    unsafe { mi_collect(true) }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only returns free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::{Read, Seek, SeekFrom};

    /// `/proc/PID/pagemap`: the page is mapped.
    const PRESENT: u64 = 1 << 63;
    /// `/proc/PID/pagemap`: the page is the file's own (page cache), not a
    /// private copy.
    const FILE_PAGE: u64 = 1 << 61;

    /// A read-only private mapping of a file.
    #[derive(Debug, PartialEq)]
    pub(super) struct Mapping {
        pub start: usize,
        pub end: usize,
    }

    pub(super) fn release() -> u64 {
        let (maps, mut pagemap) = match (
            std::fs::read_to_string("/proc/self/maps"),
            std::fs::File::open("/proc/self/pagemap"),
        ) {
            (Ok(m), Ok(p)) => (m, p),
            (Err(e), _) | (_, Err(e)) => {
                tracing::debug!("cannot read this process's page map: {e}");
                return 0;
            }
        };
        // SAFETY: sysconf takes a constant and reads no memory of ours.
        let page = match usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }) {
            Ok(p) if p > 0 => p,
            _ => return 0,
        };
        let mut released = 0;
        for m in read_only_file_maps(&maps) {
            let Ok(entries) = read_entries(&mut pagemap, &m, page) else {
                continue;
            };
            for (first, count) in file_page_runs(&entries) {
                let at = m.start + first * page;
                // SAFETY: the pages are mapped from a file, privately and
                // read-only, and are still the file's own (no private
                // copy): MADV_DONTNEED unmaps them, and the next access
                // maps the file's same bytes again. Nothing can write to a
                // read-only mapping, so none becomes a private copy meanwhile.
                let rc = unsafe {
                    libc::madvise(at as *mut libc::c_void, count * page, libc::MADV_DONTNEED)
                };
                if rc == 0 {
                    released += (count * page / 1024) as u64;
                } else {
                    tracing::debug!("madvise at {at:#x}: {}", std::io::Error::last_os_error());
                }
            }
        }
        tracing::debug!(kib = released, "start-up code pages released");
        released
    }

    /// A mapping's pagemap entries, one per page.
    fn read_entries(
        pagemap: &mut std::fs::File,
        m: &Mapping,
        page: usize,
    ) -> std::io::Result<Vec<u64>> {
        let pages = (m.end - m.start) / page;
        let mut buf = vec![0u8; pages * 8];
        pagemap.seek(SeekFrom::Start((m.start / page * 8) as u64))?;
        pagemap.read_exact(&mut buf)?;
        Ok(buf
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect())
    }

    /// The private, read-only mappings of files (code `r-xp`, constants
    /// `r--p`) in a `/proc/PID/maps` text.
    pub(super) fn read_only_file_maps(maps: &str) -> Vec<Mapping> {
        maps.lines()
            .filter_map(|line| {
                let mut parts = line.split_ascii_whitespace();
                let (start, end) = parts.next()?.split_once('-')?;
                let perms = parts.next()?;
                let path = parts.nth(3)?;
                let wanted = (perms == "r-xp" || perms == "r--p") && path.starts_with('/');
                wanted.then_some(Mapping {
                    start: usize::from_str_radix(start, 16).ok()?,
                    end: usize::from_str_radix(end, 16).ok()?,
                })
            })
            .collect()
    }

    /// Runs (first page, page count) of mapped pages that are the file's
    /// own, from a mapping's pagemap entries.
    pub(super) fn file_page_runs(entries: &[u64]) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            if e & PRESENT == 0 || e & FILE_PAGE == 0 {
                continue;
            }
            match runs.last_mut() {
                Some((first, count)) if *first + *count == i => *count += 1,
                _ => runs.push((i, 1)),
            }
        }
        runs
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::linux::{Mapping, file_page_runs, read_only_file_maps};

    const MAPS: &str = "\
55eae7474000-55eae7564000 r--p 00000000 00:2a 1234   /opt/wf/wf
55eae7564000-55eae7600000 r-xp 000f0000 00:2a 1234   /opt/wf/wf
55eae7600000-55eae7610000 rw-p 0018c000 00:2a 1234   /opt/wf/wf
7f7313e75000-7f7313eb6000 r--s 00000000 00:2a 99     /state/wf.db-shm
7fff6507f000-7fff650b1000 r-xp 00000000 00:00 0      [vdso]
7fff6507f000-7fff650b1000 rw-p 00000000 00:00 0
";

    #[test]
    fn picks_private_read_only_file_mappings() {
        assert_eq!(
            read_only_file_maps(MAPS),
            vec![
                Mapping {
                    start: 0x55eae7474000,
                    end: 0x55eae7564000
                },
                Mapping {
                    start: 0x55eae7564000,
                    end: 0x55eae7600000
                },
            ]
        );
    }

    #[test]
    fn runs_skip_absent_pages_and_private_copies() {
        const P: u64 = 1 << 63;
        const F: u64 = 1 << 61;
        // file, file, absent, copy (anonymous), file, file, file
        let entries = [P | F, P | F, F, P, P | F, P | F, P | F];
        assert_eq!(file_page_runs(&entries), vec![(0, 2), (4, 3)]);
        assert_eq!(file_page_runs(&[]), vec![]);
    }

    #[test]
    fn releasing_keeps_this_process_running() {
        // The test binary's own code and constants are unmapped and mapped
        // back on use; its relocated constants (private copies) stay.
        let released = super::release_startup_code();
        assert!(released > 0, "nothing released");
        let v: Vec<String> = (0..3).map(|i| format!("still {i}")).collect();
        assert_eq!(v.join(","), "still 0,still 1,still 2");
    }
}
