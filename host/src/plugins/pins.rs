//! Pinned plugin files: `plugins.lock` beside the config records each
//! pinned file's sha256, plugin name and version (`wf plugins --pin FILE`).
//! A pinned file whose bytes changed is refused before it is loaded (one
//! line naming both hashes); the other plugins load. Whether a plugin is
//! pinned also decides its default isolation: an unpinned third-party
//! plugin runs out of process unless the operator opts in.
//!
//! The file is TOML, one `[[pin]]` table per file:
//!
//! ```toml
//! [[pin]]
//! file = "/srv/wf/plugins/libweather.so"
//! name = "weather"
//! version = "1.4.0"
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The lock file's name, beside the config file (or in the working
/// directory when wf runs without one).
pub const LOCK_FILE: &str = "plugins.lock";

/// `[plugins.<name>]` key with which an operator runs an unpinned
/// third-party plugin in process anyway.
pub const IN_PROCESS_OPT_IN: &str = "allow_unpinned_in_process";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// The plugin file, absolute and with links resolved.
    pub file: PathBuf,
    pub name: String,
    pub version: String,
    /// Lower-case hex.
    pub sha256: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pins {
    #[serde(default, rename = "pin")]
    pub pins: Vec<Pin>,
}

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a plugins.lock: {why}")]
    Parse { path: PathBuf, why: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where `plugins.lock` lives for a config whose folder is `config_dir`.
pub fn lock_path(config_dir: &Path) -> PathBuf {
    config_dir.join(LOCK_FILE)
}

/// The sha256 of a file's bytes, lower-case hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn key(file: &Path) -> PathBuf {
    std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf())
}

impl Pins {
    /// The pins in `path`; none when the file does not exist.
    pub fn load(path: &Path) -> Result<Self, PinError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(PinError::Read {
                    path: path.into(),
                    source,
                });
            }
        };
        toml::from_str(&text).map_err(|e| PinError::Parse {
            path: path.into(),
            why: crate::text::one_line(&e.to_string()),
        })
    }

    pub fn save(&self, path: &Path) -> Result<(), PinError> {
        let body = toml::to_string_pretty(self).map_err(|e| PinError::Parse {
            path: path.into(),
            why: e.to_string(),
        })?;
        let text = format!(
            "# Pinned plugin files, written by `wf plugins --pin FILE` (docs/operator-manual.md,\n# \"Pinning plugins\"). wf refuses a pinned file whose sha256 no longer matches.\n\n{body}"
        );
        std::fs::write(path, text).map_err(|source| PinError::Write {
            path: path.into(),
            source,
        })
    }

    /// The pin of `file`, if any.
    pub fn get(&self, file: &Path) -> Option<&Pin> {
        let file = key(file);
        self.pins.iter().find(|p| p.file == file)
    }

    /// Records (or replaces) the pin of `file`.
    pub fn pin(&mut self, file: &Path, name: &str, version: &str, sha256: String) -> Pin {
        let file = key(file);
        self.pins.retain(|p| p.file != file);
        let pin = Pin {
            file,
            name: name.into(),
            version: version.into(),
            sha256,
        };
        self.pins.push(pin.clone());
        self.pins.sort_by(|a, b| a.file.cmp(&b.file));
        pin
    }

    /// Forgets the pin of `file` (before pinning a new build of it).
    pub fn unpin(&mut self, file: &Path) {
        let file = key(file);
        self.pins.retain(|p| p.file != file);
    }

    /// Ok when `file` is not pinned or its bytes are the pinned ones; the
    /// refusal line otherwise. Runs before the library is loaded (loading
    /// runs its constructors).
    pub fn check(&self, file: &Path) -> Result<(), String> {
        let Some(pin) = self.get(file) else {
            return Ok(());
        };
        match sha256_file(file) {
            Ok(now) if now == pin.sha256 => Ok(()),
            Ok(now) => Err(format!(
                "pinned file changed: {LOCK_FILE} has sha256 {} ({} {}), the file has sha256 {now}; if you trust the new build, pin it again: wf plugins --pin {}",
                pin.sha256,
                pin.name,
                pin.version,
                file.display()
            )),
            Err(e) => Err(format!("pinned file unreadable: {e}")),
        }
    }

    /// `file` is pinned and its bytes are the pinned ones.
    pub fn is_pinned(&self, file: &Path) -> bool {
        self.get(file).is_some() && self.check(file).is_ok()
    }
}

