//! `${VAR}` expansion in source settings. Values taken from the environment
//! are secrets by default: nothing downstream logs or prints settings.

use serde_json::Value;

/// Why a value could not be expanded; `key` is the key path (`sources.x.env.A`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("{key}: unterminated ${{ in value")]
    Unterminated { key: String },
    #[error("{key}: environment variable {var} is not set")]
    Unset { key: String, var: String },
}

/// Expands `${VAR}` in every string of `value`. `$${` is a literal `${`.
/// An unset variable is an error naming the key path and the variable.
pub fn expand_env(
    value: &Value,
    key: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Value, EnvError> {
    Ok(match value {
        Value::String(s) => Value::String(expand_str(s, key, lookup)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| expand_env(v, &format!("{key}[{i}]"), lookup))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), expand_env(v, &format!("{key}.{k}"), lookup)?)))
                .collect::<Result<_, EnvError>>()?,
        ),
        other => other.clone(),
    })
}

fn expand_str(
    s: &str,
    key: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, EnvError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let end = tail.find('}').ok_or_else(|| EnvError::Unterminated {
                key: key.to_string(),
            })?;
            let var = &tail[..end];
            let val = lookup(var).ok_or_else(|| EnvError::Unset {
                key: key.to_string(),
                var: var.to_string(),
            })?;
            crate::secrets::remember(&val);
            out.push_str(&val);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}
