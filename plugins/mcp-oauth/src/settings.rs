//! A source's `auth.oauth` table: how wf gets tokens for it.

use serde::{Deserialize, Serialize};

/// How tokens are obtained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    /// A person logs in once with `wf auth login` (PKCE, loopback redirect).
    #[default]
    AuthorizationCode,
    /// Machine to machine: wf asks for tokens itself with a client id/secret.
    ClientCredentials,
}

/// `auth.oauth` of an mcp `url` source. Every field is optional: with none,
/// wf discovers the authorization server and registers itself (CIMD when the
/// server supports it and `client_metadata_url` is set, else RFC 7591 DCR).
#[derive(Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthSettings {
    #[serde(default)]
    pub grant: Grant,
    /// A pre-registered client id (`${VAR}` allowed, expanded by the host).
    #[serde(default)]
    pub client_id: Option<String>,
    /// Its secret, for confidential clients.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// Scopes to ask for; empty lets the server's challenge or metadata decide.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// An HTTPS URL of a Client ID Metadata Document wf's operator hosts.
    #[serde(default)]
    pub client_metadata_url: Option<String>,
    /// The client name sent with dynamic registration.
    #[serde(default)]
    pub client_name: Option<String>,
}

impl std::fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("scopes", &self.scopes)
            .field("client_metadata_url", &self.client_metadata_url)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_never_prints_the_secret() {
        let s: OAuthSettings = serde_json::from_value(serde_json::json!({
            "grant": "client_credentials", "client_id": "id", "client_secret": "s3cret-value",
            "scopes": ["a", "b"]
        }))
        .unwrap();
        assert_eq!(s.grant, Grant::ClientCredentials);
        assert!(!format!("{s:?}").contains("s3cret-value"));
        let bad = serde_json::from_value::<OAuthSettings>(serde_json::json!({"grant": "password"}));
        assert!(bad.is_err());
    }
}
