//! Typed access to a call's arguments, with `invalid_arguments` errors that
//! name the argument (since 1.2):
//!
//! ```
//! use wf_plugin_api::args::Args;
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {"ms": {"type": "integer"}, "label": {"type": "string"}}});
//! let input = json!({"ms": 5});
//! let args = Args::parse(&input, &schema)?;
//! let ms: u64 = args.get("ms")?;
//! let label: Option<&str> = args.opt("label")?;
//! assert_eq!((ms, label), (5, None));
//!
//! let bad = json!({"ms": "5"});
//! let e = Args::parse(&bad, &schema)?.get::<u64>("ms").unwrap_err();
//! assert_eq!(e.message, "argument `ms` must be a non-negative integer, got a string");
//! # Ok::<(), wf_plugin_api::PluginError>(())
//! ```

use serde_json::{Map, Value};

use crate::error::PluginError;

/// The arguments of one call: a JSON object whose keys are all declared by
/// the capability's input schema.
#[derive(Debug, Clone, Copy)]
pub struct Args<'a>(&'a Map<String, Value>);

/// A type an argument can be read as, borrowing from the arguments where it can.
pub trait FromArg<'a>: Sized {
    /// What the argument must be, for messages (`a string`).
    const EXPECTED: &'static str;
    /// The value as `Self`, or None when it is of another type.
    fn from_arg(value: &'a Value) -> Option<Self>;
}

macro_rules! from_arg {
    ($($t:ty => $expected:literal, $cast:expr;)*) => {$(
        impl<'a> FromArg<'a> for $t {
            const EXPECTED: &'static str = $expected;
            fn from_arg(value: &'a Value) -> Option<Self> {
                ($cast)(value)
            }
        }
    )*};
}

from_arg! {
    bool => "a boolean", Value::as_bool;
    u64 => "a non-negative integer", Value::as_u64;
    i64 => "an integer", Value::as_i64;
    f64 => "a number", Value::as_f64;
    &'a str => "a string", Value::as_str;
    String => "a string", |v: &Value| v.as_str().map(str::to_string);
    &'a Value => "any JSON value", Some;
    &'a [Value] => "an array", |v: &'a Value| v.as_array().map(Vec::as_slice);
    &'a Map<String, Value> => "an object", Value::as_object;
}

impl<'a> Args<'a> {
    /// Checks that `input` is an object holding only properties `schema`
    /// declares, so a misspelt optional argument is reported instead of
    /// silently ignored.
    pub fn parse(input: &'a Value, schema: &Value) -> Result<Self, PluginError> {
        let map = input.as_object().ok_or_else(|| {
            PluginError::invalid_arguments(format!(
                "arguments must be a JSON object, got {}",
                type_name(input)
            ))
        })?;
        let known = schema.get("properties").and_then(Value::as_object);
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

    /// Required argument `key` as `T`: `missing required argument `key`` or
    /// `argument `key` must be <T>, got <type>` otherwise.
    pub fn get<T: FromArg<'a>>(&self, key: &str) -> Result<T, PluginError> {
        self.opt(key)?.ok_or_else(|| {
            PluginError::invalid_arguments(format!("missing required argument `{key}`"))
        })
    }

    /// Optional argument `key` as `T` (None when absent).
    pub fn opt<T: FromArg<'a>>(&self, key: &str) -> Result<Option<T>, PluginError> {
        self.0
            .get(key)
            .map(|v| T::from_arg(v).ok_or_else(|| wrong_type(key, T::EXPECTED, v)))
            .transpose()
    }

    /// Every argument, as given.
    pub fn map(&self) -> &'a Map<String, Value> {
        self.0
    }
}

/// The `invalid_arguments` error for argument `key` holding `value` instead of
/// `expected` (for checks beyond a type: `objects[2]`, an empty string…).
pub fn wrong_type(key: &str, expected: &str, value: &Value) -> PluginError {
    PluginError::invalid_arguments(format!(
        "argument `{key}` must be {expected}, got {}",
        type_name(value)
    ))
}

/// The JSON type of `value` with its article, for messages (`a string`).
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use serde_json::json;

    #[test]
    fn reads_typed_arguments_and_names_the_bad_one() {
        let schema = json!({"properties": {"a": {}, "b": {}, "c": {}, "d": {}}});
        let input = json!({"a": true, "b": [1], "c": {"x": 1}, "d": -2});
        let args = Args::parse(&input, &schema).unwrap_or_else(|e| panic!("{e}"));
        assert!(args.get::<bool>("a").unwrap_or(false));
        assert_eq!(args.get::<&[Value]>("b").map(<[Value]>::len).ok(), Some(1));
        assert_eq!(
            args.get::<&Map<String, Value>>("c").map(Map::len).ok(),
            Some(1)
        );
        assert_eq!(args.get::<i64>("d").ok(), Some(-2));
        let e = args.get::<u64>("d").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert_eq!(
            e.message,
            "argument `d` must be a non-negative integer, got a number"
        );
        assert_eq!(args.opt::<&str>("missing").ok(), Some(None));
        assert_eq!(
            args.get::<&str>("missing").unwrap_err().message,
            "missing required argument `missing`"
        );
        let e = Args::parse(&json!({"z": 1}), &schema).unwrap_err();
        assert_eq!(e.message, "unknown argument `z` (expected: a, b, c, d)");
        let e = Args::parse(&json!([1]), &schema).unwrap_err();
        assert_eq!(e.message, "arguments must be a JSON object, got an array");
    }
}
