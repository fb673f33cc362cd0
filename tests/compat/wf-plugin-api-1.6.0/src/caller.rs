//! Since 1.2: what a source may ask of whoever made a call — the user
//! (elicitation), their model (sampling), their roots — and the log lines it
//! sends them. Crosses the ABI as JSON (`Event::AskCaller` out,
//! `SourceRequest::CallerAnswer` back: no new ABI method, see docs/abi-evolution.md);
//! the host routes it to the calling MCP client (or refuses: a workflow run
//! has nobody to ask). Params and results are MCP-shaped JSON, so fields a
//! newer MCP revision adds pass through unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One request to the caller of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CallerRequest {
    /// `elicitation/create`: `params` as MCP sends them (form mode:
    /// `message` + `requestedSchema`; URL mode: `mode: "url"`, `message`,
    /// `url`, `elicitationId`). Answer: an MCP `ElicitResult`.
    Elicit {
        /// The request's MCP params.
        params: Value,
    },
    /// `sampling/createMessage`: MCP params, tool-use fields (`tools`,
    /// `toolChoice`) included. Answer: an MCP `CreateMessageResult`.
    Sample {
        /// The request's MCP params.
        params: Value,
    },
    /// `roots/list`. Answer: an MCP `ListRootsResult`.
    ListRoots,
    /// `notifications/message` to the caller. Answer: `null`.
    Log {
        /// MCP level: debug, info, notice, warning, error, critical, alert, emergency.
        level: String,
        /// Who logged; the host prefixes the source's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        logger: Option<String>,
        /// Any JSON.
        data: Value,
    },
    /// Since 1.6 (JSON only): requests for input the caller answers together,
    /// as one round (an MCP 2026-07-28 `InputRequiredResult`'s
    /// `inputRequests`), each under the key the source gave it (e.g. its
    /// upstream's own). Each is an `Elicit`, `Sample` or `ListRoots`. The host
    /// asks a 2026-07-28 client all of them in one round under these keys
    /// (its own where a key is taken or unusable), a 2025-11-25 client with one
    /// request each. Answer: a JSON object of each key's MCP result. A host
    /// that predates it answers `unsupported`: ask one at a time then.
    Round {
        /// The requests by key (answered under the same keys).
        requests: BTreeMap<String, CallerRequest>,
    },
    /// A kind this build predates; the host answers `unsupported`.
    #[serde(other)]
    Unknown,
}

impl CallerRequest {
    /// The kind's wire name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            CallerRequest::Elicit { .. } => "elicit",
            CallerRequest::Sample { .. } => "sample",
            CallerRequest::ListRoots => "list_roots",
            CallerRequest::Log { .. } => "log",
            CallerRequest::Round { .. } => "round",
            CallerRequest::Unknown => "unknown",
        }
    }
}

/// What the user did with an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitAction {
    /// Submitted (content holds the form's values in form mode).
    Accept,
    /// Said no.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

/// The answer to an elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitAnswer {
    /// What the user did.
    pub action: ElicitAction,
    /// Form mode, accepted: the submitted values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
}

/// A client root (`roots/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_round_trip_and_unknown_kinds_decode() {
        let r = CallerRequest::Log {
            level: "info".into(),
            logger: None,
            data: json!("hi"),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v, json!({"kind": "log", "level": "info", "data": "hi"}));
        assert_eq!(serde_json::from_value::<CallerRequest>(v).unwrap(), r);
        let later: CallerRequest =
            serde_json::from_value(json!({"kind": "pick_file", "x": 1})).unwrap();
        assert_eq!(later, CallerRequest::Unknown);
    }

    #[test]
    fn a_round_carries_its_requests_by_key() {
        let r = CallerRequest::Round {
            requests: BTreeMap::from([
                ("where".to_string(), CallerRequest::ListRoots),
                (
                    "who".to_string(),
                    CallerRequest::Elicit {
                        params: json!({"message": "name?"}),
                    },
                ),
            ]),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            json!({"kind": "round", "requests": {
                "where": {"kind": "list_roots"},
                "who": {"kind": "elicit", "params": {"message": "name?"}},
            }})
        );
        assert_eq!(serde_json::from_value::<CallerRequest>(v).unwrap(), r);
    }
}
