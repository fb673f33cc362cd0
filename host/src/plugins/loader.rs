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
use crate::config::Isolation;
use crate::text::{first_line, one_line};

/// A plugin that loaded and instantiated.
pub struct LoadedPlugin {
    pub manifest: Manifest,
    pub file: PathBuf,
    pub plugin: PluginBox,
    /// Where it runs.
    pub isolation: Isolation,
    /// Its child process, in process mode.
    pub child: Option<Arc<super::process::Supervisor>>,
    /// What the operator should fix although the plugin loaded (one line each).
    pub warnings: Vec<String>,
    /// Its file is pinned in `plugins.lock` (and matched its hash).
    pub pinned: bool,
    /// The file's size and modification time when it was loaded.
    stamp: Option<Stamp>,
}

type Stamp = (u64, std::time::SystemTime);

fn stamp(file: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(file).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// A file (or a whole folder) that was refused, with what to do about it.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    pub file: PathBuf,
    pub reason: String,
    #[serde(skip)]
    stamp: Option<Stamp>,
    /// Judged again at every scan (folder safety, links, entries that are
    /// not files), rather than once per file version.
    #[serde(skip)]
    rescan: bool,
}

impl Refusal {
    fn rescanned(file: PathBuf, reason: String) -> Self {
        Self {
            file,
            reason,
            stamp: None,
            rescan: true,
        }
    }
}

/// Something worth a line that refused nothing (e.g. an empty folder).
#[derive(Debug, Clone, Serialize)]
pub struct Note {
    pub path: PathBuf,
    pub note: String,
}

/// How carefully plugin folders are judged before anything is loaded.
#[derive(Debug, Clone, Default)]
pub struct LoadPolicy {
    /// `--allow-insecure-plugin-dir`: load from folders and files other
    /// users can write (with a warning) instead of refusing them.
    pub allow_insecure: bool,
    /// `[server] plugin_threads`: each plugin's runtime size (none: the
    /// plugin's own default).
    pub runtime_threads: Option<usize>,
    /// Which plugins run in a child process (`[plugins.<name>]`).
    pub isolation: super::isolation::IsolationPolicy,
    /// The state directory (children get `<state>/sources` as their data).
    pub state_dir: Option<PathBuf>,
}

/// A WebAssembly component (`*.wasm`) found in a plugin folder: nothing of
/// it runs here; the plugin serving kind `wasm` serves it as a default
/// source named for its file (`sources::registry::desired_sources`).
#[derive(Debug, Clone, Serialize)]
pub struct Component {
    pub file: PathBuf,
    /// The WIT interface it exports (`wf:source/guest@1.0.0`), read from
    /// its bytes; None when it names none (it is refused when served).
    pub interface: Option<String>,
    /// Its file is pinned in `plugins.lock` (and matched its hash).
    pub pinned: bool,
}

