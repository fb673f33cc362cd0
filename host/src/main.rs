/// mimalloc rather than glibc's malloc: per call and per workflow node, wf
/// makes many small, short-lived allocations (JSON values), where glibc's
/// arenas spent a quarter of wf's time (docs/benchmarks.md). Plugins keep
/// their own allocators: everything crossing the ABI frees on its own side.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(wf_host::cli::main());
}
