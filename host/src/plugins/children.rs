//! What a config reload does to plugin children (process mode): a plugin
//! whose file is gone is dropped from the set and its child stopped; a
//! plugin left with no source has its child stopped (a source created later
//! starts a new one); a plugin whose `[plugins.<name>]` sandbox or limits
//! changed gets a new child with them. Plugins in process are never
//! unloaded (a library cannot be unloaded safely): a change of their
//! file or of a plugin's isolation takes effect at wf's next start.

use std::path::Path;
use std::sync::Arc;

use super::isolation::{IsolationPolicy, is_bundled};
use super::process::Supervisor;
use super::process::protocol::Start;
use super::{LoadedPlugin, PluginSet};

/// What a reload does to the children, decided under the plugin set's lock
/// and carried out after it ([`Plan::carry_out`]).
#[derive(Default)]
pub struct Plan {
    /// (plugin, its supervisor, why): children to stop.
    stop: Vec<(String, Arc<Supervisor>, String)>,
    /// (plugin, its supervisor, new settings, the sandbox's sources).
    restart: Vec<(
        String,
        Arc<Supervisor>,
        Start,
        Vec<super::process::protocol::SandboxSource>,
    )>,
    /// What takes effect only at wf's next start (one line each).
    pub restart_needed: Vec<String>,
}

/// What a reload did to the children.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Outcome {
    /// Plugins whose child was stopped (no source left, or the file gone).
    pub stopped: Vec<String>,
    /// Plugins whose child was restarted with new settings.
    pub restarted: Vec<String>,
    /// Restarts that failed (one line each).
    pub errors: Vec<String>,
}

/// The settings a child starts with, from the plugin's table.
pub fn start_of(settings: &crate::config::PluginSettings) -> Start {
    Start::from_settings(settings)
}

/// Takes the new policy and drops the process-mode plugins whose file is
/// gone (before the sources are matched to plugins: theirs go too); their
/// children are stopped by [`Plan::carry_out`].
pub fn adopt_policy(set: &mut PluginSet, policy: IsolationPolicy) -> Plan {
    set.policy.isolation = policy;
    let mut plan = Plan::default();
    set.loaded.retain(|p| match &p.child {
        Some(sup) if !p.file.exists() => {
            plan.stop.push((
                p.manifest.name.clone(),
                sup.clone(),
                format!("its file {} is gone", p.file.display()),
            ));
            false
        }
        _ => true,
    });
    plan
}

/// Once the sources are applied: which children stop, which restart with
/// new settings, and what needs wf's restart. `in_use(plugin)`: whether a
/// running source is the plugin's.
pub fn plan(set: &PluginSet, mut plan: Plan, in_use: impl Fn(&str) -> bool) -> Plan {
    let policy = &set.policy.isolation;
    for p in &set.loaded {
        let name = &p.manifest.name;
        if let Some(note) = isolation_change(p, policy) {
            plan.restart_needed.push(note);
        }
        let Some(sup) = &p.child else { continue };
        if !in_use(name) {
            if !matches!(sup.health(), super::process::Health::Stopped(_)) {
                plan.stop
                    .push((name.clone(), sup.clone(), "it has no source left".into()));
            }
            continue;
        }
        let start = start_of(&policy.settings(name));
        if start != sup.start_settings() {
            let sources = policy.sandbox_sources(set.policy.state_dir.as_deref());
            plan.restart
                .push((name.clone(), sup.clone(), start, sources));
        }
    }
    plan
}

/// A plugin whose isolation setting now says otherwise: it moves at wf's
/// next start.
fn isolation_change(p: &LoadedPlugin, policy: &IsolationPolicy) -> Option<String> {
    let dir = p.file.parent().unwrap_or(Path::new("."));
    let wanted = policy.resolve(&p.manifest.name, is_bundled(dir), p.pinned);
    (wanted != p.isolation).then(|| {
        format!(
            "{} ({}): isolation is {} now, it runs {}; restart wf to move it",
            p.file.display(),
            p.manifest.name,
            wanted.as_str(),
            p.isolation.as_str()
        )
    })
}

impl Plan {
    /// Stops and restarts children (restarts block on the child's start:
    /// run off the runtime's workers).
    pub async fn carry_out(self) -> Outcome {
        let Plan { stop, restart, .. } = self;
        tokio::task::spawn_blocking(move || {
            let mut out = Outcome::default();
            for (name, sup, why) in stop {
                tracing::info!(plugin = %name, "stopping the plugin's child: {why}");
                sup.park(&why);
                out.stopped.push(name);
            }
            for (name, sup, start, sources) in restart {
                tracing::info!(plugin = %name, "restarting the plugin's child: its settings changed");
                match sup.restart_with(start, sources) {
                    Ok(()) => out.restarted.push(name),
                    Err(e) => {
                        tracing::error!(plugin = %name, "{e}");
                        out.errors.push(e);
                    }
                }
            }
            out
        })
        .await
        .unwrap_or_default()
    }
}
