//! `wf-plugin-host`: runs one plugin in a process of its own for wf (process
//! isolation, docs/operator-manual.md). Started by wf only: it speaks to wf
//! over the sockets wf passes as fds 3 and 4.

#[cfg(unix)]
fn main() {
    std::process::exit(wf_host::plugins::process::child::main());
}

/// Process isolation is Unix's (docs/manual/plugins.md): wf never starts
/// this program elsewhere.
#[cfg(not(unix))]
fn main() {
    eprintln!("wf-plugin-host: process isolation runs on Linux and macOS only");
    std::process::exit(2);
}