impl Component {
    /// The default source's name: the file's stem.
    pub fn source_name(&self) -> String {
        self.file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The extension of WebAssembly components in plugin folders.
pub const COMPONENT_EXTENSION: &str = "wasm";

/// The `wf:source/guest@…` export a component's bytes name (the name is
/// stored as it is in the component's export section).
fn component_interface(file: &Path) -> Option<String> {
    const NAME: &[u8] = b"wf:source/guest@";
    let bytes = std::fs::read(file).ok()?;
    let at = bytes.windows(NAME.len()).position(|w| w == NAME)?;
    let rest = &bytes[at + NAME.len()..];
    let end = rest
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+')))
        .unwrap_or(rest.len())
        .min(64);
    Some(format!(
        "wf:source/guest@{}",
        String::from_utf8_lossy(&rest[..end])
    ))
}

#[derive(Default)]
pub struct PluginSet {
    pub loaded: Vec<Arc<LoadedPlugin>>,
    /// WebAssembly components found in the plugin folders.
    pub components: Vec<Component>,
    pub refused: Vec<Refusal>,
    pub notes: Vec<Note>,
    pub dirs: Vec<PathBuf>,
    pub policy: LoadPolicy,
    /// `plugins.lock`: a pinned file whose hash changed is refused.
    pub pins: super::pins::Pins,
    /// Where rebuilt plugin files are copied before loading (see `fresh_copy`).
    copies: Copies,
}

#[derive(Default)]
struct Copies {
    /// The state directory; without one, the system temp dir.
    under: Option<PathBuf>,
    dir: Option<tempfile::TempDir>,
}

impl PluginSet {
    /// The plugin serving `kind`, if any (the first loaded wins).
    pub fn for_kind(&self, kind: &str) -> Option<&Arc<LoadedPlugin>> {
        self.loaded
            .iter()
            .find(|p| p.manifest.kinds.iter().any(|k| k == kind))
    }
    /// Adds a plugin linked into this process (no library file: `label`
    /// stands for it). For tests and embedders; checked like a loaded file.
    pub fn add_in_process(
        &mut self,
        module: WfPluginModRef,
        label: &str,
        events: &HostEvents,
        log_level: &str,
    ) -> Result<String, String> {
        let plugin = instantiate(module, Path::new(label), self, events, log_level, None)?;
        let name = plugin.manifest.name.clone();
        self.loaded.push(Arc::new(plugin));
        Ok(name)
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
pub fn load_plugins(
    dirs: &[PathBuf],
    events: &HostEvents,
    log_level: &str,
    policy: LoadPolicy,
) -> PluginSet {
    load_plugins_pinned(dirs, events, log_level, policy, Default::default())
}

/// [`load_plugins`] with the pins of `plugins.lock`.
pub fn load_plugins_pinned(
    dirs: &[PathBuf],
    events: &HostEvents,
    log_level: &str,
    policy: LoadPolicy,
    pins: super::pins::Pins,
) -> PluginSet {
    let mut set = PluginSet {
        policy,
        pins,
        ..Default::default()
    };
    set.load_new(dirs, events, log_level);
    set
}

impl Copies {
    /// A private copy of `file` to load a rebuilt library from: in a fresh
    /// directory of this process (random name, mode 0700) under the state
    /// directory, removed when the set is dropped or [`PluginSet::remove_copies`] runs.
    fn fresh_copy(&mut self, file: &Path) -> Option<PathBuf> {
        let name = file.file_name()?.to_string_lossy().to_string();
        if self.dir.is_none() {
            let under = self.under.clone().unwrap_or_else(std::env::temp_dir);
            let mut builder = tempfile::Builder::new();
            builder.prefix("plugin-reload-");
            // tempfile leaves a directory's mode to the umask: ask for 0700.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                builder.permissions(std::fs::Permissions::from_mode(0o700));
            }
            let made = builder.tempdir_in(&under);
            match made {
                Ok(d) => self.dir = Some(d),
                Err(e) => {
                    tracing::warn!(
                        "cannot make a folder for rebuilt plugins in {}: {e}",
                        under.display()
                    );
                    return None;
                }
            }
        }
        let dir = self.dir.as_ref()?.path();
        let copy = dir.join(format!("{}-{name}", crate::clock::now_ms()));
        std::fs::copy(file, &copy).ok().map(|_| copy)
    }
}

/// What one plugin folder holds: the library files to try, entries with
/// the library extension that cannot be (one refusal line each), and a note
/// when there is nothing to load at all.
#[derive(Default)]
struct Scan {
    files: Vec<PathBuf>,
    components: Vec<PathBuf>,
    refused: Vec<Refusal>,
    note: Option<String>,
}

fn scan_dir(dir: &Path) -> Scan {
    let mut scan = Scan::default();
    let ext = std::env::consts::DLL_EXTENSION;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            scan.refused.push(Refusal::rescanned(
                dir.to_path_buf(),
                format!("plugin folder not readable: {e}"),
            ));
            return scan;
        }
    };
    let mut others = Vec::new();
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.extension().is_some_and(|e| e == COMPONENT_EXTENSION)
            && std::fs::metadata(&path).is_ok_and(|m| m.is_file())
        {
            scan.components.push(path);
            continue;
        }
        if path.extension().is_none_or(|e| e != ext) {
            others.push(path);
            continue;
        }
        let link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => scan.files.push(path),
            Ok(m) if m.is_dir() => scan.refused.push(Refusal::rescanned(
                path,
                format!("a directory, not a library: nothing named *.{ext} in a plugin folder should be a folder"),
            )),
            Ok(_) => scan.refused.push(Refusal::rescanned(
                path,
                "not a regular file (a device, socket or pipe): remove it from the plugin folder".into(),
            )),
            Err(e) if link => {
                let target = std::fs::read_link(&path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_default();
                let reason = if e.raw_os_error() == Some(libc_eloop()) {
                    format!("symbolic link loop (-> {target}): point the link at the plugin file")
                } else {
                    format!("dangling symbolic link to {target}: the target does not exist; rebuild the plugin or remove the link")
                };
                scan.refused.push(Refusal::rescanned(path, reason));
            }
            Err(e) => scan
                .refused
                .push(Refusal::rescanned(path, format!("cannot read it: {e}"))),
        }
    }
    scan.files.sort();
    scan.components.sort();
    scan.refused.sort_by(|a, b| a.file.cmp(&b.file));
    if scan.files.is_empty() && scan.refused.is_empty() && scan.components.is_empty() {
        others.sort();
        let rlibs: Vec<String> = others
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rlib"))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        scan.note = Some(if rlibs.is_empty() {
            format!("no plugin library (*.{ext}) in this folder")
        } else {
            format!(
                "no plugin library (*.{ext}) in this folder, only Rust rlib files ({}): a plugin must be built with crate-type = [\"cdylib\"] in its Cargo.toml [lib]",
                rlibs.join(", ")
            )
        });
    }
    scan
}

