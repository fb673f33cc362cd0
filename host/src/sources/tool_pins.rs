//! Tool pins (issue 54): what an operator reviewed stays what the model reads.
//!
//! `tools.lock`, beside the config, records per source and tool the digest
//! of the tool's definition (name, title, description, input and output
//! schemas, annotations; canonical JSON, SHA-256) and the definition itself,
//! so `wf tools diff` can show what changed and the file reviews in a diff.
//! With pins present, [`judge`] holds a tool of a pinned source whose
//! definition no longer matches (or that is new), per the source's
//! `on_change`, and screening findings (`poison`) per its `screen`. The
//! hold is the call pipeline's *hold* stage: a held tool is left out of the
//! served catalog (so out of every list) and its calls are refused by the
//! source handle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use wf_plugin_api::{Catalog, Tool};

use super::poison::{self, Finding, Others};
use crate::store::content_hash;

/// The lock file's name, beside the config file.
pub const LOCK_FILE: &str = "tools.lock";

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a tools lock file: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("pins need a config file: the lock file is kept beside it (--config)")]
    NoConfigFile,
    #[error("no tool or source {0:?} to approve (see wf tools diff)")]
    UnknownName(String),
}

/// One pinned tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    pub digest: String,
    pub definition: Value,
}

/// The lock file: source → tool → pin. JSON with sorted keys, one change a
/// few lines in a diff.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolLock {
    pub version: u32,
    pub sources: BTreeMap<String, BTreeMap<String, Pin>>,
}

impl ToolLock {
    /// The lock file of the config at `config_file`.
    pub fn path_for(config_file: Option<&Path>) -> Result<PathBuf, PinError> {
        let file = config_file.ok_or(PinError::NoConfigFile)?;
        let dir = file.parent().unwrap_or(Path::new("."));
        Ok(dir.join(LOCK_FILE))
    }

    /// Reads `path`; a missing file is no pins at all.
    pub fn read(path: &Path) -> Result<Option<Self>, PinError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(PinError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| PinError::Parse {
                path: path.display().to_string(),
                source,
            })
    }

    /// Writes `path` atomically (a watcher never reads half a file).
    pub fn write(&self, path: &Path) -> Result<(), PinError> {
        let io = |source| PinError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut text =
            serde_json::to_string_pretty(&sorted(&json!(self))).map_err(|e| io(e.into()))?;
        text.push('\n');
        let tmp = path.with_extension("lock.tmp");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Pins every tool of `catalog` as source `source` (replacing its pins).
    pub fn pin_source(&mut self, source: &str, catalog: &Catalog) {
        self.version = 1;
        let pins = catalog
            .tools
            .iter()
            .map(|t| (t.name.clone(), pin_of(t)))
            .collect();
        self.sources.insert(source.into(), pins);
    }

    /// Accepts what `source` serves now for `tool`: pins it, or drops the pin
    /// of a tool the source no longer has.
    pub fn approve(&mut self, source: &str, tool: &str, now: Option<&Tool>) {
        let pins = self.sources.entry(source.into()).or_default();
        match now {
            Some(t) => {
                pins.insert(tool.into(), pin_of(t));
            }
            None => {
                pins.remove(tool);
            }
        }
    }
}

/// Objects with sorted keys (serde_json may keep insertion order).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let b: BTreeMap<&String, Value> = m.iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(b.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        v => v.clone(),
    }
}

/// The part of a tool the model reads, in the MCP shape.
pub fn definition(tool: &Tool) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(tool.name));
    for (key, v) in [
        ("title", tool.extra.get("title").cloned()),
        ("description", tool.description.clone().map(Value::String)),
        ("inputSchema", Some(tool.input_schema.clone())),
        ("outputSchema", tool.output_schema.clone()),
        ("annotations", tool.extra.get("annotations").cloned()),
    ] {
        if let Some(v) = v.filter(|v| !v.is_null()) {
            m.insert(key.into(), v);
        }
    }
    Value::Object(m)
}

pub fn digest(definition: &Value) -> String {
    format!("sha256:{}", content_hash(definition))
}

fn pin_of(tool: &Tool) -> Pin {
    let definition = sorted(&definition(tool));
    Pin {
        digest: digest(&definition),
        definition,
    }
}

