//! Whether a plugin folder or file is safe to load from, decided before
//! anything is loaded: loading a library runs its constructors, so a file
//! another user could have written is code another user chose. The rule is
//! ssh's for its keys: the folder, the file and every folder above them must
//! be owned by wf's user or root and not writable by group or others (a
//! sticky folder such as /tmp is fine above the plugin folder, not as it).

use std::path::{Path, PathBuf};

/// Why `dir` is unsafe to load plugins from, if it is.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let real =
        std::fs::canonicalize(dir).map_err(|e| format!("plugin folder {}: {e}", dir.display()))?;
    check_one(&real, Kind::Folder).map_err(|why| format!("plugin folder {why}"))?;
    check_ancestors(&real)
}

/// Why `file` (in an already checked folder) is unsafe to load, if it is.
/// A symbolic link is judged by its target and the folders above it.
pub fn check_file(file: &Path, dir: &Path) -> Result<(), String> {
    let real = std::fs::canonicalize(file).map_err(|e| format!("{e}"))?;
    check_one(&real, Kind::File).map_err(|why| format!("plugin file {why}"))?;
    let in_dir = std::fs::canonicalize(dir).ok();
    match real.parent() {
        Some(parent) if Some(parent) != in_dir.as_deref() => {
            check_one(parent, Kind::Folder)
                .map_err(|why| format!("the folder of the plugin file's link target: {why}"))?;
            check_ancestors(parent)
        }
        _ => Ok(()),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Folder,
    File,
    Above,
}

fn check_ancestors(real: &Path) -> Result<(), String> {
    let mut above: Option<PathBuf> = real.parent().map(Path::to_path_buf);
    while let Some(p) = above {
        check_one(&p, Kind::Above)
            .map_err(|why| format!("{why} (it holds plugin folder {})", real.display()))?;
        above = p.parent().map(Path::to_path_buf);
    }
    Ok(())
}

#[cfg(unix)]
fn check_one(path: &Path, kind: Kind) -> Result<(), String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let m = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let me = unsafe { libc::geteuid() };
    let (owner, mode) = (m.uid(), m.permissions().mode() & 0o7777);
    if owner != me && owner != 0 {
        return Err(format!(
            "{} is owned by uid {owner}, not by wf's user (uid {me}) or root: `chown {me} {}` (or start wf with --allow-insecure-plugin-dir)",
            path.display(),
            path.display()
        ));
    }
    let writable = mode & 0o022;
    let sticky = mode & 0o1000 != 0;
    if writable != 0 && !(kind == Kind::Above && sticky) {
        let who = if mode & 0o002 != 0 {
            "world-writable"
        } else {
            "group-writable"
        };
        let what = if kind == Kind::File {
            "put their code in it"
        } else {
            "plant a library wf would load"
        };
        return Err(format!(
            "{} is {who} (mode {mode:o}): another user could {what}; `chmod go-w {}` (or start wf with --allow-insecure-plugin-dir)",
            path.display(),
            path.display()
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_one(_path: &Path, _kind: Kind) -> Result<(), String> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn private_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wf-safety-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    #[test]
    fn writable_folders_and_files_are_refused() {
        let d = private_dir("modes");
        assert_eq!(check_dir(&d), Ok(()));
        let f = d.join("libx.so");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(check_file(&f, &d), Ok(()));

        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o664)).unwrap();
        let why = check_file(&f, &d).unwrap_err();
        assert!(
            why.contains("group-writable") && why.contains("chmod go-w"),
            "{why}"
        );

        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let why = check_dir(&d).unwrap_err();
        assert!(
            why.contains("world-writable") && why.contains("1777"),
            "{why}"
        );

        // A sticky world-writable folder above is fine (that is /tmp).
        let inner = d.join("plugins");
        std::fs::create_dir(&inner).unwrap();
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check_dir(&inner), Ok(()));
        // A non-sticky one is not: it could rename the plugin folder away.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = check_dir(&inner).unwrap_err();
        assert!(why.contains("holds plugin folder"), "{why}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
