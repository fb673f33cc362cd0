//! One call of an operation: check the arguments, build the request, send it
//! with the source's credentials, and turn the response into a tool result.

use base64::Engine as _;
use serde_json::{Value, json};
use wf_plugin_api::prelude::*;

use crate::api::{Operation, is_json};
use crate::auth::{self, TokenCache};
use crate::http::{Body, Client, error_text, header_map, read_bounded};
use crate::serialize;
use crate::settings::Settings;

/// The most of an error body a tool error quotes.
const ERROR_BODY_CHARS: usize = 2_000;

pub struct Call<'a> {
    pub source: &'a str,
    pub settings: &'a Settings,
    pub client: &'a Client,
    pub tokens: &'a TokenCache,
    pub base: &'a url::Url,
}

/// Replaces every secret in `text` with `[REDACTED]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(s.as_str(), "[REDACTED]");
    }
    out
}

impl Call<'_> {
    pub async fn run(
        &self,
        op: &Operation,
        arguments: Value,
        ctx: &CallContext,
    ) -> Result<CallResult, PluginError> {
        let problems = argument_problems(op, &arguments);
        if !problems.is_empty() {
            return Ok(CallResult::error(format!(
                "invalid arguments for {}: {}",
                op.name,
                problems.join("; ")
            )));
        }
        let empty = serde_json::Map::new();
        let args = arguments.as_object().unwrap_or(&empty);
        let mut url = self.base.clone();
        let path = serialize::fill_path(&op.path, &op.params, args);
        let joined = format!("{}{}", url.path().trim_end_matches('/'), path);
        url.set_path(&joined);
        let mut parts = serialize::parts(&op.params, args);
        let method = reqwest::Method::from_bytes(op.method.as_bytes())
            .map_err(|e| PluginError::internal(e.to_string()))?;
        let mut request = self
            .client
            .inner
            .request(method, url.clone())
            .headers(header_map(&self.settings.headers))
            .timeout(self.settings.timeout);
        for (name, value) in &parts.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if !parts.cookies.is_empty() {
            request = request.header(reqwest::header::COOKIE, parts.cookies.join("; "));
        }
        if let Some(body) = &op.body
            && let Some(v) = args.get(&body.arg)
        {
            let media = body.media.as_str();
            request = if is_json(media) {
                let media = if media == "*/*" {
                    "application/json"
                } else {
                    media
                };
                request
                    .header(reqwest::header::CONTENT_TYPE, media)
                    .body(v.to_string())
            } else if media.starts_with("application/x-www-form-urlencoded") {
                request
                    .header(reqwest::header::CONTENT_TYPE, media)
                    .body(serialize::form_body(v))
            } else {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                request
                    .header(reqwest::header::CONTENT_TYPE, media)
                    .body(text)
            };
        }
        request = auth::apply(
            &self.settings.auth,
            self.tokens,
            self.client,
            request,
            &mut parts.query,
        )
        .await
        .map_err(|e| PluginError::upstream(format!("{}: {e}", self.source)))?;
        // The query is written once, encoded by serialize (reqwest's own
        // `query()` would encode it again).
        let mut request = request
            .build()
            .map_err(|e| PluginError::internal(error_text(e)))?;
        if !parts.query.is_empty() {
            let existing = request.url().query().map(str::to_string);
            let q = existing
                .into_iter()
                .chain(parts.query.iter().cloned())
                .collect::<Vec<_>>()
                .join("&");
            request.url_mut().set_query(Some(&q));
        }
        let what = format!("{} {}", op.method, op.path);
        // Reported only to a client that asked (a `progressToken`): each
        // report crosses to the host, which costs more than a fast request.
        let progress = ctx
            .info()
            .get("meta")
            .and_then(|m| m.get("progressToken"))
            .is_some();
        if progress {
            ctx.progress(0.0, Some(2.0), Some(&format!("sending {what}")));
        }
        let limit = self.settings.max_response_bytes;
        let exchange = async {
            let response = self
                .client
                .inner
                .execute(request)
                .await
                .map_err(|e| self.failure(&what, error_text(e)))?;
            if progress {
                ctx.progress(1.0, Some(2.0), Some("reading the response"));
            }
            let status = response.status();
            let mime = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = tokio::time::timeout(self.settings.timeout, read_bounded(response, limit))
                .await
                .map_err(|_| self.failure(&what, "timed out reading the body".into()))?
                .map_err(|e| self.failure(&what, e.to_string()))?;
            Ok::<_, PluginError>((status, mime, location, body))
        };
        // A cancelled call drops the exchange: reqwest closes the connection.
        // An API that cannot be reached, hangs or breaks off is a tool error
        // the model reads (and may retry), like an error status.
        let (status, mime, location, body) = tokio::select! {
            r = exchange => match r {
                Ok(exchange) => exchange,
                Err(e) => return Ok(CallResult::error(e.message)),
            },
            _ = ctx.cancelled() => return Err(PluginError::cancelled()),
        };
        let secrets = self.settings.auth.secrets();
        if !status.is_success() {
            let text = match &body {
                Body::Whole(b) => String::from_utf8_lossy(b).into_owned(),
                Body::Cut { head, .. } => String::from_utf8_lossy(head).into_owned(),
            };
            let mut shown: String = text.chars().take(ERROR_BODY_CHARS).collect();
            if shown.len() < text.len() {
                shown.push_str(" …(cut)");
            }
            if status.is_redirection() {
                let to = location.as_deref().unwrap_or("?");
                return Ok(CallResult::error(redact(
                    &format!(
                        "{what}: HTTP {status}: a redirect to {to} was not followed \
                         (wf follows redirects only within the API's own origin, so credentials never reach another host)"
                    ),
                    &secrets,
                )));
            }
            if status.as_u16() == 401 {
                self.tokens.clear().await;
            }
            let mut result =
                CallResult::error(redact(&format!("{what}: HTTP {status}: {shown}"), &secrets));
            result.meta = Some(json!({"status": status.as_u16()}));
            return Ok(result);
        }
        let bytes = match body {
            Body::Whole(b) => b,
            Body::Cut { seen, .. } => {
                return Ok(CallResult::error(format!(
                    "{what}: the response is over max_response_bytes ({limit} bytes; {seen} or more were sent); \
                     narrow the request or raise max_response_bytes"
                )));
            }
        };
        Ok(result(op, &url, &mime, bytes))
    }

    fn failure(&self, what: &str, reason: String) -> PluginError {
        let reason = redact(&reason, &self.settings.auth.secrets());
        if reason.contains("timed out") {
            PluginError::new(
                ErrorCode::Timeout,
                format!(
                    "{}: {what}: {reason} (timeout_ms {})",
                    self.source,
                    self.settings.timeout.as_millis()
                ),
            )
        } else {
            PluginError::upstream(format!("{}: {what}: {reason}", self.source))
        }
    }
}