// A source's settings for pins and screening are config (its `[sources.NAME]`
// keys); they live there, below this module.
pub use crate::config::{OnChange, PinPolicy as Policy, ScreenMode};

/// Everything judging needs: the lock in force and each source's policy.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// The lock file (None: no config file, so no pins).
    pub path: Option<PathBuf>,
    pub lock: Option<ToolLock>,
    /// Why the lock file could not be read: every pinned-or-not tool of a
    /// source with pins is then held (fail closed), and the error is shown.
    pub broken: Option<String>,
    pub policies: BTreeMap<String, Policy>,
}

impl Guard {
    /// Loads the lock file beside `config_file`.
    pub fn load(config_file: Option<&Path>, policies: BTreeMap<String, Policy>) -> Self {
        let path = ToolLock::path_for(config_file).ok();
        let mut g = Self {
            path,
            lock: None,
            broken: None,
            policies,
        };
        g.reread();
        g
    }

    /// Reads the lock file again; true when what it says changed.
    pub fn reread(&mut self) -> bool {
        let Some(path) = &self.path else { return false };
        let (lock, broken) = match ToolLock::read(path) {
            Ok(l) => (l, None),
            Err(e) => (self.lock.clone(), Some(e.to_string())),
        };
        let changed = lock != self.lock || broken != self.broken;
        if let Some(b) = &broken
            && changed
        {
            tracing::error!("tool pins: {b}; every tool of every source is held until it reads");
        }
        self.lock = lock;
        self.broken = broken;
        changed
    }

    fn policy(&self, source: &str) -> Policy {
        self.policies.get(source).copied().unwrap_or_default()
    }
}

/// Why a tool is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldWhy {
    /// Its definition differs from its pin.
    Changed,
    /// Its source is pinned but it is not.
    New,
    /// Screening flagged it and the source says `screen = "hold"`.
    Screened,
    /// The lock file cannot be read.
    LockUnreadable,
}

/// A tool left out until an operator approves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Held {
    pub name: String,
    pub why: HeldWhy,
    /// What a call to it is told.
    pub message: String,
}

/// A source's catalog after the hold stage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judged {
    /// What is served: the judged catalog itself (shared, not copied) when
    /// nothing is held.
    pub served: Arc<Catalog>,
    pub held: Vec<Held>,
    /// Screening findings, and changes let through by `on_change = "warn"`.
    pub warnings: Vec<Finding>,
}

/// Applies pins and screening to source `source`'s (schema-screened) catalog.
pub fn judge(guard: &Guard, source: &str, catalog: &Arc<Catalog>, others: &Others) -> Judged {
    let policy = guard.policy(source);
    let findings = poison::scan(catalog, others);
    let pins = guard.lock.as_ref().and_then(|l| l.sources.get(source));
    let mut held = Vec::new();
    let mut warnings = findings.clone();
    for tool in &catalog.tools {
        let reference = format!("{source}.{}", tool.name);
        let pinned = pins.map(|p| p.get(&tool.name));
        // Digested only to compare with a pin (a large catalog's tools are
        // judged again whenever another source changes).
        let current = matches!(pinned, Some(Some(_))).then(|| digest(&sorted(&definition(tool))));
        if guard.broken.is_some() && (pins.is_some() || guard.lock.is_none()) {
            held.push(Held {
                name: tool.name.clone(),
                why: HeldWhy::LockUnreadable,
                message: format!(
                    "tool {reference:?} is held: the tools lock file cannot be read ({})",
                    guard.broken.as_deref().unwrap_or_default()
                ),
            });
            continue;
        }
        let change = match pinned {
            Some(Some(pin)) if Some(&pin.digest) == current.as_ref() => None,
            Some(Some(_)) => Some(HeldWhy::Changed),
            Some(None) => Some(HeldWhy::New),
            None => None,
        };
        if let Some(why) = change {
            let what = match why {
                HeldWhy::New => {
                    format!("tool {reference:?} is new since source {source:?} was pinned")
                }
                _ => format!("tool {reference:?} changed since it was pinned"),
            };
            match policy.on_change {
                OnChange::Hold => {
                    held.push(Held {
                        name: tool.name.clone(),
                        why,
                        message: format!(
                            "{what} and awaits approval (wf tools diff; wf tools approve {reference})"
                        ),
                    });
                    continue;
                }
                OnChange::Warn => warnings.push(Finding {
                    name: tool.name.clone(),
                    rule: if why == HeldWhy::New {
                        "new_since_pin"
                    } else {
                        "changed_since_pin"
                    },
                    field: "definition".into(),
                    span: [0, 0],
                    excerpt: what,
                }),
                OnChange::Allow => {}
            }
        }
        // A flagged tool is released by approving it as it is now.
        let approved = matches!(pinned, Some(Some(pin)) if Some(&pin.digest) == current.as_ref());
        if policy.screen == ScreenMode::Hold && !approved {
            let rules: Vec<&str> = findings
                .iter()
                .filter(|f| f.name == tool.name)
                .map(|f| f.rule)
                .collect();
            if !rules.is_empty() {
                held.push(Held {
                    name: tool.name.clone(),
                    why: HeldWhy::Screened,
                    message: format!(
                        "tool {reference:?} was flagged by screening ({}) and awaits approval (wf tools approve {reference})",
                        rules.join(", ")
                    ),
                });
            }
        }
    }
    let served = if held.is_empty() {
        catalog.clone()
    } else {
        let mut served = (**catalog).clone();
        let out = |name: &str| held.iter().any(|h| h.name == name);
        served.tools.retain(|t| !out(&t.name));
        // The mcp plugin mirrors each tool as a node spec of the same name.
        served.node_specs.retain(|n| !out(&n.name));
        Arc::new(served)
    };
    Judged {
        served,
        held,
        warnings,
    }
}

