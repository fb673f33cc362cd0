//! The Landlock layer: one ruleset per stage, built from the allow-lists
//! in `super`. Best effort over the kernel's Landlock ABI, but never
//! silently: what the kernel lacks comes back as one warning line.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, BitFlags, LandlockStatus, PathBeneath, PathFd, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{
    DEVICES_RW, LIBS_READ_EXEC, PROGRAM_READ, PROGRAM_READ_EXEC, PROGRAM_RW, Policy, SYSTEM_READ,
    SandboxError,
};

/// The newest ABI wf asks for: V6 adds signal and abstract-socket scoping
/// (the child cannot signal wf or reach its abstract sockets). Network
/// rights (V4) are not handled: sources reach their upstreams.
const TARGET: ABI = ABI::V6;

/// What each ABI below [`TARGET`] lacks, for the warning.
const MISSING: &[(ABI, &str)] = &[
    (ABI::V2, "file reparenting control (Landlock ABI 2)"),
    (ABI::V3, "truncate control (Landlock ABI 3)"),
    (ABI::V5, "device ioctl control (Landlock ABI 5)"),
    (
        ABI::V6,
        "signal and abstract unix socket scoping (Landlock ABI 6)",
    ),
];

struct Rule<'a> {
    path: &'a Path,
    access: BitFlags<AccessFs>,
    /// The path must exist (the plugin file, a data dir); system paths that
    /// a distribution lacks (/lib64, /etc/pki) are skipped.
    required: bool,
}

pub(super) fn enter(policy: &Policy) -> Result<Vec<String>, SandboxError> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let exec = read | AccessFs::Execute;
    let rw = AccessFs::from_all(TARGET) & !AccessFs::Execute;
    let mut rules: Vec<Rule> = Vec::new();
    fn add<'a>(
        rules: &mut Vec<Rule<'a>>,
        paths: impl IntoIterator<Item = &'a Path>,
        access: BitFlags<AccessFs>,
        required: bool,
    ) {
        rules.extend(paths.into_iter().map(|path| Rule {
            path,
            access,
            required,
        }));
    }
    let system = |list: &'static [&'static str]| list.iter().map(Path::new);
    add(&mut rules, [policy.plugin_file.as_path()], exec, true);
    add(&mut rules, system(LIBS_READ_EXEC), exec, false);
    add(&mut rules, system(SYSTEM_READ), read, false);
    let dev = AccessFs::ReadFile | AccessFs::WriteFile;
    add(&mut rules, system(DEVICES_RW), dev, false);
    add(
        &mut rules,
        policy.data_dirs.iter().map(|d| d.as_path()),
        rw,
        true,
    );
    if policy.starts_programs {
        add(&mut rules, system(PROGRAM_READ_EXEC), exec, false);
        add(&mut rules, system(PROGRAM_READ), read, false);
        add(&mut rules, system(PROGRAM_RW), rw, false);
        add(
            &mut rules,
            policy.programs.iter().map(|p| p.as_path()),
            exec,
            false,
        );
    }

    let err = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    let mut created = landlock::Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(err)?
        .scope(Scope::from_all(TARGET))
        .map_err(err)?
        .create()
        .map_err(err)?;
    for rule in rules {
        let fd = match PathFd::new(rule.path) {
            Ok(fd) => fd,
            Err(_) if !rule.required => continue,
            Err(e) => {
                return Err(SandboxError::Path {
                    path: rule.path.to_path_buf(),
                    why: e.to_string(),
                });
            }
        };
        // Rights that only make sense on a directory are refused on a file.
        let access = if rule.path.is_dir() {
            rule.access
        } else {
            rule.access & AccessFs::from_file(TARGET)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(err)?;
    }
    let status = created.restrict_self().map_err(err)?;
    Ok(warning(&status.landlock, &status.ruleset)
        .into_iter()
        .collect())
}

/// One line naming what the kernel lacks, or nothing when all is enforced.
fn warning(landlock: &LandlockStatus, ruleset: &RulesetStatus) -> Option<String> {
    match landlock {
        LandlockStatus::NotEnabled => Some(
            "Landlock is not enabled in this kernel (boot with lsm=…,landlock): the filesystem is NOT restricted".into(),
        ),
        LandlockStatus::NotImplemented => Some(
            "this kernel has no Landlock (Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK): the filesystem is NOT restricted".into(),
        ),
        LandlockStatus::Available { effective_abi, .. } => {
            let missing: Vec<&str> = MISSING
                .iter()
                .filter(|(abi, _)| effective_abi < abi)
                .map(|(_, what)| *what)
                .collect();
            if !missing.is_empty() {
                Some(format!(
                    "the kernel's Landlock lacks {}: the filesystem is restricted without it",
                    missing.join(", ")
                ))
            } else if *ruleset != RulesetStatus::FullyEnforced {
                Some(format!("Landlock ruleset only {ruleset:?}"))
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_kernel_is_named_in_one_line() {
        let old = LandlockStatus::Available {
            effective_abi: ABI::V3,
            kernel_abi: None,
        };
        let w = warning(&old, &RulesetStatus::PartiallyEnforced).unwrap();
        assert!(w.contains("device ioctl control (Landlock ABI 5)"), "{w}");
        assert!(w.contains("signal and abstract unix socket scoping"), "{w}");
        assert!(!w.contains("truncate"), "{w}");
        assert!(!w.contains('\n'));
        let new = LandlockStatus::Available {
            effective_abi: ABI::V6,
            kernel_abi: None,
        };
        assert_eq!(warning(&new, &RulesetStatus::FullyEnforced), None);
        assert!(
            warning(&LandlockStatus::NotImplemented, &RulesetStatus::NotEnforced)
                .unwrap()
                .contains("NOT restricted")
        );
    }
}
