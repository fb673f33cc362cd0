//! Errors that cross the ABI, with stable machine-readable codes.

use serde::{Deserialize, Serialize};

/// The message of the error a call fails with when its session restarted
/// (code [`ErrorCode::StateLost`] since 1.2; `upstream` before).
pub const STATE_LOST: &str = "upstream session restarted; state lost";

/// Stable error codes. New codes may be added in a minor release; hosts treat
/// unknown codes as [`ErrorCode::Internal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The arguments do not match the capability's input schema.
    InvalidArguments,
    /// No capability, resource or prompt of that name.
    NotFound,
    /// The source does not implement this operation.
    Unsupported,
    /// The capability ran and failed (e.g. `wf.std.runtime_error`, a false assert).
    Failed,
    /// An upstream (a server the source talks to) failed or is unreachable.
    Upstream,
    /// The operation ran out of time.
    Timeout,
    /// The operation was cancelled.
    Cancelled,
    /// Bad source configuration.
    InvalidConfig,
    /// The plugin panicked; the panic was caught at the ABI boundary.
    Panicked,
    /// Since 1.2: the session a call was bound to (its
    /// [`CallScope::expect_epoch`](crate::CallScope::expect_epoch)) restarted,
    /// so the state earlier calls built is gone. Never retried. A 1.0/1.1
    /// plugin says this as `upstream` with the message [`STATE_LOST`];
    /// [`PluginError::from_json`] reads that as this code.
    StateLost,
    /// Anything else.
    #[serde(other)]
    Internal,
}

impl ErrorCode {
    /// The code's wire name (`invalid_arguments`, `state_lost`…), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Failed => "failed",
            ErrorCode::Upstream => "upstream",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::InvalidConfig => "invalid_config",
            ErrorCode::Panicked => "panicked",
            ErrorCode::StateLost => "state_lost",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error every plugin operation returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct PluginError {
    /// What kind of failure (stable, machine-readable).
    pub code: ErrorCode,
    /// What happened, for a person (one line).
    pub message: String,
    /// Optional structured detail (e.g. an application error code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl PluginError {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
    /// Attaches structured detail.
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }
    /// The arguments do not match the capability's input schema.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArguments, message)
    }
    /// No capability, resource or prompt of that name.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    /// The source does not implement this operation.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unsupported, message)
    }
    /// The capability ran and failed.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Failed, message)
    }
    /// An upstream failed or is unreachable.
    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Upstream, message)
    }
    /// Bad source configuration.
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidConfig, message)
    }
    /// Anything else.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    /// The operation was cancelled.
    pub fn cancelled() -> Self {
        Self::new(ErrorCode::Cancelled, "cancelled")
    }
    /// Since 1.2: the call's session restarted; the state it relied on is gone.
    /// The message is [`STATE_LOST`].
    pub fn state_lost() -> Self {
        Self::new(ErrorCode::StateLost, STATE_LOST)
    }

    /// Encodes the error for the ABI (JSON in an `RString`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self)
            .unwrap_or_else(|_| format!(r#"{{"code":"internal","message":{:?}}}"#, self.message))
    }

    /// Decodes an error that crossed the ABI. Text that is not an encoded
    /// error becomes an `internal` error carrying that text. An answer in an
    /// older minor's words is read in today's (see [`PluginError::upgraded`]).
    pub fn from_json(text: &str) -> Self {
        serde_json::from_str::<Self>(text)
            .map(Self::upgraded)
            .unwrap_or_else(|_| Self::internal(text))
    }

    /// Reads an error in a 1.0/1.1 plugin's words as the typed code a 1.2
    /// plugin sends: `upstream` with exactly [`STATE_LOST`] as its
    /// message is [`ErrorCode::StateLost`]. This is the one place a message is
    /// compared; everything after the ABI boundary matches on codes.
    pub fn upgraded(mut self) -> Self {
        if self.code == ErrorCode::Upstream && self.message == STATE_LOST {
            self.code = ErrorCode::StateLost;
        }
        self
    }
}

impl From<serde_json::Error> for PluginError {
    fn from(e: serde_json::Error) -> Self {
        Self::invalid_arguments(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_lost_round_trips_as_its_own_code() {
        let e = PluginError::state_lost();
        let back = PluginError::from_json(&e.to_json());
        assert_eq!(back.code, ErrorCode::StateLost);
        assert_eq!(back.message, STATE_LOST);
        assert!(
            e.to_json().contains(r#""code":"state_lost""#),
            "{}",
            e.to_json()
        );
    }

    #[test]
    fn a_pre_1_2_state_lost_answer_is_read_as_the_code() {
        // How wf-plugin-api 1.1's mcp source said it (with its detail data).
        let old = r#"{"code":"upstream","message":"upstream session restarted; state lost","data":{"epoch":2}}"#;
        let e = PluginError::from_json(old);
        assert_eq!(e.code, ErrorCode::StateLost);
        assert_eq!(e.data, Some(serde_json::json!({"epoch": 2})));
    }

    #[test]
    fn only_that_exact_answer_is_upgraded() {
        for (text, code) in [
            (
                r#"{"code":"upstream","message":"connection refused"}"#,
                ErrorCode::Upstream,
            ),
            (
                r#"{"code":"failed","message":"upstream session restarted; state lost"}"#,
                ErrorCode::Failed,
            ),
            (
                r#"{"code":"upstream","message":"upstream session restarted; state lost, maybe"}"#,
                ErrorCode::Upstream,
            ),
            (r#"{"code":"brand_new","message":"x"}"#, ErrorCode::Internal),
            ("not json at all", ErrorCode::Internal),
        ] {
            assert_eq!(PluginError::from_json(text).code, code, "{text}");
        }
    }

    #[test]
    fn every_code_serializes_as_its_wire_name() {
        use ErrorCode::*;
        for code in [
            InvalidArguments,
            NotFound,
            Unsupported,
            Failed,
            Upstream,
            Timeout,
            Cancelled,
            InvalidConfig,
            Panicked,
            StateLost,
            Internal,
        ] {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::String(code.as_str().into()));
            assert_eq!(serde_json::from_value::<ErrorCode>(json).unwrap(), code);
        }
    }
}
