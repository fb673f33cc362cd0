//! The seccomp-BPF layer (Firecracker's `seccompiler`: a BPF compiler with
//! no dependency but libc). Denied syscalls return `EPERM` rather than
//! killing the child, so a plugin can report what it was refused.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

use super::{DENIED_SYSCALLS, EXEC_SYSCALLS, Policy, SandboxError};

fn number(name: &str) -> Option<i64> {
    Some(match name {
        "ptrace" => libc::SYS_ptrace,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "kcmp" => libc::SYS_kcmp,
        "pidfd_getfd" => libc::SYS_pidfd_getfd,
        "perf_event_open" => libc::SYS_perf_event_open,
        "keyctl" => libc::SYS_keyctl,
        "add_key" => libc::SYS_add_key,
        "request_key" => libc::SYS_request_key,
        "execve" => libc::SYS_execve,
        "execveat" => libc::SYS_execveat,
        _ => return None,
    })
}

pub(super) fn denied(policy: &Policy) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = DENIED_SYSCALLS.to_vec();
    if !policy.starts_programs {
        names.extend_from_slice(EXEC_SYSCALLS);
    }
    names
}

pub(super) fn enter(policy: &Policy) -> Result<Vec<String>, SandboxError> {
    let arch = match TargetArch::try_from(std::env::consts::ARCH) {
        Ok(a) => a,
        Err(_) => {
            return Ok(vec![format!(
                "seccomp filters are not built for {} (x86_64, aarch64 and riscv64 only): syscalls are NOT restricted",
                std::env::consts::ARCH
            )]);
        }
    };
    let mut rules = BTreeMap::new();
    for name in denied(policy) {
        let nr =
            number(name).ok_or_else(|| SandboxError::Seccomp(format!("no number for {name}")))?;
        // No conditions: every call of it matches.
        rules.insert(nr, Vec::new());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| SandboxError::Seccomp(e.to_string()))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SandboxError::Seccomp(e.to_string()))?;
    // Every thread of the child (TSYNC), should one exist already.
    match seccompiler::apply_filter_all_threads(&program) {
        Ok(()) => Ok(Vec::new()),
        Err(seccompiler::Error::Seccomp(e)) if e.raw_os_error() == Some(libc::EINVAL) => {
            Ok(vec![
                "this kernel has no seccomp filters (CONFIG_SECCOMP_FILTER): syscalls are NOT restricted".into(),
            ])
        }
        Err(e) => Err(SandboxError::Seccomp(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_syscall_has_a_number() {
        for name in DENIED_SYSCALLS.iter().chain(EXEC_SYSCALLS) {
            assert!(number(name).is_some(), "{name}");
        }
        let p = Policy::new("/x.so", super::super::Sandbox::Strict);
        assert!(denied(&p).contains(&"execve"));
        assert!(!denied(&p.starts_programs(true)).contains(&"execve"));
    }
}
