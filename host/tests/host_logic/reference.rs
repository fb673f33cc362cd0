//! The reference pages (docs/reference/) against the code: a config key, CLI
//! command, admin tool or metric with no entry fails, and so does an entry
//! with nothing behind it.
//!
//! Config keys come from the config's own `Deserialize`: a probing
//! deserializer walks `Config` and notes every field serde asks for (the
//! derived code names a struct's fields when it starts one), so a new field
//! shows up here without anyone listing it. A documented default is compared
//! with `Config::default()` where the key serializes.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde_json::Value;

fn docs(page: &str) -> String {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/reference")
        .join(page);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The first cell of every table row that is one `code span`: the entries.
fn entries(page: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for line in docs(page).lines() {
        let cells: Vec<String> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        if !line.starts_with('|') || cells.len() < 2 {
            continue;
        }
        let first = &cells[0];
        if first.len() > 2
            && first.starts_with('`')
            && first.ends_with('`')
            && first.matches('`').count() == 2
        {
            out.insert(first.trim_matches('`').to_string(), cells[1..].to_vec());
        }
    }
    out
}

fn compare(what: &str, page: &str, code: &BTreeSet<String>, documented: &BTreeSet<String>) {
    let missing: Vec<_> = code.difference(documented).collect();
    let stale: Vec<_> = documented.difference(code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/reference/{page} and the code disagree on the {what}:\n  in the code, no entry: {missing:?}\n  an entry, not in the code: {stale:?}"
    );
}

// ----------------------------------------------------------------- config keys

#[derive(Debug)]
struct ProbeError(String);
impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ProbeError {}
impl de::Error for ProbeError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        ProbeError(msg.to_string())
    }
}

/// Paths serde asked for; `true` once the path turned out to be a table.
type Seen = Rc<RefCell<BTreeMap<String, bool>>>;

#[derive(Clone)]
struct Probe {
    path: String,
    seen: Seen,
}

impl Probe {
    fn child(&self, segment: &str) -> Probe {
        let path = if self.path.is_empty() {
            segment.to_string()
        } else if segment == "[]" {
            format!("{}[]", self.path)
        } else {
            format!("{}.{segment}", self.path)
        };
        self.seen.borrow_mut().entry(path.clone()).or_insert(false);
        Probe {
            path,
            seen: self.seen.clone(),
        }
    }
    fn table(&self) {
        if !self.path.is_empty() {
            self.seen.borrow_mut().insert(self.path.clone(), true);
        }
    }
}

struct Fields {
    probe: Probe,
    names: Vec<&'static str>,
    at: usize,
}

