//! What validation finds wrong with a workflow: a [`Problem`] of a stable
//! [`ProblemKind`]. The planner returns them as JSON and the CLI prints them;
//! the kind strings are part of the planner's contract with LLM clients.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// The node the problem is in (None: the workflow itself, e.g. its outputs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Where in the document: `nodes[2].args.url`, `outputs.page`…
    pub path: String,
    pub kind: ProblemKind,
    pub message: String,
}

impl Problem {
    pub fn new(node: Option<&str>, path: String, kind: ProblemKind, message: String) -> Self {
        Self {
            node: node.map(str::to_string),
            path,
            kind,
            message,
        }
    }
}

/// The stable kind of a [`Problem`] (its snake_case name on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    UnknownCapability,
    MissingArgument,
    UnknownArgument,
    UnknownNode,
    UnknownInput,
    UnknownOutput,
    TypeConflict,
    Cycle,
    DanglingOutput,
    MalformedReference,
    DuplicateNode,
    InvalidId,
    UnknownSource,
    /// The capability is a pinned tool that changed and awaits approval.
    HeldCapability,
}

impl ProblemKind {
    /// The kind as the planner and CLI show it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UnknownCapability => "unknown_capability",
            Self::MissingArgument => "missing_argument",
            Self::UnknownArgument => "unknown_argument",
            Self::UnknownNode => "unknown_node",
            Self::UnknownInput => "unknown_input",
            Self::UnknownOutput => "unknown_output",
            Self::TypeConflict => "type_conflict",
            Self::Cycle => "cycle",
            Self::DanglingOutput => "dangling_output",
            Self::MalformedReference => "malformed_reference",
            Self::DuplicateNode => "duplicate_node",
            Self::InvalidId => "invalid_id",
            Self::UnknownSource => "unknown_source",
            Self::HeldCapability => "held_capability",
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for ProblemKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_and_display_write_the_same_kind_string() {
        for k in [
            ProblemKind::UnknownCapability,
            ProblemKind::MissingArgument,
            ProblemKind::UnknownArgument,
            ProblemKind::UnknownNode,
            ProblemKind::UnknownInput,
            ProblemKind::UnknownOutput,
            ProblemKind::TypeConflict,
            ProblemKind::Cycle,
            ProblemKind::DanglingOutput,
            ProblemKind::MalformedReference,
            ProblemKind::DuplicateNode,
            ProblemKind::InvalidId,
            ProblemKind::UnknownSource,
        ] {
            let wire = serde_json::to_value(k).expect("serializes");
            assert_eq!(wire, k.as_str());
            assert_eq!(k.to_string(), k.as_str());
        }
    }
}
