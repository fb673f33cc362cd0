/// mimalloc rather than glibc's malloc: per call and per workflow node, wf
/// makes many small, short-lived allocations (JSON values), where glibc's
/// arenas spent a quarter of wf's time (docs/benchmarks.md). Plugins keep
/// their own allocators: everything crossing the ABI frees on its own side.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    no_huge_pages();
    // Start-up code leaves wf's page tables once it has served its turn.
    wf_host::plugins::resident::enable();
    std::process::exit(wf_host::cli::main());
}

/// Transparent huge pages off for wf's own memory. mimalloc advises huge
/// pages on its arenas, and where THP is `madvise` (Debian's default) those
/// 2 MiB pages stay mostly empty: they were two thirds of wf's heap after
/// 1,000 calls (docs/performance/gateways.md). The flag is inherited, so the
/// mcp source clears it for the upstreams it starts; `WF_KEEP_THP=1` keeps
/// the system's setting.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("WF_KEEP_THP").is_none_or(|v| v != "1") {
        // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and
        // touches no memory of ours.
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if rc != 0 {
            eprintln!(
                "wf: could not turn transparent huge pages off: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}
