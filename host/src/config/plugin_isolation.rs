//! `[plugins.<name>]`: how one plugin runs (in wf's process or in a
//! supervised child of its own) and the child's limits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a plugin's code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Loaded into wf itself: the fast path, for plugins the operator trusts.
    InProcess,
    /// Loaded by `wf-plugin-host`, a child process of its own, supervised.
    Process,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::InProcess => "in_process",
            Isolation::Process => "process",
        }
    }
}

/// What the child may do (process mode only; the Linux sandbox,
/// `plugins::sandbox`, applies it and names it `Sandbox` too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sandbox {
    #[default]
    Strict,
    Off,
}

impl Sandbox {
    pub fn as_str(self) -> &'static str {
        match self {
            Sandbox::Strict => "strict",
            Sandbox::Off => "off",
        }
    }
}

impl std::str::FromStr for Sandbox {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "strict" => Ok(Sandbox::Strict),
            "off" => Ok(Sandbox::Off),
            other => Err(format!(
                "sandbox = {other:?}: expected \"strict\" or \"off\""
            )),
        }
    }
}

/// One `[plugins.<name>]` table, keyed by the plugin's manifest name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
    /// The child's data-segment limit (RLIMIT_DATA), in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// The child's CPU-time limit (RLIMIT_CPU), in seconds over its lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<u64>,
    /// The child's processes and threads together (a pids cgroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u64>,
    /// The operator's opt-in for running a plugin that is neither bundled
    /// nor pinned in process (`plugins::pins::IN_PROCESS_OPT_IN`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_unpinned_in_process: bool,
}

/// Reads `[plugins]`: `dirs`, and every other key as a `[plugins.<name>]`
/// table. A key whose value is no table is an unknown key (a typo of
/// `dirs`, most likely), reported from inside its value as serde reports
/// one, so the config's error names the table and hints.
pub fn deserialize_plugins<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Plugins, D::Error> {
    d.deserialize_map(PluginsVisitor)
}

/// `dirs` and the tables.
pub type Plugins = (Vec<std::path::PathBuf>, BTreeMap<String, PluginSettings>);

struct PluginsVisitor;

impl<'de> serde::de::Visitor<'de> for PluginsVisitor {
    type Value = Plugins;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the [plugins] table")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Plugins, A::Error> {
        let (mut dirs, mut tables) = (Vec::new(), BTreeMap::new());
        while let Some(key) = map.next_key::<String>()? {
            if key == "dirs" {
                dirs = map.next_value()?;
            } else {
                let table = map.next_value_seed(Entry(&key))?;
                tables.insert(key, table);
            }
        }
        Ok((dirs, tables))
    }
}

/// One `[plugins.<name>]` value: a table, or an unknown key.
struct Entry<'a>(&'a str);

impl<'de> serde::de::DeserializeSeed<'de> for Entry<'_> {
    type Value = PluginSettings;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<PluginSettings, D::Error> {
        d.deserialize_any(self)
    }
}

macro_rules! not_a_table {
    ($($f:ident: $t:ty),*) => {$(
        fn $f<E: serde::de::Error>(self, _: $t) -> Result<PluginSettings, E> {
            Err(E::unknown_field(self.0, &["dirs"]))
        }
    )*};
}

impl<'de> serde::de::Visitor<'de> for Entry<'_> {
    type Value = PluginSettings;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a [plugins.<name>] table")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<PluginSettings, A::Error> {
        PluginSettings::deserialize(serde::de::value::MapAccessDeserializer::new(map))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<PluginSettings, A::Error> {
        Err(<A::Error as serde::de::Error>::unknown_field(
            self.0,
            &["dirs"],
        ))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<PluginSettings, E> {
        Err(E::unknown_field(self.0, &["dirs"]))
    }
    not_a_table!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// The smallest `memory_mb` accepted: a plugin's runtime alone needs some.
pub const MIN_MEMORY_MB: u64 = 16;

/// The smallest `max_processes` accepted: the plugin host's own threads
/// (its runtimes and their blocking pools) need room.
pub const MIN_PROCESSES: u64 = 16;

/// The problems of `[plugins.*]` tables, one line each (`label`: the config file).
pub fn problems(label: &str, tables: &BTreeMap<String, PluginSettings>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, t) in tables {
        if let Some(mb) = t.memory_mb
            && mb < MIN_MEMORY_MB
        {
            out.push(format!(
                "{label}: plugins.{name}.memory_mb = {mb}: must be at least {MIN_MEMORY_MB}"
            ));
        }
        if let Some(n) = t.max_processes
            && n < MIN_PROCESSES
        {
            out.push(format!(
                "{label}: plugins.{name}.max_processes = {n}: must be at least {MIN_PROCESSES}"
            ));
        }
        if t.cpu_seconds == Some(0) {
            out.push(format!(
                "{label}: plugins.{name}.cpu_seconds = 0: must be at least 1"
            ));
        }
        if t.isolation == Some(Isolation::InProcess)
            && (t.memory_mb.is_some() || t.cpu_seconds.is_some() || t.max_processes.is_some())
        {
            out.push(format!(
                "{label}: plugins.{name}: memory_mb, cpu_seconds and max_processes apply only with isolation = \"process\""
            ));
        }
    }
    out
}
