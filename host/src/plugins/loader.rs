//! Loads plugin libraries, one file at a time, and explains each refusal in
//! one line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::library::{LibraryError, lib_header_from_path};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, RString};
use semver::Version;
use serde::Serialize;
use wf_plugin_api::ffi::{HostContextBox, HostContextFfi_TO, PluginBox, WfPluginModRef};
use wf_plugin_api::{ErrorCode, Manifest, PluginError, PluginInit};

use super::host_context::{HostContext, HostEvents};

/// A plugin that loaded and instantiated.
pub struct LoadedPlugin {
    pub manifest: Manifest,
    pub file: PathBuf,
    pub plugin: PluginBox,
    /// The file's size and modification time when it was loaded.
    stamp: Option<Stamp>,
}

type Stamp = (u64, std::time::SystemTime);

fn stamp(file: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(file).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// A file that was tried and refused.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    pub file: PathBuf,
    pub reason: String,
    #[serde(skip)]
    stamp: Option<Stamp>,
}

#[derive(Default)]
pub struct PluginSet {
    pub loaded: Vec<Arc<LoadedPlugin>>,
    pub refused: Vec<Refusal>,
    pub dirs: Vec<PathBuf>,
}

impl PluginSet {
    /// The plugin serving `kind`, if any (the first loaded wins).
    pub fn for_kind(&self, kind: &str) -> Option<&Arc<LoadedPlugin>> {
        self.loaded
            .iter()
            .find(|p| p.manifest.kinds.iter().any(|k| k == kind))
    }
    pub fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> = self
            .loaded
            .iter()
            .flat_map(|p| p.manifest.kinds.clone())
            .collect();
        k.sort();
        k.dedup();
        k
    }
}

fn host_api() -> Version {
    Version::parse(wf_plugin_api::API_VERSION).expect("API_VERSION is semver")
}

/// The range of wf-plugin-api versions this host loads, for humans.
pub fn supported_api_range() -> String {
    let v = host_api();
    format!(">={}.0.0, <={}.{}.x", v.major, v.major, v.minor)
}

/// A plugin built against `plugin` loads when the major versions match and
/// the plugin's minor is not newer than the host's: minors only append to
/// the ABI, so an older plugin's prefix is a prefix of ours.
fn api_compatible(plugin: &Version) -> bool {
    let host = host_api();
    plugin.major == host.major
        && plugin.minor <= host.minor
        && (host.major > 0 || plugin.minor == host.minor)
}

/// Tries every library file in `dirs` (sorted by name within a folder).
pub fn load_plugins(dirs: &[PathBuf], events: &HostEvents, log_level: &str) -> PluginSet {
    let mut set = PluginSet::default();
    set.load_new(dirs, events, log_level);
    set
}

/// A private copy of `file` to load a rebuilt library from.
fn fresh_copy(file: &Path) -> Option<PathBuf> {
    let name = file.file_name()?.to_string_lossy().to_string();
    let dir = std::env::temp_dir().join(format!("wf-plugin-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let copy = dir.join(format!("{}-{name}", crate::store::now_ms()));
    std::fs::copy(file, &copy).ok().map(|_| copy)
}

fn library_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        tracing::debug!(dir = %dir.display(), "plugin folder not readable; skipped");
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|e| e == std::env::consts::DLL_EXTENSION)
        })
        .collect();
    files.sort();
    files
}

impl PluginSet {
    /// Tries every library file in `dirs` not tried before (or refused and
    /// changed since); returns the names of the plugins it loaded. Loaded
    /// plugins are never unloaded.
    pub fn load_new(
        &mut self,
        dirs: &[PathBuf],
        events: &HostEvents,
        log_level: &str,
    ) -> Vec<String> {
        for d in dirs {
            if !self.dirs.contains(d) {
                self.dirs.push(d.clone());
            }
        }
        let mut loaded = Vec::new();
        for file in dirs.iter().flat_map(|d| library_files(d)) {
            if self.loaded.iter().any(|p| p.file == file) {
                continue;
            }
            let now = stamp(&file);
            let mut retry = false;
            if let Some(i) = self.refused.iter().position(|r| r.file == file) {
                if self.refused[i].stamp == now {
                    continue;
                }
                self.refused.remove(i);
                retry = true;
            }
            // The refused build stays mapped (libraries are never unloaded) and
            // the OS hands out the mapped one for the same path: load a
            // changed file from a fresh copy.
            let fresh = if retry { fresh_copy(&file) } else { None };
            let result = load_one(fresh.as_deref().unwrap_or(&file), self, events, log_level).map(
                |mut p| {
                    p.file = file.clone();
                    p
                },
            );
            match result {
                Ok(mut plugin) => {
                    tracing::info!(plugin = %plugin.manifest.name, version = %plugin.manifest.version, file = %file.display(), "plugin loaded");
                    plugin.stamp = now;
                    loaded.push(plugin.manifest.name.clone());
                    self.loaded.push(Arc::new(plugin));
                }
                Err(reason) => {
                    tracing::warn!("refused plugin {}: {reason}", file.display());
                    self.refused.push(Refusal {
                        file,
                        reason,
                        stamp: now,
                    });
                }
            }
        }
        loaded
    }