impl<'de> de::MapAccess<'de> for Fields {
    type Error = ProbeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ProbeError> {
        let Some(name) = self.names.get(self.at) else {
            return Ok(None);
        };
        seed.deserialize(name.into_deserializer()).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ProbeError> {
        let name = self.names[self.at];
        self.at += 1;
        seed.deserialize(self.probe.child(name))
    }
}

struct One {
    probe: Option<Probe>,
}

impl<'de> de::SeqAccess<'de> for One {
    type Error = ProbeError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ProbeError> {
        match self.probe.take() {
            Some(p) => seed.deserialize(p.child("[]")).map(Some),
            None => Ok(None),
        }
    }
}

macro_rules! leaf {
    ($($name:ident => $visit:ident($value:expr)),* $(,)?) => {
        $(fn $name<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
            v.$visit($value)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Probe {
    type Error = ProbeError;
    leaf! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i8(0), deserialize_i16 => visit_i16(0),
        deserialize_i32 => visit_i32(1), deserialize_i64 => visit_i64(1),
        deserialize_u8 => visit_u8(1), deserialize_u16 => visit_u16(1),
        deserialize_u32 => visit_u32(1), deserialize_u64 => visit_u64(1),
        deserialize_f32 => visit_f32(0.0), deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('x'),
        deserialize_str => visit_str("x"), deserialize_string => visit_str("x"),
        deserialize_bytes => visit_bytes(b"x"), deserialize_byte_buf => visit_bytes(b"x"),
        deserialize_identifier => visit_str("x"),
    }
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        // A free-form value (`serde_json::Value`, an untagged enum): a leaf.
        v.visit_str("x")
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_unit()
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _n: &'static str,
        v: V,
    ) -> Result<V::Value, ProbeError> {
        v.visit_unit()
    }
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_some(self)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _n: &'static str,
        v: V,
    ) -> Result<V::Value, ProbeError> {
        v.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_seq(One { probe: Some(self) })
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, ProbeError> {
        v.visit_seq(One { probe: Some(self) })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _n: &'static str,
        _len: usize,
        v: V,
    ) -> Result<V::Value, ProbeError> {
        v.visit_seq(One { probe: Some(self) })
    }
    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        // A table of named entries (`[sources.NAME]`, `[endpoints.NAME]`).
        self.table();
        v.visit_map(Fields {
            probe: self,
            names: vec!["<name>"],
            at: 0,
        })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _n: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, ProbeError> {
        self.table();
        for f in fields {
            self.child(f);
        }
        v.visit_map(Fields {
            probe: self,
            names: fields.to_vec(),
            at: 0,
        })
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _n: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, ProbeError> {
        // A unit variant named as a string (`prefix = "always"`).
        v.visit_enum(variants.first().copied().unwrap_or("x").into_deserializer())
    }
}

/// Every config key: `server.max_sessions`, `server.tokens[].name`,
/// `endpoints.<name>.tools`. Tables are left out, their keys are in.
fn config_keys() -> BTreeSet<String> {
    let seen: Seen = Rc::default();
    let probe = Probe {
        path: String::new(),
        seen: seen.clone(),
    };
    // An error (a value a field's own parser refuses) ends the walk of the
    // fields after it, so each table's type is walked again from its place.
    use serde::Deserialize as _;
    use wf_host::config as c;
    let _ = c::Config::deserialize(probe);
    let at = |path: &str| Probe {
        path: path.to_string(),
        seen: seen.clone(),
    };
    let _ = c::ServerConfig::deserialize(at("server"));
    let _ = c::CatalogConfig::deserialize(at("server.catalog"));
    let _ = c::EmbeddingsConfig::deserialize(at("server.catalog.embeddings"));
    let _ = c::OAuthConfig::deserialize(at("server.oauth"));
    let _ = c::TokenConfig::deserialize(at("server.tokens[]"));
    let _ = c::AdminConfig::deserialize(at("admin"));
    let _ = c::TelemetryConfig::deserialize(at("telemetry"));
    let _ = c::StoreConfig::deserialize(at("store"));
    let _ = c::AuditConfig::deserialize(at("audit"));
    let _ = c::AuditExport::deserialize(at("audit.export"));
    let _ = c::AuditValues::deserialize(at("audit.values[]"));
    let _ = c::PolicyConfig::deserialize(at("policy"));
    let _ = c::QuotaConfig::deserialize(at("quotas[]"));
    let _ = c::EndpointConfig::deserialize(at("endpoints.<name>"));
    let _ = c::ToolTransform::deserialize(at("endpoints.<name>.transform.<name>"));
    let _ = c::PluginSettings::deserialize(at("plugins.<name>"));
    // `[plugins]` is read by hand (`dirs`, then a table per plugin).
    if let Ok(Value::Object(m)) = serde_json::to_value(c::PluginsConfig::default()) {
        for k in m.keys() {
            seen.borrow_mut().insert(format!("plugins.{k}"), false);
        }
    }
    seen.borrow_mut().insert("plugins".into(), true);
    let seen = seen.borrow();
    let tables: Vec<&String> = seen.iter().filter(|(_, t)| **t).map(|(p, _)| p).collect();
    let mut keys = BTreeSet::new();
    for (path, table) in seen.iter() {
        let mut key = path.as_str();
        while let Some(k) = key
            .strip_suffix("[]")
            .or_else(|| key.strip_suffix(".<name>"))
        {
            key = k;
        }
        // `allow_tools = [..]`, `env = {..}`: the list or map is the key;
        // `[[server.tokens]]`, `[endpoints.NAME]`: a table, its keys are the keys.
        // (A map of plain values, `env` or `sessions`, is a table to the
        // walk, but its entries are not: the map is the key.)
        let holds_tables = tables
            .iter()
            .any(|t| t.starts_with(&format!("{key}[]")) || t.starts_with(&format!("{key}.<name>")));
        if *table || holds_tables {
            continue;
        }
        // A principal's, group's or endpoint's own `catalog` has
        // `[server.catalog]`'s keys: one entry says so.
        match key.split_once(".catalog.") {
            Some((owner, _)) if owner != "server" => keys.insert(format!("{owner}.catalog")),
            _ => keys.insert(key.to_string()),
        };
    }
    // `[sources.NAME]` is flattened into the plugin's settings: its host keys
    // are a list of their own; the plugins' keys are on the plugins' pages.
    keys.retain(|k| k != "sources");
    for k in wf_host::config::SourceConfig::HOST_KEYS {
        keys.insert(format!("sources.<name>.{k}"));
    }
    keys
}

/// A key set in an otherwise empty config: refused as unknown or not.
fn key_exists(key: &str) -> bool {
    let (table, leaf) = key.rsplit_once('.').unwrap_or(("", key));
    let leaf = leaf.trim_end_matches("[]");
    let table = table.replace("<name>", "x");
    let header = match table.strip_suffix("[]") {
        Some(t) => format!("[[{t}]]\n"),
        None if table.is_empty() => String::new(),
        None => format!("[{table}]\n"),
    };
    let text = format!("{header}{leaf} = 12345\n");
    match toml::from_str::<wf_host::config::Config>(&text) {
        Ok(_) => true,
        Err(e) => !e.to_string().contains(&format!("unknown field `{leaf}`")),
    }
}

/// A default as the reference writes it: `unset`, `64`, `"always"`, `[]`.
fn shown(v: &Value) -> String {
    match v {
        Value::Null => "unset".into(),
        Value::String(s) => format!("`\"{s}\"`"),
        other => format!("`{other}`"),
    }
}

/// Defaults as the code has them: `Config::default()`, and each table that
/// repeats (`[[server.tokens]]`, `[endpoints.NAME]`…) or is optional, built
/// from the fewest keys it takes. `None`: a key that must be given.
fn defaults() -> BTreeMap<String, Option<Value>> {
    use wf_host::config as c;
    fn flatten(
        prefix: &str,
        v: &Value,
        required: &[&str],
        out: &mut BTreeMap<String, Option<Value>>,
    ) {
        if let Value::Object(m) = v {
            for (k, v) in m {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match v {
                    Value::Object(inner) if !inner.is_empty() => flatten(&path, v, required, out),
                    _ if required.contains(&k.as_str()) => {
                        out.insert(path, None);
                    }
                    _ => {
                        out.insert(path, Some(v.clone()));
                    }
                }
            }
        }
    }
    fn from_toml<T: serde::de::DeserializeOwned + serde::Serialize>(text: &str) -> Value {
        let t: T = toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        serde_json::to_value(t).unwrap()
    }
    let mut out = BTreeMap::new();
    let config = serde_json::to_value(c::Config::default()).unwrap();
    flatten("", &config, &[], &mut out);
    let tables: Vec<(&str, Value, &[&str])> = vec![
        (
            "server.tokens[]",
            from_toml::<c::TokenConfig>("name = \"a\"\ntoken = \"0123456789abcdef\""),
            &["name", "token"],
        ),
        (
            "server.oauth",
            from_toml::<c::OAuthConfig>("issuer = \"https://i\"\nresource = \"https://r\""),
            &["issuer", "resource"],
        ),
        (
            "server.oauth.groups[]",
            from_toml::<c::GroupConfig>("name = \"g\""),
            &["name"],
        ),
        (
            "audit.values[]",
            from_toml::<c::AuditValues>("capabilities = \"x\""),
            &["capabilities"],
        ),
        (
            "quotas[]",
            serde_json::to_value(c::QuotaConfig::default()).unwrap(),
            &[],
        ),
        (
            "endpoints.<name>",
            serde_json::to_value(c::EndpointConfig::default()).unwrap(),
            &[],
        ),
        (
            "endpoints.<name>.transform.<name>",
            serde_json::to_value(c::ToolTransform::default()).unwrap(),
            &[],
        ),
        (
            "plugins.<name>",
            serde_json::to_value(c::PluginSettings::default()).unwrap(),
            &[],
        ),
        (
            "server.catalog",
            serde_json::to_value(c::CatalogConfig::default()).unwrap(),
            &[],
        ),
    ];
    for (prefix, v, required) in tables {
        flatten(prefix, &v, required, &mut out);
    }
    let source = from_toml::<c::Config>("[sources.x]\ncommand = \"y\"");
    for k in c::SourceConfig::HOST_KEYS {
        if let Some(v) = source["sources"]["x"].get(*k) {
            out.insert(format!("sources.<name>.{k}"), Some(v.clone()));
        }
    }
    out
}

/// What the reference's default column must say for `key`.
fn documented_default(defaults: &BTreeMap<String, Option<Value>>, key: &str) -> String {
    match defaults.get(key) {
        Some(Some(v)) => shown(v),
        Some(None) => "required".into(),
        // Left out when unset (an `Option` that is `None`).
        None => "unset".into(),
    }
}

#[test]
fn every_config_key_has_an_entry_and_every_entry_a_key() {
    let code = config_keys();
    let documented = entries("config.md");
    let names: BTreeSet<String> = documented.keys().cloned().collect();
    let missing: Vec<_> = code.difference(&names).collect();
    let unknown: Vec<_> = names
        .iter()
        .filter(|k| !code.contains(*k) && !key_exists(k))
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/reference/config.md and the config disagree:\n  keys with no entry: {missing:?}\n  entries no config accepts: {unknown:?}"
    );
    let defaults = defaults();
    let mut wrong = Vec::new();
    for (key, cells) in &documented {
        let want = documented_default(&defaults, key);
        // Tables and lists whose entries are documented apart say so instead.
        if cells[0] != want && !cells[0].starts_with("see ") {
            wrong.push(format!("{key}: documented {}, the code's {want}", cells[0]));
        }
    }
    assert!(
        wrong.is_empty(),
        "documented defaults differ from Config::default():\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_probe_finds_keys_the_default_does_not_serialize() {
    let keys = config_keys();
    for k in [
        "server.max_sessions",
        "server.tokens[].name",
        "server.oauth.issuer",
        "endpoints.<name>.tools",
        "quotas[].rate",
        "sources.<name>.session",
    ] {
        assert!(keys.contains(k), "{k} not found among {keys:?}");
    }
    assert!(key_exists("server.max_sessions"));
    assert!(!key_exists("server.no_such_key"));
}

// ------------------------------------------------------------- CLI, admin, metrics

fn commands(cmd: &clap::Command, prefix: &str, out: &mut BTreeSet<String>) {
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let name = format!("{prefix} {}", sub.get_name());
        if sub.has_subcommands() {
            commands(sub, &name, out);
        } else {
            out.insert(name);
        }
    }
}

#[test]
fn every_cli_command_has_an_entry() {
    let mut code = BTreeSet::new();
    commands(
        &<wf_host::cli::Cli as clap::CommandFactory>::command(),
        "wf",
        &mut code,
    );
    let documented = entries("cli.md").into_keys().collect();
    compare("commands", "cli.md", &code, &documented);
}

#[test]
fn every_admin_tool_has_an_entry() {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/surfaces/admin/tools.rs"),
    )
    .unwrap();
    let tool = regex::Regex::new(r#"\.tool\(tool\(\s*"([a-z_]+)""#).unwrap();
    let code: BTreeSet<String> = tool
        .captures_iter(&src)
        .map(|c| format!("wf_admin__{}", &c[1]))
        .collect();
    assert!(code.len() > 10, "the admin tools' list moved: {code:?}");
    let documented = entries("admin-tools.md").into_keys().collect();
    compare("admin tools", "admin-tools.md", &code, &documented);
}

/// The metrics registered in `telemetry/metrics.rs` (a family shows in
/// `/metrics` only once it has a sample, so the registry's source is read).
/// Counters are sampled as `wf_NAME_total`, the name a query uses.
fn metric_names() -> BTreeMap<String, String> {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/telemetry/metrics.rs"),
    )
    .unwrap();
    let field =
        regex::Regex::new(r"(?m)^\s+(\w+): (?:Family<\w+, (\w+)>|Histograms<\w+>)").unwrap();
    let kinds: BTreeMap<String, String> = field
        .captures_iter(&src)
        .map(|c| {
            (
                c[1].to_string(),
                c.get(2).map_or("Histogram", |m| m.as_str()).to_string(),
            )
        })
        .collect();
    let register = regex::Regex::new(
        r#"r\.register\(\s*"(\w+)",\s*"((?:[^"\\]|\\.)*)",\s*m\.(\w+)\.clone\(\)"#,
    )
    .unwrap();
    register
        .captures_iter(&src)
        .map(|c| {
            let kind = kinds.get(&c[3]).map_or("?", String::as_str);
            let name = match kind {
                "Counter" => format!("wf_{}_total", &c[1]),
                _ => format!("wf_{}", &c[1]),
            };
            (name, format!("{} | {}", kind.to_lowercase(), &c[2]))
        })
        .collect()
}

#[test]
fn every_metric_has_an_entry() {
    let code: BTreeSet<String> = metric_names().into_keys().collect();
    assert!(code.len() > 10, "the metrics registry moved: {code:?}");
    let documented = entries("metrics.md").into_keys().collect();
    compare("metrics", "metrics.md", &code, &documented);
}
