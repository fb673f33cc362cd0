//! The notes kind's argument rules (non-empty text, tag lists) on top of
//! wf-plugin-api's typed reader, which names the argument in every error.

use wf_plugin_api::args::{self, wrong_type};
use wf_plugin_api::prelude::*;

/// The arguments of one call: a JSON object whose keys the capability's
/// input schema declares.
pub struct Args<'a>(args::Args<'a>);

impl<'a> Args<'a> {
    /// Checks that `input` is an object with only the properties `schema`
    /// declares, so that a misspelled optional argument is reported rather
    /// than silently ignored.
    pub fn parse(input: &'a Value, schema: &Value) -> Result<Self, PluginError> {
        args::Args::parse(input, schema).map(Self)
    }

    /// A required string that is not empty (after trimming).
    pub fn text(&self, key: &str) -> Result<&'a str, PluginError> {
        non_empty(key, self.0.get(key)?)
    }

    /// A required string, which may be empty.
    pub fn str(&self, key: &str) -> Result<&'a str, PluginError> {
        self.0.get(key)
    }

    /// An optional string; when present it must not be empty.
    pub fn opt_text(&self, key: &str) -> Result<Option<&'a str>, PluginError> {
        self.0
            .opt::<&str>(key)?
            .map(|s| non_empty(key, s))
            .transpose()
    }

    /// An optional list of non-empty strings, trimmed, duplicates removed.
    pub fn opt_tags(&self, key: &str) -> Result<Vec<String>, PluginError> {
        let Some(value) = self.0.opt::<&Value>(key)? else {
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
