fn main() {
    std::process::exit(wf_host::cli::main());
}
