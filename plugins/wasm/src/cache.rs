//! Compiled code on disk, by the sha256 of the component's bytes and of the
//! engine's configuration and version: a component is compiled once, and
//! later starts (and restarts of wf) map the compiled file instead.
//!
//! Deserializing compiled code runs it as native code, so only files this
//! plugin wrote are read: they live in a folder it made (mode 0700), are
//! written to a temporary name and renamed (mode 0600), and a file not owned
//! by this user or writable by anyone else is compiled afresh and replaced.

use std::hash::Hasher;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Lower-case hex of a sha256.
pub fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The sha256 of `bytes`, hex.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Feeds `std::hash::Hash` output into sha256 (the engine exposes its
/// compatibility hash only as `impl Hash`).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// What names a compiled file: the component's hash and the engine's.
pub fn key(engine: &Engine, component_sha256: &str) -> String {
    let mut h = ShaHasher(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
    h.write(component_sha256.as_bytes());
    hex(&h.0.finalize())
}

/// How a component was made ready, for the log and `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Compiled,
    Cached,
}

/// The component for `bytes`: from `dir` when compiled before, else
/// compiled now (and written to `dir`, when one is given).
pub fn load(
    engine: &Engine,
    bytes: &[u8],
    component_sha256: &str,
    dir: Option<&Path>,
) -> Result<(Component, Origin), String> {
    let Some(dir) = dir else {
        return compile(engine, bytes).map(|c| (c, Origin::Compiled));
    };
    let file = dir.join(format!("{}.cwasm", key(engine, component_sha256)));
    if trusted(&file) {
        // SAFETY: the file was written by `store` below into a folder only
        // this user can write (checked by `trusted`), from a component
        // compiled by an engine with the same compatibility hash (its name).
        match unsafe { Component::deserialize_file(engine, &file) } {
            Ok(c) => return Ok((c, Origin::Cached)),
            // Mapping the file's code executable can fail where reading it
            // does not (Wine's file mappings refuse it): load a copy.
            // SAFETY: as above; the same bytes.
            Err(mapped) => match std::fs::read(&file)
                .map_err(wasmtime::Error::from)
                .and_then(|bytes| unsafe { Component::deserialize(engine, bytes) })
            {
                Ok(c) => {
                    tracing::debug!(file = %file.display(), "compiled component read into memory (mapping it failed: {mapped})");
                    return Ok((c, Origin::Cached));
                }
                Err(e) => tracing::warn!(
                    file = %file.display(),
                    "compiled component unusable, compiling again: {mapped}; read into memory: {e}"
                ),
            },
        }
    }
    let component = compile(engine, bytes)?;
    if let Err(e) = store(dir, &file, &component) {
        tracing::warn!(file = %file.display(), "cannot keep the compiled component: {e}");
    }
    Ok((component, Origin::Compiled))
}

fn compile(engine: &Engine, bytes: &[u8]) -> Result<Component, String> {
    Component::new(engine, bytes)
        .map_err(|e| format!("not a usable component: {}", first_line(&format!("{e:#}"))))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// Written by this user and by nobody else.
fn trusted(file: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Some(dir) = file.parent() else {
            return false;
        };
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let ok = |p: &Path, file: bool| {
            std::fs::symlink_metadata(p).is_ok_and(|m| {
                m.uid() == me
                    && m.mode() & 0o022 == 0
                    && if file { m.is_file() } else { m.is_dir() }
            })
        };
        ok(dir, false) && ok(file, true)
    }
    #[cfg(not(unix))]
    {
        file.is_file()
    }
}

fn store(dir: &Path, file: &Path, component: &Component) -> std::io::Result<()> {
    make_private_dir(dir)?;
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    let tmp: PathBuf = dir.join(format!(".{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    {
        use std::io::Write;
        let mut f = options.open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, file)
}

fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}
