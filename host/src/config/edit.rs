//! Staged source edits, written back to the config file in its own format:
//! TOML through `toml_edit` (comments, key order and layout kept), JSON with
//! its key order kept. The running host applies them on reload.

use std::path::Path;

use serde_json::{Map, Value};

use super::{ConfigError, LoadedConfig};

/// One change to a config's sources.
#[derive(Debug, Clone)]
pub enum Edit {
    /// A new source `name` with this table (must not exist yet).
    Add {
        name: String,
        table: Map<String, Value>,
    },
    /// Replaces source `name`'s table.
    Update {
        name: String,
        table: Map<String, Value>,
    },
    Remove {
        name: String,
    },
    SetEnabled {
        name: String,
        enabled: bool,
    },
}

impl Edit {
    fn name(&self) -> &str {
        match self {
            Edit::Add { name, .. }
            | Edit::Update { name, .. }
            | Edit::Remove { name }
            | Edit::SetEnabled { name, .. } => name,
        }
    }
}

/// Applies `edit` to the config file at `path`. The edited text must still be
/// a valid config; otherwise nothing is written and the error says why.
pub fn stage(path: &Path, edit: &Edit) -> Result<(), ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: file.clone(),
        source,
    })?;
    super::check_source_name(edit.name()).map_err(|reason| ConfigError::Invalid {
        file: file.clone(),
        key: format!("sources.{}", edit.name()),
        reason,
    })?;
    let ext = super::extension(path);
    let edited = match ext.as_str() {
        "toml" => edit_toml(&file, &text, edit)?,
        "json" => edit_json(&file, &text, edit)?,
        _ => return Err(ConfigError::Format { file }),
    };
    // Refuse an edit that leaves an invalid config behind.
    super::parse(&file, &edited, &ext)?;
    let tmp = path.with_extension(format!("{ext}.wf-tmp"));
    std::fs::write(&tmp, &edited)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|source| ConfigError::Read { file, source })?;
    Ok(())
}

fn invalid(file: &str, key: String, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        file: file.into(),
        key,
        reason: reason.into(),
    }
}

fn to_toml(v: &Value) -> toml_edit::Value {
    match v {
        Value::Null => toml_edit::Value::from(""),
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or_default().into(),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(a) => toml_edit::Value::Array(a.iter().map(to_toml).collect()),
        Value::Object(m) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, v) in m {
                t.insert(k, to_toml(v));
            }
            toml_edit::Value::InlineTable(t)
        }
    }
}

fn toml_table(map: &Map<String, Value>) -> toml_edit::Table {
    let mut t = toml_edit::Table::new();
    for (k, v) in map {
        t.insert(k, toml_edit::Item::Value(to_toml(v)));
    }
    t
}

/// Makes `t` hold exactly `map`, keeping the comments and layout of every
/// key that stays (recursively for sub-tables).
fn update_table(t: &mut dyn toml_edit::TableLike, map: &Map<String, Value>) {
    let old: Vec<String> = t.iter().map(|(k, _)| k.to_string()).collect();
    for k in old.iter().filter(|k| !map.contains_key(*k)) {
        t.remove(k);
    }
    for (k, v) in map {
        match (t.get_mut(k), v) {
            (Some(item), Value::Object(sub)) if item.is_table_like() => {
                if let Some(inner) = item.as_table_like_mut() {
                    update_table(inner, sub);
                }
            }
            (Some(item), _) if item.is_value() => {
                let old = item.as_value_mut().expect("a value");
                let mut value = to_toml(v);
                *value.decor_mut() = old.decor().clone();
                *old = value;
            }
            _ => {
                t.insert(k, toml_edit::Item::Value(to_toml(v)));
            }
        }
    }
}

fn edit_toml(file: &str, text: &str, edit: &Edit) -> Result<String, ConfigError> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| invalid(file, "<syntax>".into(), e.to_string()))?;
    let name = edit.name();
    let in_mcp = doc.get("mcpServers").and_then(|m| m.get(name)).is_some();
    let section = if in_mcp { "mcpServers" } else { "sources" };
    let key = format!("{section}.{name}");
    if !doc.contains_key(section) {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        doc.insert(section, toml_edit::Item::Table(t));
    }
    let tables = doc[section]
        .as_table_like_mut()
        .ok_or_else(|| invalid(file, section.into(), "is not a table"))?;
    let exists = tables.contains_key(name);
    match edit {
        Edit::Add { table, .. } => {
            if exists {
                return Err(invalid(file, key, "a source of that name already exists"));
            }
            tables.insert(name, toml_edit::Item::Table(toml_table(table)));
        }
        Edit::Update { table, .. } => {
            if !exists {
                return Err(invalid(file, key, "no such source"));
            }
            // Keep the table's own comments: update it in place.
            let t = tables
                .get_mut(name)
                .and_then(|i| i.as_table_like_mut())
                .ok_or_else(|| invalid(file, key.clone(), "is not a table"))?;
            update_table(t, table);
        }
        Edit::Remove { .. } => {
            if tables.remove(name).is_none() {
                return Err(invalid(file, key, "no such source"));
            }
        }
        Edit::SetEnabled { enabled, .. } => {
            let t = tables
                .get_mut(name)
                .and_then(|i| i.as_table_like_mut())
                .ok_or_else(|| invalid(file, key.clone(), "no such source"))?;
            if in_mcp {
                t.insert("disabled", toml_edit::Item::Value((!enabled).into()));
            } else {
                t.insert("enabled", toml_edit::Item::Value((*enabled).into()));
            }
        }
    }
    Ok(doc.to_string())
}

