//! Typed access to a call's arguments, with `invalid_arguments` errors that
//! name the argument.

use wf_plugin_api::prelude::*;

/// The arguments of one call: a JSON object whose keys the capability's
/// input schema declares.
pub struct Args<'a>(&'a Map<String, Value>);

impl<'a> Args<'a> {
    /// Checks that `input` is an object with only the properties `schema`
    /// declares, so that a misspelled optional argument is reported rather
    /// than silently ignored.
    pub fn parse(input: &'a Value, schema: &Value) -> Result<Self, PluginError> {
        let map = input.as_object().ok_or_else(|| {
            PluginError::invalid_arguments(format!(
                "arguments must be a JSON object, got {}",
                type_name(input)
            ))
        })?;
        let known = schema["properties"].as_object();
        if let Some(key) = map
            .keys()
            .find(|k| !known.is_some_and(|p| p.contains_key(*k)))
        {
            let expected: Vec<&str> = known
                .into_iter()
                .flat_map(|p| p.keys())
                .map(String::as_str)
                .collect();
            return Err(PluginError::invalid_arguments(format!(
                "unknown argument `{key}` (expected: {})",
                expected.join(", ")
            )));
        }
        Ok(Self(map))
    }

    /// A required string that is not empty (after trimming).
    pub fn text(&self, key: &str) -> Result<&'a str, PluginError> {
        self.opt_str(key)?
            .ok_or_else(|| {
                PluginError::invalid_arguments(format!("missing required argument `{key}`"))
            })
            .and_then(|s| non_empty(key, s))
    }

    /// A required string, which may be empty.
    pub fn str(&self, key: &str) -> Result<&'a str, PluginError> {
        self.opt_str(key)?.ok_or_else(|| {
            PluginError::invalid_arguments(format!("missing required argument `{key}`"))
        })
    }

    /// An optional string; when present it must not be empty.
    pub fn opt_text(&self, key: &str) -> Result<Option<&'a str>, PluginError> {
        self.opt_str(key)?.map(|s| non_empty(key, s)).transpose()
    }

    /// An optional list of non-empty strings, trimmed, duplicates removed.
    pub fn opt_tags(&self, key: &str) -> Result<Vec<String>, PluginError> {
        let Some(value) = self.0.get(key) else {
            return Ok(Vec::new());
        };
        let items = value
            .as_array()
            .ok_or_else(|| wrong_type(key, "an array of strings", value))?;
        let mut tags: Vec<String> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let tag = item
                .as_str()
                .ok_or_else(|| wrong_type(&format!("{key}[{i}]"), "a string", item))?;
            let tag = non_empty(&format!("{key}[{i}]"), tag)?;
            if !tags.iter().any(|t| t == tag) {
                tags.push(tag.to_string());
            }
        }
        Ok(tags)
    }

    fn opt_str(&self, key: &str) -> Result<Option<&'a str>, PluginError> {
        self.0
            .get(key)
            .map(|v| v.as_str().ok_or_else(|| wrong_type(key, "a string", v)))
            .transpose()
    }
}

fn non_empty<'s>(key: &str, s: &'s str) -> Result<&'s str, PluginError> {
    let trimmed = s.trim();
    if trimmed.is_empty() {
        Err(PluginError::invalid_arguments(format!(
            "argument `{key}` must not be empty"
        )))
    } else {
        Ok(trimmed)
    }
}

/// The `invalid_arguments` error for argument `key` holding `value` instead of `expected`.
pub fn wrong_type(key: &str, expected: &str, value: &Value) -> PluginError {
    PluginError::invalid_arguments(format!(
        "argument `{key}` must be {expected}, got {}",
        type_name(value)
    ))
}

/// The JSON type of `value`, for error messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
