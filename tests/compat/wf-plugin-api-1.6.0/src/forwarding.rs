//! Since 1.2: the shapes of the client→source requests a host forwards
//! besides calls: argument completion (`completion/complete`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a completion is asked for: MCP `completion/complete` params, with
/// the prompt name and resource URI as the source knows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteParams {
    /// The prompt or resource template whose argument is completed.
    #[serde(rename = "ref")]
    pub reference: CompletionRef,
    /// The argument and what the user typed so far.
    pub argument: CompletionArgument,
    /// MCP `context` (`{"arguments": {...}}`: arguments already filled in), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
}

/// MCP's `ref` of a completion request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum CompletionRef {
    /// An argument of a prompt.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name within the source.
        name: String,
    },
    /// A variable of a resource template.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The template (or URI) within the source.
        uri: String,
    },
}

/// The argument being completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionArgument {
    /// Its name.
    pub name: String,
    /// What is typed so far.
    pub value: String,
}

/// Suggested values (MCP's `completion` object: at most 100 values).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// The values, best first.
    pub values: Vec<String>,
    /// How many values exist in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u32>,
    /// More values exist than `values` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

impl Completion {
    /// These values (cut to MCP's 100), with `total` and `hasMore` set to match.
    pub fn of(values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let all: Vec<String> = values.into_iter().map(Into::into).collect();
        let total = all.len();
        let values: Vec<String> = all.into_iter().take(100).collect();
        Self {
            has_more: Some(total > values.len()),
            total: u32::try_from(total).ok(),
            values,
        }
    }
}