fn edit_json(file: &str, text: &str, edit: &Edit) -> Result<String, ConfigError> {
    let mut doc: Value =
        serde_json::from_str(text).map_err(|e| invalid(file, "<syntax>".into(), e.to_string()))?;
    let root = doc
        .as_object_mut()
        .ok_or_else(|| invalid(file, "<root>".into(), "is not a JSON object"))?;
    let name = edit.name();
    let in_mcp = root.get("mcpServers").and_then(|m| m.get(name)).is_some();
    // A Claude Desktop file gets new sources in its own `mcpServers` object.
    let section = if in_mcp || (!root.contains_key("sources") && root.contains_key("mcpServers")) {
        "mcpServers"
    } else {
        "sources"
    };
    let key = format!("{section}.{name}");
    let tables = root
        .entry(section)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| invalid(file, section.into(), "is not an object"))?;
    match edit {
        Edit::Add { table, .. } => {
            if tables.contains_key(name) {
                return Err(invalid(file, key, "a source of that name already exists"));
            }
            tables.insert(name.into(), Value::Object(table.clone()));
        }
        Edit::Update { table, .. } => {
            let t = tables
                .get_mut(name)
                .ok_or_else(|| invalid(file, key, "no such source"))?;
            *t = Value::Object(table.clone());
        }
        Edit::Remove { .. } => {
            tables
                .remove(name)
                .ok_or_else(|| invalid(file, key, "no such source"))?;
        }
        Edit::SetEnabled { enabled, .. } => {
            let t = tables
                .get_mut(name)
                .and_then(Value::as_object_mut)
                .ok_or_else(|| invalid(file, key, "no such source"))?;
            if section == "mcpServers" {
                t.insert("disabled".into(), Value::Bool(!enabled));
            } else {
                t.insert("enabled".into(), Value::Bool(*enabled));
            }
        }
    }
    Ok(serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n")
}

impl LoadedConfig {
    /// Stages `edit` in this config's file (the embedded default has none).
    pub fn stage(&self, edit: &Edit) -> Result<(), ConfigError> {
        match &self.file {
            Some(f) => stage(f, edit),
            None => Err(ConfigError::Invalid {
                file: "<embedded default>".into(),
                key: format!("sources.{}", edit.name()),
                reason: "wf was started without --config; there is no file to write to".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tmp(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("wf-edit-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn table(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn toml_round_trip_keeps_comments() {
        let original = "# wf config for the team\n[server]\nmax_name_len = 40 # short names\n\n# the reference server\n[sources.everything]\ncommand = \"npx\" # via npx\nargs = [\"-y\", \"x\"]\n";
        let p = tmp("wf.toml", original);
        stage(
            &p,
            &Edit::Add {
                name: "fx".into(),
                table: table(json!({"command": "fixture", "env": {"A": "1"}})),
            },
        )
        .unwrap();
        stage(
            &p,
            &Edit::Update {
                name: "everything".into(),
                table: table(json!({"command": "npx", "args": ["-y", "y"]})),
            },
        )
        .unwrap();
        stage(
            &p,
            &Edit::SetEnabled {
                name: "fx".into(),
                enabled: false,
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        for c in [
            "# wf config for the team",
            "# short names",
            "# the reference server",
            "# via npx",
        ] {
            assert!(text.contains(c), "lost {c:?}:\n{text}");
        }
        let cfg = LoadedConfig::load(&p).unwrap().sources().unwrap();
        assert_eq!(cfg["everything"].settings["args"], json!(["-y", "y"]));
        assert_eq!(cfg["fx"].settings["env"], json!({"A": "1"}));
        assert!(!cfg["fx"].enabled);
        stage(&p, &Edit::Remove { name: "fx".into() }).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            !text.contains("fixture") && text.contains("# via npx"),
            "{text}"
        );
        assert!(
            stage(&p, &Edit::Remove { name: "fx".into() })
                .unwrap_err()
                .to_string()
                .contains("no such source")
        );
        assert!(
            stage(
                &p,
                &Edit::Add {
                    name: "everything".into(),
                    table: Map::new()
                }
            )
            .unwrap_err()
            .to_string()
            .contains("already exists")
        );
    }

    #[test]
    fn invalid_edits_write_nothing() {
        let p = tmp("v.toml", "[sources.a]\ncommand = \"x\"\n");
        let e = stage(
            &p,
            &Edit::Update {
                name: "a".into(),
                table: table(json!({"enabled": "yes"})),
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("sources.a"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "[sources.a]\ncommand = \"x\"\n"
        );
        assert!(
            stage(
                &p,
                &Edit::Add {
                    name: "bad__name".into(),
                    table: Map::new()
                }
            )
            .is_err()
        );
    }

    #[test]
    fn claude_desktop_json_keeps_its_shape() {
        let p = tmp(
            "claude.json",
            r#"{"mcpServers": {"b": {"command": "x"}, "a": {"command": "y"}}, "globalShortcut": "Ctrl+Space"}"#,
        );
        stage(
            &p,
            &Edit::Add {
                name: "c".into(),
                table: table(json!({"command": "z"})),
            },
        )
        .unwrap();
        stage(
            &p,
            &Edit::SetEnabled {
                name: "b".into(),
                enabled: false,
            },
        )
        .unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let keys: Vec<&String> = v["mcpServers"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "a", "c"], "key order kept");
        assert_eq!(v["mcpServers"]["b"]["disabled"], json!(true));
        assert_eq!(v["globalShortcut"], json!("Ctrl+Space"));
    }
}