/// One tool's difference from its pin, for `wf tools diff`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDiff {
    pub source: String,
    pub tool: String,
    /// `changed`, `new` or `removed`.
    pub status: &'static str,
    /// The description's line diff (`-` pinned, `+` now, ` ` both).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub description: Vec<String>,
    /// Every other field that differs, by JSON path: `path: pinned -> now`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schema: Vec<String>,
}

/// What differs between the pins of `source` and its catalog now. Sources
/// without pins have no diff.
pub fn diff(lock: &ToolLock, source: &str, catalog: &Catalog) -> Vec<ToolDiff> {
    let Some(pins) = lock.sources.get(source) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for tool in &catalog.tools {
        let now = sorted(&definition(tool));
        let (status, before) = match pins.get(&tool.name) {
            Some(p) if p.digest == digest(&now) => continue,
            Some(p) => ("changed", p.definition.clone()),
            None => ("new", json!({})),
        };
        out.push(one_diff(source, &tool.name, status, &before, &now));
    }
    for (name, pin) in pins {
        if !catalog.tools.iter().any(|t| &t.name == name) {
            out.push(one_diff(
                source,
                name,
                "removed",
                &pin.definition,
                &json!({}),
            ));
        }
    }
    out
}

fn one_diff(
    source: &str,
    tool: &str,
    status: &'static str,
    before: &Value,
    now: &Value,
) -> ToolDiff {
    let text = |v: &Value| {
        v.get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (a, b) = (text(before), text(now));
    let description = if a == b {
        Vec::new()
    } else {
        line_diff(&a, &b)
    };
    let mut schema = Vec::new();
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("description");
        }
        v
    };
    json_diff("", &strip(before), &strip(now), &mut schema);
    ToolDiff {
        source: source.into(),
        tool: tool.into(),
        status,
        description,
        schema,
    }
}

/// A line diff by longest common subsequence (descriptions are short).
pub fn line_diff(a: &str, b: &str) -> Vec<String> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(format!(" {}", a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push(format!("+{}", b[j]));
            j += 1;
        } else {
            out.push(format!("-{}", a[i]));
            i += 1;
        }
    }
    out
}

fn json_diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(a), Some(b)) => json_diff(&p, a, b, out),
                    (Some(a), None) => out.push(format!("{p}: {a} -> (removed)")),
                    (None, Some(b)) => out.push(format!("{p}: (added) -> {b}")),
                    (None, None) => {}
                }
            }
        }
        _ => out.push(format!(
            "{}: {a} -> {b}",
            if path.is_empty() { "." } else { path }
        )),
    }
}

#[cfg(test)]
mod tests;

/// The three operator actions, shared by `wf tools`, the admin surface and
/// the console, over `(source, catalog before the hold stage)` pairs.
pub mod actions {
    use super::*;