#[cfg(unix)]
fn libc_eloop() -> i32 {
    libc::ELOOP
}

#[cfg(not(unix))]
fn libc_eloop() -> i32 {
    -1
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
        // Folder safety, links and odd entries are judged afresh every time.
        self.refused.retain(|r| !r.rescan);
        self.notes.clear();
        let mut loaded = Vec::new();
        for dir in dirs {
            if !dir.exists() {
                tracing::debug!(dir = %dir.display(), "plugin folder does not exist; skipped");
                self.notes.push(Note {
                    path: dir.clone(),
                    note: "no such folder".into(),
                });
                continue;
            }
            if let Err(why) = super::safety::check_dir(dir) {
                if !self.policy.allow_insecure {
                    tracing::warn!("refused plugin folder {}: {why}", dir.display());
                    self.refused.push(Refusal::rescanned(
                        dir.clone(),
                        format!("nothing loaded from this folder: {why}"),
                    ));
                    continue;
                }
                tracing::warn!(
                    "loading plugins from an unsafe folder (--allow-insecure-plugin-dir): {why}"
                );
                self.notes.push(Note {
                    path: dir.clone(),
                    note: format!("unsafe, loaded anyway (--allow-insecure-plugin-dir): {why}"),
                });
            }
            let scan = scan_dir(dir);
            for r in &scan.refused {
                tracing::warn!("refused plugin {}: {}", r.file.display(), r.reason);
            }
            self.refused.extend(scan.refused);
            if let Some(note) = scan.note {
                tracing::info!("plugin folder {}: {note}", dir.display());
                self.notes.push(Note {
                    path: dir.clone(),
                    note,
                });
            }
            for file in scan.files {
                if let Some(name) = self.try_file(dir, file, events, log_level) {
                    loaded.push(name);
                }
            }
            for file in scan.components {
                self.add_component(dir, file);
            }
        }
        loaded
    }

    /// Tries one file unless it was tried before (and is unchanged); returns
    /// the plugin's name when it loaded.
    fn try_file(
        &mut self,
        dir: &Path,
        file: PathBuf,
        events: &HostEvents,
        log_level: &str,
    ) -> Option<String> {
        if self.loaded.iter().any(|p| p.file == file) {
            return None;
        }
        if let Err(why) = super::safety::check_file(&file, dir) {
            if !self.policy.allow_insecure {
                tracing::warn!("refused plugin {}: {why}", file.display());
                self.refused
                    .push(Refusal::rescanned(file, format!("not loaded: {why}")));
                return None;
            }
            tracing::warn!("loading an unsafe plugin file (--allow-insecure-plugin-dir): {why}");
        }
        let now = stamp(&file);
        let mut retry = false;
        if let Some(i) = self.refused.iter().position(|r| r.file == file) {
            if self.refused[i].stamp == now {
                return None;
            }
            self.refused.remove(i);
            retry = true;
        }
        // Before loading: loading runs the library's constructors.
        if let Err(reason) = self.pins.check(&file) {
            tracing::warn!("refused plugin {}: {reason}", file.display());
            self.refused.push(Refusal {
                file,
                reason,
                stamp: now,
                rescan: false,
            });
            return None;
        }
        // The refused build stays mapped (libraries are never unloaded) and
        // the OS hands out the mapped one for the same path: load a
        // changed file from a fresh copy.
        let fresh = if retry {
            self.copies.fresh_copy(&file)
        } else {
            None
        };
        let path = fresh.as_deref().unwrap_or(&file);
        let bundled = super::isolation::is_bundled(dir);
        let pinned = self.pins.is_pinned(&file);
        // Loaded straight into wf only when no setting can send it to a
        // child: bundled, pinned, or the operator's folder-wide opt-in
        // (`[server] plugin_isolation = "in_process"`), warned below.
        let direct = !self.policy.isolation.may_be_process(bundled, pinned);
        let result = if direct {
            load_one(path, self, events, log_level, None)
        } else {
            load_in_child(path, bundled, pinned, self, events, log_level)
        };
        match result {
            Ok(mut plugin) => {
                plugin.file = file.clone();
                plugin.stamp = now;
                plugin.warnings = warnings(&file);
                plugin.pinned = self.pins.get(&file).is_some();
                if direct
                    && let Ok(Some(w)) = super::pins::in_process_allowed(
                        &plugin.manifest.name,
                        bundled,
                        pinned,
                        true,
                    )
                {
                    tracing::warn!(plugin = %plugin.manifest.name, file = %file.display(), "{w}");
                }
                tracing::info!(plugin = %plugin.manifest.name, version = %plugin.manifest.version, file = %file.display(), "plugin loaded");
                for w in &plugin.warnings {
                    tracing::warn!(plugin = %plugin.manifest.name, file = %file.display(), "{w}");
                }
                let name = plugin.manifest.name.clone();
                self.loaded.push(Arc::new(plugin));
                Some(name)
            }
            Err(reason) => {
                tracing::warn!("refused plugin {}: {reason}", file.display());
                self.refused.push(Refusal {
                    file,
                    reason,
                    stamp: now,
                    rescan: false,
                });
                None
            }
        }
    }

    /// Records a component found in `dir`, after the checks a library file
    /// gets (file safety, its pin); it is served later, by the plugin of
    /// kind `wasm`, in a sandbox of its own.
    fn add_component(&mut self, dir: &Path, file: PathBuf) {
        if self.components.iter().any(|c| c.file == file) {
            return;
        }
        self.refused.retain(|r| r.file != file);
        let refuse = |set: &mut Self, reason: String| {
            tracing::warn!("refused component {}: {reason}", file.display());
            set.refused.push(Refusal::rescanned(file.clone(), reason));
        };
        if let Err(why) = super::safety::check_file(&file, dir)
            && !self.policy.allow_insecure
        {
            return refuse(self, format!("not loaded: {why}"));
        }
        if let Err(reason) = self.pins.check(&file) {
            return refuse(self, reason);
        }
        let component = Component {
            interface: component_interface(&file),
            pinned: self.pins.get(&file).is_some(),
            file,
        };
        tracing::info!(file = %component.file.display(), interface = ?component.interface, "wasm component found");
        self.components.push(component);
    }

    /// Where rebuilt plugin files are copied to be loaded: a private folder
    /// under `state_dir` (made when first needed).
    pub fn set_state_dir(&mut self, state_dir: &Path) {
        self.copies.under = Some(state_dir.to_path_buf());
    }

    /// Removes the folder of rebuilt plugin copies (at shutdown: the
    /// libraries stay mapped, so removing the files is safe).
    pub fn remove_copies(&mut self) {
        if let Some(d) = self.copies.dir.take()
            && let Err(e) = d.close()
        {
            tracing::debug!("cannot remove the rebuilt plugin copies: {e}");
        }
    }

    /// The folder rebuilt plugin files are copied to, once one was needed.
    pub fn copies_dir(&self) -> Option<&Path> {
        self.copies.dir.as_ref().map(|d| d.path())
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

/// Runs on a plugin's manifest after it is read and before the plugin is
/// created; an Err refuses the plugin. A plugin child enters its second
/// sandbox stage here (`sandbox::after_manifest`).
pub type ManifestCheck<'a> = &'a dyn Fn(&Manifest) -> Result<(), String>;

/// Loads the one library `file` (a plugin child's plugin: no folder scan,
/// which a sandboxed child could not do), with `check` run on its manifest
/// before the plugin is created.
pub fn load_file(
    file: &Path,
    events: &HostEvents,
    log_level: &str,
    policy: LoadPolicy,
    check: ManifestCheck<'_>,
) -> Result<LoadedPlugin, String> {
    let set = PluginSet {
        policy,
        ..Default::default()
    };
    load_one(file, &set, events, log_level, Some(check))
}

fn load_one(
    file: &Path,
    set: &PluginSet,
    events: &HostEvents,
    log_level: &str,
    check: Option<ManifestCheck<'_>>,
) -> Result<LoadedPlugin, String> {
    let module = open_module(file)?;
    instantiate(module, file, set, events, log_level, check)
}

/// Loads `file` and checks it is a wf plugin this host can load (the
/// checks a child process runs too, with the same one-line refusals).
pub(crate) fn open_module(file: &Path) -> Result<WfPluginModRef, String> {
    let header = lib_header_from_path(file).map_err(|e| match e {
        LibraryError::OpenError { err, .. } => {
            format!("not a loadable library: {}", one_line(&err.to_string()))
        }
        LibraryError::GetSymbolError { .. } => {
            if super::inspect::inspect(file).rust {
                "not a wf plugin: this Rust library exports no wf_plugin root module; did you forget `wf_plugin_api::export_plugin!(YourPlugin)` in its lib.rs?".to_string()
            } else {
                "not a wf plugin: it exports no wf_plugin root module (and rustc did not build it); remove it from the plugin folder".to_string()
            }
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

    header
        .check_layout::<WfPluginModRef>()
        .map_err(|e| match e {
            LibraryError::AbiInstability(_) => {
                format!("ABI layout mismatch: {}", abi_error_line(&e.to_string()))
            }
            other => format!("not a wf plugin: {}", first_line(&other.to_string())),
        })
}

/// A checked root module's manifest, refused when unreadable or when its
/// settings schema is unusable.
pub(crate) fn read_manifest(module: WfPluginModRef) -> Result<Manifest, String> {
    let manifest_text = (module.manifest())();
    let manifest: Manifest = serde_json::from_str(manifest_text.as_str())
        .map_err(|e| format!("not a wf plugin: unreadable manifest: {e}"))?;
    if let Some(why) = wf_plugin_api::schema::settings_schema_problems(&manifest).first() {
        return Err(format!("unusable settings schema: {why}"));
    }
    Ok(manifest)
}

/// Refuses a plugin whose name or one of whose kinds is taken already.
fn check_unique(manifest: &Manifest, set: &PluginSet) -> Result<(), String> {
    if let Some(prev) = set.loaded.iter().find(|p| p.manifest.name == manifest.name) {
        return Err(format!(
            "duplicate plugin name {:?}: already loaded from {}",
            manifest.name,
            prev.file.display()
        ));
    }
    for kind in &manifest.kinds {
        if let Some(prev) = set.loaded.iter().find(|p| p.manifest.kinds.contains(kind)) {
            return Err(format!(
                "source kind {kind:?} is already served by plugin {:?} ({}): one plugin per kind; remove one of the two files",
                prev.manifest.name,
                prev.file.display()
            ));
        }
    }
    Ok(())
}

/// The `PluginInit` JSON a plugin's constructor gets.
pub(crate) fn init_json(set: &PluginSet, log_level: &str) -> String {
    let init = PluginInit {
        host_version: env!("CARGO_PKG_VERSION").into(),
        log_level: log_level.into(),
        runtime_threads: set.policy.runtime_threads,
    };
    serde_json::to_string(&init).unwrap_or_default()
}

/// Runs the plugin's constructor.
pub(crate) fn construct(
    module: WfPluginModRef,
    host: HostContextBox,
    init: &str,
) -> Result<PluginBox, String> {
    (module.instantiate())(host, RString::from(init))
        .into_result()
        .map_err(|e| {
            let e = PluginError::from_json(e.as_str());
            match e.code {
                ErrorCode::Panicked => format!("constructor panicked: {}", one_line(&e.message)),
                _ => format!("constructor failed: {}", one_line(&e.message)),
            }
        })
}

/// Reads a checked root module's manifest and creates the plugin, unless
/// its name or one of its kinds is taken already.
fn instantiate(
    module: WfPluginModRef,
    file: &Path,
    set: &PluginSet,
    events: &HostEvents,
    log_level: &str,
    check: Option<ManifestCheck<'_>>,
) -> Result<LoadedPlugin, String> {
    let manifest = read_manifest(module)?;
    if let Some(check) = check {
        check(&manifest)?;
    }
    check_unique(&manifest, set)?;
    let ctx = HostContext {
        plugin: manifest.name.as_str().into(),
        events: events.clone(),
    };
    let host: HostContextBox = HostContextFfi_TO::from_ptr(RArc::new(ctx), TD_Opaque);
    let plugin = construct(module, host, &init_json(set, log_level))?;
    Ok(LoadedPlugin {
        warnings: Vec::new(),
        pinned: false,
        stamp: None,
        manifest,
        file: file.to_path_buf(),
        plugin,
        isolation: Isolation::InProcess,
        child: None,
    })
}

/// Starts `file` in a child: the child loads and checks it and reads its
/// manifest. A plugin whose settings say `in_process` after all is stopped
/// there and loaded here instead.
fn load_in_child(
    file: &Path,
    bundled: bool,
    pinned: bool,
    set: &PluginSet,
    events: &HostEvents,
    log_level: &str,
) -> Result<LoadedPlugin, String> {
    let launch = super::process::Launch {
        file: file.to_path_buf(),
        state_dir: set.policy.state_dir.clone(),
        init: init_json(set, log_level),
        known: None,
        sources: set
            .policy
            .isolation
            .sandbox_sources(set.policy.state_dir.as_deref()),
    };
    let (sup, manifest) = super::process::Supervisor::probe(launch)?;
    if let Err(e) = check_unique(&manifest, set) {
        sup.stop();
        return Err(e);
    }
    let isolation = set
        .policy
        .isolation
        .resolve(&manifest.name, bundled, pinned);
    if isolation == Isolation::InProcess {
        sup.stop();
        // The opt-in: the plugin's own `allow_unpinned_in_process`, or the
        // operator's folder-wide `[server] plugin_isolation = "in_process"`.
        let settings = set.policy.isolation.settings(&manifest.name);
        let opted_in = settings.allow_unpinned_in_process
            || (settings.isolation.is_none()
                && set.policy.isolation.folder_default == Some(Isolation::InProcess));
        if let Some(warning) =
            super::pins::in_process_allowed(&manifest.name, bundled, pinned, opted_in)?
        {
            tracing::warn!(plugin = %manifest.name, file = %file.display(), "{warning}");
        }
        return load_one(file, set, events, log_level, None);
    }
    let settings = set.policy.isolation.settings(&manifest.name);
    let sup = sup.start(&manifest, &settings, events)?;
    Ok(LoadedPlugin {
        warnings: Vec::new(),
        stamp: None,
        plugin: super::process::plugin_box(&sup),
        manifest,
        file: file.to_path_buf(),
        isolation,
        child: Some(sup),
        pinned,
    })
}

/// What is worth fixing in a plugin file that loaded.
fn warnings(file: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if super::inspect::inspect(file).rust_dylib {
        let mb = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
        out.push(format!(
            "built as a Rust `dylib` ({mb:.1} MB): build a `cdylib` instead (crate-type = [\"cdylib\"] in Cargo.toml [lib]); a dylib carries Rust metadata and exports every symbol"
        ));
    }
    out
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
    fn components_are_found_apart_from_libraries() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("units.wasm");
        std::fs::write(&wasm, b"\0asm\x0d\0\x01\0 wf:source/guest@1.0.0\x04 more").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let scan = scan_dir(dir.path());
        assert_eq!(scan.components, vec![wasm.clone()]);
        assert!(scan.files.is_empty() && scan.note.is_none());
        assert_eq!(
            component_interface(&wasm).as_deref(),
            Some("wf:source/guest@1.0.0")
        );
        let c = Component {
            file: wasm,
            interface: None,
            pinned: false,
        };
        assert_eq!(c.source_name(), "units");
        let plain = dir.path().join("plain.wasm");
        std::fs::write(&plain, b"\0asm").unwrap();
        assert_eq!(component_interface(&plain), None);
    }

    #[test]
    fn abi_error_line_picks_the_error() {
        let text = "Compared <this>:\n  a\nError:  field   count differs\nmore\nError: second";
        assert_eq!(abi_error_line(text), "field count differs");
    }
}