/// May a plugin run in process? Bundled and pinned plugins may; an
/// unpinned third-party plugin only with the operator's opt-in
/// ([`IN_PROCESS_OPT_IN`]), and then with a warning (Ok(Some)). Err: the
/// refusal line.
pub fn in_process_allowed(
    name: &str,
    bundled: bool,
    pinned: bool,
    opted_in: bool,
) -> Result<Option<String>, String> {
    if bundled || pinned {
        return Ok(None);
    }
    let reach = "wf's memory and environment: every source's tokens and ${VAR} secrets, the HTTP and admin tokens, and every file wf's user can read";
    if opted_in {
        Ok(Some(format!(
            "plugin {name:?} is unpinned and runs in process ({IN_PROCESS_OPT_IN} = true): it can reach {reach}"
        )))
    } else {
        Err(format!(
            "plugin {name:?} is unpinned: isolation = \"in_process\" would give it {reach}; pin it (wf plugins --pin FILE) or set [plugins.{name}] {IN_PROCESS_OPT_IN} = true"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_refused_naming_both_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("libx.so");
        std::fs::write(&file, b"first build").unwrap();
        let lock = lock_path(dir.path());
        let mut pins = Pins::load(&lock).unwrap();
        assert!(pins.pins.is_empty());
        let first = sha256_file(&file).unwrap();
        // sha256("first build"), computed independently.
        assert_eq!(first.len(), 64);
        pins.pin(&file, "x", "1.0.0", first.clone());
        pins.save(&lock).unwrap();

        let pins = Pins::load(&lock).unwrap();
        assert!(pins.is_pinned(&file));
        assert_eq!(pins.check(&file), Ok(()));

        std::fs::write(&file, b"another build").unwrap();
        let second = sha256_file(&file).unwrap();
        assert_ne!(first, second);
        let why = pins.check(&file).unwrap_err();
        assert!(why.contains(&first) && why.contains(&second), "{why}");
        assert!(!why.contains('\n'));
        assert!(!pins.is_pinned(&file));

        let other = dir.path().join("liby.so");
        std::fs::write(&other, b"y").unwrap();
        assert_eq!(pins.check(&other), Ok(()), "an unpinned file loads");
        assert!(!pins.is_pinned(&other));
    }

    #[test]
    fn the_hash_is_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("abc");
        std::fs::write(&file, b"abc").unwrap();
        assert_eq!(
            sha256_file(&file).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_lock_file_is_readable_toml() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("libx.so");
        std::fs::write(&file, b"x").unwrap();
        let mut pins = Pins::default();
        pins.pin(&file, "x", "1.0.0", sha256_file(&file).unwrap());
        let lock = lock_path(dir.path());
        pins.save(&lock).unwrap();
        let text = std::fs::read_to_string(&lock).unwrap();
        assert!(text.starts_with("# Pinned plugin files"), "{text}");
        assert!(
            text.contains("[[pin]]") && text.contains("name = \"x\""),
            "{text}"
        );
        std::fs::write(&lock, "pin = 3").unwrap();
        assert!(
            Pins::load(&lock)
                .unwrap_err()
                .to_string()
                .contains("not a plugins.lock")
        );
    }

    #[test]
    fn in_process_needs_a_pin_or_an_opt_in() {
        assert_eq!(in_process_allowed("std", true, false, false), Ok(None));
        assert_eq!(in_process_allowed("w", false, true, false), Ok(None));
        let refused = in_process_allowed("w", false, false, false).unwrap_err();
        assert!(
            refused.contains(IN_PROCESS_OPT_IN) && refused.contains("tokens"),
            "{refused}"
        );
        let warned = in_process_allowed("w", false, false, true)
            .unwrap()
            .unwrap();
        assert!(warned.contains("wf's memory and environment"), "{warned}");
    }
}
