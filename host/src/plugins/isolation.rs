//! Which plugins run in wf's own process and which in a supervised child.

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::{Isolation, PluginSettings, Sandbox};

/// The isolation of a plugin the operator said nothing about: bundled
/// plugins (shipped with wf) and pinned ones run in process; every other
/// plugin file, dropped into a folder by whoever, runs in a child.
pub fn default_isolation(is_bundled: bool, is_pinned: bool) -> Isolation {
    if is_bundled || is_pinned {
        Isolation::InProcess
    } else {
        Isolation::Process
    }
}

/// A plugin is bundled when its file lies in wf's own executable folder or
/// in `plugins/` beside it (an unpacked dist archive): what shipped with wf.
pub fn is_bundled(plugin_dir: &Path) -> bool {
    let Ok(exe) = std::env::current_exe() else {
        return false;
    };
    let Some(exe_dir) = exe.parent() else {
        return false;
    };
    let dir = super::canonical(plugin_dir);
    dir == super::canonical(exe_dir) || dir == super::canonical(&exe_dir.join("plugins"))
}

/// `[server] plugin_isolation` and the `[plugins.<name>]` tables.
#[derive(Debug, Clone, Default)]
pub struct IsolationPolicy {
    pub folder_default: Option<Isolation>,
    pub plugins: BTreeMap<String, PluginSettings>,
    /// The enabled sources, for a child's sandbox.
    pub sources: Vec<SourceSketch>,
}

/// What a child's sandbox needs of a configured source.
#[derive(Debug, Clone, Default)]
pub struct SourceSketch {
    pub name: String,
    pub kind: String,
    /// Its `command`, `args` and `cwd` settings (stdio mcp sources).
    pub command: Option<String>,
    pub args: Vec<String>,
    pub cwd: Option<std::path::PathBuf>,
}

impl IsolationPolicy {
    pub fn from_config(config: &crate::config::Config) -> Self {
        let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
        let sources = config
            .sources
            .iter()
            .filter(|(_, sc)| sc.enabled)
            .map(|(name, sc)| SourceSketch {
                name: name.clone(),
                kind: sc.kind.clone(),
                command: sc.settings.get("command").and_then(text),
                args: sc
                    .settings
                    .get("args")
                    .and_then(|a| a.as_array())
                    .map(|a| a.iter().filter_map(text).collect())
                    .unwrap_or_default(),
                cwd: sc.settings.get("cwd").and_then(text).map(Into::into),
            })
            .collect();
        Self {
            folder_default: config.server.plugin_isolation,
            plugins: config.plugins.plugin.clone(),
            sources,
        }
    }

    /// Every source's data directory (made here: Landlock opens what it
    /// allows) and programs, for a child's sandbox.
    pub fn sandbox_sources(
        &self,
        state_dir: Option<&Path>,
    ) -> Vec<super::process::protocol::SandboxSource> {
        let Some(state) = state_dir else {
            return Vec::new();
        };
        self.sources
            .iter()
            .filter_map(|s| {
                let data_dir = state.join("sources").join(&s.name);
                std::fs::create_dir_all(&data_dir).ok()?;
                let cwd = s.cwd.clone().unwrap_or_else(|| state.to_path_buf());
                let programs = s
                    .command
                    .as_deref()
                    .map(|c| {
                        super::sandbox::program_paths(
                            c,
                            &s.args,
                            &cwd,
                            Some(std::ffi::OsStr::new(super::process::spawn::CHILD_PATH)),
                        )
                    })
                    .unwrap_or_default();
                Some(super::process::protocol::SandboxSource {
                    kind: s.kind.clone(),
                    data_dir,
                    programs,
                })
            })
            .collect()
    }

    /// The isolation of plugin `name` (its table, else the folder default,
    /// else [`default_isolation`]).
    pub fn resolve(&self, name: &str, is_bundled: bool, is_pinned: bool) -> Isolation {
        self.plugins
            .get(name)
            .and_then(|p| p.isolation)
            .or(self.folder_default)
            .unwrap_or_else(|| default_isolation(is_bundled, is_pinned))
    }

    /// Before a file's plugin name is known: whether it may have to run in
    /// a child (then the child reads its manifest, and wf never loads it).
    pub fn may_be_process(&self, is_bundled: bool, is_pinned: bool) -> bool {
        self.folder_default
            .unwrap_or_else(|| default_isolation(is_bundled, is_pinned))
            == Isolation::Process
            || self
                .plugins
                .values()
                .any(|p| p.isolation == Some(Isolation::Process))
    }

    pub fn settings(&self, name: &str) -> PluginSettings {
        self.plugins.get(name).cloned().unwrap_or_default()
    }

    pub fn sandbox(&self, name: &str) -> Sandbox {
        self.plugins
            .get(name)
            .and_then(|p| p.sandbox)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(default_isolation(true, false), Isolation::InProcess);
        assert_eq!(default_isolation(false, true), Isolation::InProcess);
        assert_eq!(default_isolation(false, false), Isolation::Process);
        let mut p = IsolationPolicy::default();
        assert!(!p.may_be_process(true, false));
        assert!(p.may_be_process(false, false));
        p.plugins.insert(
            "mcp".into(),
            PluginSettings {
                isolation: Some(Isolation::Process),
                ..Default::default()
            },
        );
        assert!(p.may_be_process(true, false));
        assert_eq!(p.resolve("mcp", true, false), Isolation::Process);
        assert_eq!(p.resolve("std", true, false), Isolation::InProcess);
        p.folder_default = Some(Isolation::InProcess);
        assert_eq!(p.resolve("third", false, false), Isolation::InProcess);
        assert_eq!(p.resolve("mcp", false, false), Isolation::Process);
    }
}