/// What is wrong with a call's arguments, checked against its input schema.
pub fn argument_problems(op: &Operation, arguments: &Value) -> Vec<String> {
    if !arguments.is_object() {
        return vec!["arguments must be a JSON object".into()];
    }
    wf_plugin_api::schema::instance_problems(&op.input_schema, arguments, "$")
}

fn result(op: &Operation, url: &url::Url, mime: &str, bytes: Vec<u8>) -> CallResult {
    let base = mime
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json_body = base == "application/json" || base.ends_with("+json");
    if bytes.is_empty() {
        return match &op.output_schema {
            Some(_) => CallResult::structured(json!({})),
            None => CallResult::text(""),
        };
    }
    if json_body && let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
        // MCP's structured content is an object; other JSON goes as text
        // (a workflow node still reads it as JSON).
        return if v.is_object() {
            CallResult::structured(v)
        } else {
            CallResult::text(v.to_string())
        };
    }
    let texty = base.starts_with("text/")
        || json_body
        || base.ends_with("+xml")
        || matches!(
            base.as_str(),
            "application/xml" | "application/yaml" | "application/javascript" | ""
        );
    match (texty, String::from_utf8(bytes)) {
        (true, Ok(text)) => CallResult::text(text),
        (_, Ok(text)) if base.is_empty() => CallResult::text(text),
        (_, result) => {
            let bytes = match result {
                Ok(text) => text.into_bytes(),
                Err(e) => e.into_bytes(),
            };
            let blob = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let mime = if base.is_empty() {
                "application/octet-stream".to_string()
            } else {
                base
            };
            CallResult {
                content: vec![json!({
                    "type": "resource",
                    "resource": {"uri": url.as_str(), "mimeType": mime, "blob": blob},
                })],
                ..CallResult::default()
            }
        }
    }
}
