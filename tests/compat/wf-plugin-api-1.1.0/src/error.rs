//! Errors that cross the ABI, with stable machine-readable codes.

use serde::{Deserialize, Serialize};

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
    /// Anything else.
    #[serde(other)]
    Internal,
}

impl ErrorCode {
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
    pub code: ErrorCode,
    pub message: String,
    /// Optional structured detail (e.g. an application error code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl PluginError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArguments, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unsupported, message)
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Failed, message)
    }
    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Upstream, message)
    }
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidConfig, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    pub fn cancelled() -> Self {
        Self::new(ErrorCode::Cancelled, "cancelled")
    }

    /// Encodes the error for the ABI (JSON in an `RString`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self)
            .unwrap_or_else(|_| format!(r#"{{"code":"internal","message":{:?}}}"#, self.message))
    }

    /// Decodes an error that crossed the ABI. Text that is not an encoded
    /// error becomes an `internal` error carrying that text.
    pub fn from_json(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_else(|_| Self::internal(text))
    }
}

impl From<serde_json::Error> for PluginError {
    fn from(e: serde_json::Error) -> Self {
        Self::invalid_arguments(e.to_string())
    }
}