    /// Pins every tool of `catalogs` (those of `only`, when given); returns
    /// the sources pinned with their tool counts.
    pub fn pin(
        path: &Path,
        catalogs: &[(String, Arc<Catalog>)],
        only: &[String],
    ) -> Result<Vec<(String, usize)>, PinError> {
        for name in only {
            if !catalogs.iter().any(|(s, _)| s == name) {
                return Err(PinError::UnknownName(name.clone()));
            }
        }
        let mut lock = ToolLock::read(path)?.unwrap_or_default();
        let mut done = Vec::new();
        for (source, catalog) in catalogs {
            if only.is_empty() || only.contains(source) {
                lock.pin_source(source, catalog);
                done.push((source.clone(), catalog.tools.len()));
            }
        }
        lock.write(path)?;
        Ok(done)
    }

    /// Every pinned tool's difference from what its source serves now.
    pub fn diff(
        path: &Path,
        catalogs: &[(String, Arc<Catalog>)],
    ) -> Result<Vec<ToolDiff>, PinError> {
        let lock = ToolLock::read(path)?.unwrap_or_default();
        Ok(catalogs
            .iter()
            .flat_map(|(s, c)| super::diff(&lock, s, c))
            .collect())
    }

    /// Accepts the changes of `names`: a `source.tool` ref, or a source's
    /// name for all of its changes. Returns the refs approved.
    pub fn approve(
        path: &Path,
        catalogs: &[(String, Arc<Catalog>)],
        names: &[String],
    ) -> Result<Vec<String>, PinError> {
        let mut lock = ToolLock::read(path)?.unwrap_or_default();
        let diffs: Vec<ToolDiff> = catalogs
            .iter()
            .flat_map(|(s, c)| super::diff(&lock, s, c))
            .collect();
        let mut approved = Vec::new();
        for name in names {
            let picked: Vec<&ToolDiff> = diffs
                .iter()
                .filter(|d| *name == d.source || *name == format!("{}.{}", d.source, d.tool))
                .collect();
            // A flagged tool under screen = "hold" may have no diff at all:
            // approving it pins it as it is.
            let unpinned = catalogs.iter().find_map(|(s, c)| {
                let tool = name.strip_prefix(s.as_str())?.strip_prefix('.')?;
                c.tools.iter().find(|t| t.name == tool).map(|t| (s, t))
            });
            if picked.is_empty() && unpinned.is_none() {
                return Err(PinError::UnknownName(name.clone()));
            }
            for d in picked {
                let now = catalogs
                    .iter()
                    .find(|(s, _)| *s == d.source)
                    .and_then(|(_, c)| c.tools.iter().find(|t| t.name == d.tool));
                lock.approve(&d.source, &d.tool, now);
                approved.push(format!("{}.{}", d.source, d.tool));
            }
            if let Some((s, t)) = unpinned
                && !approved.contains(name)
            {
                // The first approval in an unpinned source pins what it
                // serves now too (unflagged tools), or they would turn "new".
                if !lock.sources.contains_key(s.as_str())
                    && let Some((_, c)) = catalogs.iter().find(|(n, _)| n == s)
                {
                    let flagged: std::collections::BTreeSet<String> =
                        poison::scan(c, &Others::default())
                            .into_iter()
                            .map(|f| f.name)
                            .collect();
                    for other in c.tools.iter().filter(|o| !flagged.contains(&o.name)) {
                        lock.approve(s, &other.name, Some(other));
                    }
                }
                lock.approve(s, &t.name, Some(t));
                approved.push(name.clone());
            }
        }
        lock.version = 1;
        lock.write(path)?;
        Ok(approved)
    }

    /// `wf tools diff`'s text: per tool, its status, the description's
    /// line diff and every other field that differs.
    pub fn render(diffs: &[ToolDiff]) -> String {
        let mut out = String::new();
        for d in diffs {
            out.push_str(&format!("{} {}.{}\n", d.status, d.source, d.tool));
            if !d.description.is_empty() {
                out.push_str("  description:\n");
                for l in &d.description {
                    out.push_str(&format!("    {l}\n"));
                }
            }
            for s in &d.schema {
                out.push_str(&format!("  {s}\n"));
            }
        }
        out
    }
}
