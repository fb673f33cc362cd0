//! The adapter the MCP conformance suite drives in client mode
//! (tests/conformance): `wf-conformance-client <server-url>`, with the
//! scenario in `MCP_CONFORMANCE_SCENARIO` and its data (pre-registered
//! client id/secret) in `MCP_CONFORMANCE_CONTEXT`.
//!
//! It connects with the mcp plugin's own opener, lists tools and calls
//! `test-tool`. When the opener says `needs_login`, or a request meets a
//! 401/403 challenge, it logs in the way `wf auth login` does, playing the
//! browser by following the authorization endpoint's redirect itself, and
//! tries again: at most three authorizations (step-up retries are bounded).

use std::process::ExitCode;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use wf_mcp_oauth::{OAuthSettings, TokenFile, flow};
use wf_source_mcp::client::McpClient;
use wf_source_mcp::config::McpConfig;
use wf_source_mcp::opener::open;

/// The Client ID Metadata Document URL the suite's CIMD scenario expects.
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";
/// Any loopback redirect: the adapter reads it from the Location header.
const REDIRECT_URI: &str = "http://127.0.0.1:3000/callback";
const MAX_AUTHORIZATIONS: usize = 3;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wf-conformance-client: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: wf-conformance-client <server-url>")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let mut oauth = json!({"client_metadata_url": CIMD_URL});
    for key in ["client_id", "client_secret"] {
        if let Some(v) = context[key].as_str() {
            oauth[key] = v.into();
        }
    }
    if scenario.starts_with("auth/client-credentials") {
        oauth["grant"] = "client_credentials".into();
    }
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let settings: OAuthSettings =
        serde_json::from_value(oauth.clone()).map_err(|e| e.to_string())?;
    let mut config = McpConfig::parse(
        "conformance",
        &json!({"url": url, "auth": {"oauth": oauth}}),
    )
    .map_err(|e| e.to_string())?;
    config.token_dir = Some(dir.path().to_path_buf());
    let store = TokenFile::new(dir.path());

    let mut authorizations = 0;
    let mut challenge: Option<String> = None;
    loop {
        let attempt = session_round(&config).await;
        let next_challenge = match attempt {
            Ok(()) => return Ok(()),
            Err(Failure::NeedsLogin) => None,
            Err(Failure::Challenge(c)) => Some(c),
            Err(Failure::Other(e)) => return Err(e),
        };
        if authorizations == MAX_AUTHORIZATIONS {
            return Err(format!("gave up after {MAX_AUTHORIZATIONS} authorizations"));
        }
        authorizations += 1;
        challenge = next_challenge.or(challenge);
        login(&url, &settings, &store, challenge.clone()).await?;
    }
}

enum Failure {
    NeedsLogin,
    Challenge(String),
    Other(String),
}

async fn session_round(config: &McpConfig) -> Result<(), Failure> {
    let session = match open("conformance", config, McpClient::new(None)).await {
        Ok(s) => s,
        Err(e) if e.message.starts_with(wf_source_mcp::oauth::NEEDS_LOGIN) => {
            return Err(Failure::NeedsLogin);
        }
        Err(e) => return Err(Failure::Other(e.to_string())),
    };
    let failed = |e: rmcp::ServiceError| match e.auth_challenge() {
        Some(c) => Failure::Challenge(c.to_string()),
        None => Failure::Other(e.to_string()),
    };
    let tools = session.list_all_tools().await.map_err(failed)?;
    eprintln!(
        "tools: {:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    if tools.iter().any(|t| t.name == "test-tool") {
        let mut params = CallToolRequestParams::new("test-tool");
        params.arguments = Some(Default::default());
        session.call_tool(params).await.map_err(failed)?;
    }
    let _ = session.cancel().await;
    Ok(())
}

async fn login(
    url: &str,
    settings: &OAuthSettings,
    store: &TokenFile,
    challenge: Option<String>,
) -> Result<(), String> {
    if flow::is_machine(settings) {
        flow::client_credentials(url, settings, store)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    let pending = flow::begin_login(url, settings, store, REDIRECT_URI, challenge)
        .await
        .map_err(|e| e.to_string())?;
    let callback = wf_mcp_oauth::follow_authorization_redirect(pending.authorization_url())
        .await
        .map_err(|e| e.to_string())?;
    pending
        .finish(&callback, store)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}