    /// Loaded plugin files that changed on disk since: a restart applies them.
    pub fn changed_files(&self) -> Vec<String> {
        self.loaded
            .iter()
            .filter(|p| stamp(&p.file) != p.stamp)
            .map(|p| {
                format!(
                    "{} ({}): changed on disk; restart wf to load the new build",
                    p.file.display(),
                    p.manifest.name
                )
            })
            .collect()
    }
}

fn load_one(
    file: &Path,
    set: &PluginSet,
    events: &HostEvents,
    log_level: &str,
) -> Result<LoadedPlugin, String> {
    let header = lib_header_from_path(file).map_err(|e| match e {
        LibraryError::OpenError { err, .. } => {
            format!("not a loadable library: {}", one_line(&err.to_string()))
        }
        LibraryError::GetSymbolError { .. } => {
            "not a wf plugin: it exports no wf_plugin root module".to_string()
        }
        LibraryError::InvalidAbiHeader(_) => {
            "not a wf plugin: built with an incompatible abi_stable".to_string()
        }
        other => format!("not a wf plugin: {}", first_line(&other.to_string())),
    })?;

    let name = header.root_mod_consts().name().as_str();
    if name != "wf_plugin" {
        return Err(format!(
            "not a wf plugin: it is an abi_stable library of {name:?}"
        ));
    }
    let version_text = header.version_strings().version.as_str().to_string();
    let version = Version::parse(&version_text)
        .map_err(|_| format!("incompatible wf-plugin-api: unreadable version {version_text:?}"))?;
    if !api_compatible(&version) {
        return Err(format!(
            "incompatible wf-plugin-api: built against {version}, this host loads {}",
            supported_api_range()
        ));
    }

    let module = header
        .check_layout::<WfPluginModRef>()
        .map_err(|e| match e {
            LibraryError::AbiInstability(_) => {
                format!("ABI layout mismatch: {}", abi_error_line(&e.to_string()))
            }
            other => format!("not a wf plugin: {}", first_line(&other.to_string())),
        })?;

    let manifest_text = (module.manifest())();
    let manifest: Manifest = serde_json::from_str(manifest_text.as_str())
        .map_err(|e| format!("not a wf plugin: unreadable manifest: {e}"))?;
    if let Some(prev) = set.loaded.iter().find(|p| p.manifest.name == manifest.name) {
        return Err(format!(
            "duplicate plugin name {:?}: already loaded from {}",
            manifest.name,
            prev.file.display()
        ));
    }

    let ctx = HostContext {
        plugin: manifest.name.as_str().into(),
        events: events.clone(),
    };
    let host: HostContextBox = HostContextFfi_TO::from_ptr(RArc::new(ctx), TD_Opaque);
    let init = PluginInit {
        host_version: env!("CARGO_PKG_VERSION").into(),
        log_level: log_level.into(),
    };
    let init = RString::from(serde_json::to_string(&init).unwrap_or_default());
    let plugin = (module.instantiate())(host, init)
        .into_result()
        .map_err(|e| {
            let e = PluginError::from_json(e.as_str());
            match e.code {
                ErrorCode::Panicked => format!("constructor panicked: {}", one_line(&e.message)),
                _ => format!("constructor failed: {}", one_line(&e.message)),
            }
        })?;
    Ok(LoadedPlugin {
        stamp: None,
        manifest,
        file: file.to_path_buf(),
        plugin,
    })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn first_line(s: &str) -> String {
    one_line(s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s))
}

/// abi_stable's layout errors run to hundreds of lines; the first `Error:`
/// line says what differs.
fn abi_error_line(s: &str) -> String {
    let line = s
        .lines()
        .find(|l| l.trim_start().starts_with("Error:"))
        .unwrap_or_else(|| s.lines().next().unwrap_or(s));
    let line = one_line(line.trim_start().trim_start_matches("Error:"));
    if line.len() > 200 {
        format!("{}…", &line[..line.floor_char_boundary(200)])
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_rules() {
        let host = host_api();
        assert!(api_compatible(&host));
        assert!(api_compatible(&Version::new(
            host.major,
            host.minor,
            host.patch + 7
        )));
        assert!(!api_compatible(&Version::new(host.major + 1, 0, 0)));
        assert!(!api_compatible(&Version::new(
            host.major,
            host.minor + 1,
            0
        )));
        if host.major > 0 {
            assert!(!api_compatible(&Version::new(host.major - 1, 0, 0)));
        }
    }

    #[test]
    fn abi_error_line_picks_the_error() {
        let text = "Compared <this>:\n  a\nError:  field   count differs\nmore\nError: second";
        assert_eq!(abi_error_line(text), "field count differs");
    }
}
