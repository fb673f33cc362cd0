//! `[telemetry]`: what wf exposes about itself (docs/operator-manual.md,
//! Observability).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The bearer token `/metrics` asks for (`${VAR}` allowed). Unset:
    /// `/metrics` is not served.
    #[serde(default)]
    pub metrics_token: Option<String>,
    /// Serve `/metrics` to non-loopback peers too (the token is still needed).
    #[serde(default)]
    pub metrics_remote: bool,
}
