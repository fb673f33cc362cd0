//! A trial run of sources for `wf check` and `wf plugins`: each source is
//! created in a throwaway state directory and discovered once, bounded in
//! time, then shut down. What a real `wf serve` would meet — a plugin
//! rejecting its settings, an unreachable upstream, capabilities left out —
//! is reported before anything is served.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::Rejected;
use crate::config::{LoadedConfig, SourceConfig};
use crate::plugins::PluginSet;
use crate::sources::{SourceState, Sources};

/// What the trial of one source found.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub source: String,
    /// Why it could not be created or discovered.
    pub error: Option<String>,
    /// Discovery did not finish (as opposed to failing).
    pub timed_out: bool,
    /// Capabilities it offers that would be left out.
    pub rejected: Vec<Rejected>,
}

/// A state directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("wf-check-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Creates `sources` in a throwaway state directory, discovers them in
/// parallel (each bounded by `timeout`), shuts them down and reports each.
pub async fn trial(
    sources: BTreeMap<String, SourceConfig>,
    config: &LoadedConfig,
    plugins: &PluginSet,
    timeout: Duration,
) -> std::io::Result<Vec<Trial>> {
    Ok(trial_catalogs(sources, config, plugins, timeout).await?.0)
}

/// [`trial`], and the catalogs the sources offered (`wf check` weighs the
/// endpoints' selections and transforms against them).
pub async fn trial_catalogs(
    sources: BTreeMap<String, SourceConfig>,
    config: &LoadedConfig,
    plugins: &PluginSet,
    timeout: Duration,
) -> std::io::Result<(Vec<Trial>, super::Snapshot)> {
    let (trials, snapshot, ()) =
        trial_catalogs_then(sources, config, plugins, timeout, async |_| ()).await?;
    Ok((trials, snapshot))
}

/// [`trial_catalogs`], running `then` on the discovered sources before they
/// are shut down (`wf check --call` calls their tools there).
pub async fn trial_catalogs_then<T: Default>(
    sources: BTreeMap<String, SourceConfig>,
    config: &LoadedConfig,
    plugins: &PluginSet,
    timeout: Duration,
    then: impl AsyncFnOnce(&Sources) -> T,
) -> std::io::Result<(Vec<Trial>, super::Snapshot, T)> {
    if sources.is_empty() {
        return Ok((Vec::new(), super::Snapshot::default(), T::default()));
    }
    let scratch = Scratch::new()?;
    let set = Arc::new(Sources::new(None));
    set.apply(sources, config, plugins, &scratch.0);
    set.discover_all(set.list(), timeout).await;
    let trials = set
        .list()
        .iter()
        .map(|e| {
            let st = e.status();
            let timed_out = st.error.as_deref().is_some_and(|m| m.contains("timed out"));
            Trial {
                source: e.name.clone(),
                error: match st.state {
                    SourceState::Failed | SourceState::NeedsLogin => st.error,
                    _ => None,
                },
                timed_out,
                rejected: st.rejected,
            }
        })
        .collect();
    let snapshot = super::Snapshot::take(&set);
    let after = then(&set).await;
    set.shutdown(Duration::from_secs(5)).await;
    Ok((trials, snapshot, after))
}

/// Where a stdio source's `command` would not start: a bare name not found
/// on the `PATH` it runs with (its configured `env.PATH`, else wf's), or a
/// path that is not an executable file. `settings` are env-expanded.
pub fn missing_command(settings: &Value, base: &Path) -> Option<String> {
    let command = settings.get("command")?.as_str()?;
    if command.contains('/') {
        let cwd = settings
            .get("cwd")
            .and_then(Value::as_str)
            .map(|c| base.join(c))
            .unwrap_or_else(|| base.to_path_buf());
        let path = cwd.join(command);
        return (!is_executable(&path))
            .then(|| format!("{command:?} is not an executable file ({})", path.display()));
    }
    let path = settings
        .get("env")
        .and_then(|e| e.get("PATH"))
        .and_then(Value::as_str)
        .map(std::ffi::OsString::from)
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| is_executable(&d.join(command)));
    (!found).then(|| format!("{command:?} not found on PATH"))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn commands_are_looked_up_like_a_spawn_would() {
        let base = std::env::temp_dir();
        assert_eq!(missing_command(&json!({"url": "http://x"}), &base), None);
        assert_eq!(missing_command(&json!({"command": "sh"}), &base), None);
        let m = missing_command(&json!({"command": "wf-no-such-command-xyz"}), &base).unwrap();
        assert!(m.contains("not found on PATH"), "{m}");
        // The source's own PATH is the one searched.
        let m = missing_command(
            &json!({"command": "sh", "env": {"PATH": "/nonexistent"}}),
            &base,
        );
        assert!(m.is_some());
        let m = missing_command(&json!({"command": "./nope.sh"}), &base).unwrap();
        assert!(m.contains("not an executable file"), "{m}");
        assert_eq!(missing_command(&json!({"command": "/bin/sh"}), &base), None);
    }
}
