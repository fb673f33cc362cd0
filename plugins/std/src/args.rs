//! Typed access to a node's arguments, with errors that name the argument.

use wf_plugin_api::prelude::*;

/// The arguments of one call: a JSON object whose keys are all declared by
/// the node's input schema.
pub(crate) struct Args<'a>(&'a Map<String, Value>);

impl<'a> Args<'a> {
    /// Checks `input` against the property names of `schema`, so that a
    /// misspelled optional argument is reported instead of silently ignored.
    pub(crate) fn parse(input: &'a Value, schema: &Value) -> Result<Self, PluginError> {
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

    pub(crate) fn any(&self, key: &str) -> Result<&'a Value, PluginError> {
        self.required(key, "any JSON value", Some)
    }
    pub(crate) fn opt_any(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key)
    }
    pub(crate) fn str(&self, key: &str) -> Result<&'a str, PluginError> {
        self.required(key, "a string", Value::as_str)
    }
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, PluginError> {
        self.optional(key, "a string", Value::as_str)
    }
    pub(crate) fn bool(&self, key: &str) -> Result<bool, PluginError> {
        self.required(key, "a boolean", Value::as_bool)
    }
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, PluginError> {
        self.optional(key, "a boolean", Value::as_bool)
    }
    pub(crate) fn u64(&self, key: &str) -> Result<u64, PluginError> {
        self.required(key, "a non-negative integer", Value::as_u64)
    }
    /// An object, kept as a `Value` so that paths can walk it like any other value.
    pub(crate) fn object(&self, key: &str) -> Result<&'a Value, PluginError> {
        self.required(key, "an object", |v| v.is_object().then_some(v))
    }
    pub(crate) fn array(&self, key: &str) -> Result<&'a [Value], PluginError> {
        self.required(key, "an array", |v| v.as_array().map(Vec::as_slice))
    }

    fn required<T>(
        &self,
        key: &str,
        expected: &str,
        cast: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<T, PluginError> {
        self.optional(key, expected, cast)?.ok_or_else(|| {
            PluginError::invalid_arguments(format!("missing required argument `{key}`"))
        })
    }

    fn optional<T>(
        &self,
        key: &str,
        expected: &str,
        cast: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, PluginError> {
        self.0
            .get(key)
            .map(|v| cast(v).ok_or_else(|| wrong_type(key, expected, v)))
            .transpose()
    }
}

/// The `invalid_arguments` error for argument `key` holding `value` instead of `expected`.
pub(crate) fn wrong_type(key: &str, expected: &str, value: &Value) -> PluginError {
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
