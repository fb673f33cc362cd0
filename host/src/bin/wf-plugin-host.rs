//! `wf-plugin-host`: runs one plugin in a process of its own for wf (process
//! isolation, docs/operator-manual.md). Started by wf only: it speaks to wf
//! over the sockets wf passes as fds 3 and 4.

fn main() {
    std::process::exit(wf_host::plugins::process::child::main());
}
