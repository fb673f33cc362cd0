//! One call of an operation: check the arguments, build the request, send it
//! with the source's credentials, and turn the response into a tool result.

use base64::Engine as _;
use serde_json::{Value, json};
use wf_plugin_api::prelude::*;

use crate::api::{Operation, is_json};
use crate::auth::{self, TokenCache};
use crate::check;
use crate::http::{Body, Client, error_text, read_bounded};
use crate::settings::Settings;
use crate::{multipart, serialize};

/// The most of an error body a tool error quotes.
const ERROR_BODY_CHARS: usize = 2_000;

pub struct Call<'a> {
    pub source: &'a str,
    pub settings: &'a Settings,
    pub client: &'a Client,
    pub tokens: &'a TokenCache,
    pub base: &'a url::Url,
}

/// What an exchange gave: status, content type, `Location`, body.
type Exchanged = (reqwest::StatusCode, String, Option<String>, Body);

/// Aborts the exchange's task when the call ends or is dropped first.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why an exchange failed before a status was read.
enum Failure {
    Send(String),
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
        let mut url = match &op.base {
            None => self.base.clone(),
            Some(Ok(base)) => base.clone(),
            Some(Err(e)) => {
                return Err(PluginError::invalid_config(format!(
                    "sources.{}: {}: {e}",
                    self.source, op.name
                )));
            }
        };
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
            .headers(self.settings.header_map.clone())
            .timeout(self.settings.timeout);
        // What the tool can check first (api.rs, `accept`), unless the
        // operator's `headers` say otherwise.
        if !self
            .settings
            .header_map
            .contains_key(reqwest::header::ACCEPT)
        {
            request = request.header(reqwest::header::ACCEPT, op.accept.as_str());
        }
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
            } else if media.starts_with("multipart/form-data") {
                let form = match multipart::build(v, &body.files) {
                    Ok(form) => form,
                    Err(e) => {
                        return Ok(CallResult::error(format!(
                            "invalid arguments for {}: $.{}: {e}",
                            op.name, body.arg
                        )));
                    }
                };
                request
                    .header(reqwest::header::CONTENT_TYPE, form.content_type)
                    .body(form.body)
            } else if body.binary {
                let Some(bytes) = v
                    .as_str()
                    .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
                else {
                    return Ok(CallResult::error(format!(
                        "invalid arguments for {}: $.{}: the {media} body must be base64 text",
                        op.name, body.arg
                    )));
                };
                request
                    .header(reqwest::header::CONTENT_TYPE, media)
                    .body(bytes)
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
        // Only operations that need credentials get them (api.rs, `Security`).
        // A token endpoint that refuses is a tool error the model reads, like
        // the API's own refusal.
        if op.credentials {
            request = match auth::apply(
                &self.settings.auth,
                self.tokens,
                self.client,
                request,
                &mut parts.query,
            )
            .await
            {
                Ok(request) => request,
                Err(e) => {
                    return Ok(CallResult::error(redact(
                        &format!("{}: {e}", self.source),
                        &self.settings.auth.secrets(),
                    )));
                }
            };
        }
        // The query is written once, encoded by serialize (reqwest's own
        // `query()` would encode it again).
        let mut request = request
            .build()
            .map_err(|e| PluginError::internal(error_text(e)))?;
        auth::append_query(request.url_mut(), &parts.query);
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
        let timeout = self.settings.timeout;
        // Plain HTTP goes on this thread (fast.rs); a cancelled call drops
        // it, which closes its connection. An API that cannot be reached,
        // hangs or breaks off is a tool error the model reads (and may
        // retry), like an error status.
        let direct = async {
            if !self.client.direct_allowed {
                return None;
            }
            let reading = || {
                if progress {
                    ctx.progress(1.0, Some(2.0), Some("reading the response"));
                }
            };
            self.client
                .direct
                .exchange(&request, limit, timeout, reading)
                .await
        };
        let direct = tokio::select! {
            r = direct => r,
            _ = ctx.cancelled() => return Err(PluginError::cancelled()),
        };
        let (status, mime, location, body) = match direct {
            Some(Ok(a)) => (a.status, a.mime, a.location, a.body),
            Some(Err(reason)) => {
                return Ok(CallResult::error(self.failure(&what, reason).message));
            }
            None => match self.through_reqwest(request, progress, ctx, &what).await {
                Ok(exchanged) => exchanged,
                Err(done) => return done,
            },
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
        Ok(result(self.source, op, &what, &url, &mime, bytes))
    }

    /// HTTPS, a proxy, a redirect: reqwest, its exchange run as a task on
    /// the plugin's runtime beside reqwest's connection task (the request
    /// and its answer meet on one thread; only the finished exchange
    /// crosses back to the host's).
    async fn through_reqwest(
        &self,
        request: reqwest::Request,
        progress: bool,
        ctx: &CallContext,
        what: &str,
    ) -> Result<Exchanged, Result<CallResult, PluginError>> {
        let limit = self.settings.max_response_bytes;
        let timeout = self.settings.timeout;
        let client = self.client.inner.clone();
        let reporter = progress.then(|| ctx.clone());
        // The exchange runs as a task on the plugin's runtime, beside
        // reqwest's connection task: the request and its answer then meet on
        // one thread, and only the finished exchange crosses back to the
        // host's (polled from the host's thread, each step crossed threads).
        let exchange = tokio::spawn(async move {
            let response = client
                .execute(request)
                .await
                .map_err(|e| Failure::Send(error_text(e)))?;
            if let Some(ctx) = &reporter {
                ctx.progress(1.0, Some(2.0), Some("reading the response"));
            }
            let status = response.status();
            let header = |name| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                    .map(str::to_string)
            };
            let mime = header(reqwest::header::CONTENT_TYPE).unwrap_or_default();
            let location = header(reqwest::header::LOCATION);
            let body = tokio::time::timeout(timeout, read_bounded(response, limit))
                .await
                .map_err(|_| Failure::Send("timed out reading the body".into()))?
                .map_err(|e| Failure::Send(e.to_string()))?;
            Ok::<_, Failure>((status, mime, location, body))
        });
        // A cancelled call aborts the task: reqwest closes the connection.
        let _abort = AbortOnDrop(exchange.abort_handle());
        tokio::select! {
            r = exchange => match r {
                Ok(Ok(exchange)) => Ok(exchange),
                Ok(Err(Failure::Send(reason))) => {
                    Err(Ok(CallResult::error(self.failure(what, reason).message)))
                }
                Err(e) => Err(Err(PluginError::internal(format!("{}: {what}: {e}", self.source)))),
            },
            _ = ctx.cancelled() => Err(Err(PluginError::cancelled())),
        }
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
    check::problems_in(&op.input_schema, &op.defs, arguments, "$")
}

/// The first characters of an answer, for an error.
fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text.chars().take(ERROR_BODY_CHARS).collect();
    if out.len() < text.len() {
        out.push_str(" …(cut)");
    }
    out
}

fn result(
    source: &str,
    op: &Operation,
    what: &str,
    url: &url::Url,
    mime: &str,
    bytes: Vec<u8>,
) -> CallResult {
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
        return match &op.output_schema {
            Some(schema) => checked(source, op, what, schema, v),
            // MCP's structured content is an object; other JSON goes as
            // text (a workflow node still reads it as JSON).
            None if v.is_object() => CallResult::structured(v),
            None => CallResult::text(v.to_string()),
        };
    }
    // A tool that lists an output schema promises structured content: an
    // answer that is not JSON (Petstore's XML, an HTML error page) says
    // what came back instead of failing the client's check (issue #55).
    if op.output_schema.is_some() {
        let kind = if base.is_empty() {
            "no Content-Type"
        } else {
            base.as_str()
        };
        let allowed = op.declared.iter().any(|m| {
            m.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case(&base)
        });
        let why = if json_body {
            format!("{what}: the API answered {kind} that is not valid JSON")
        } else if allowed {
            format!(
                "{what}: the API answered {kind} (a type its document allows), not the JSON this tool returns \
                 (asked with Accept: {}); set headers = {{Accept = \"application/json\"}} if the API ignores the weights",
                op.accept
            )
        } else {
            format!(
                "{what}: the API answered {kind}, which its document does not declare for this operation ({}), not JSON",
                op.declared.join(", ")
            )
        };
        let mut r = CallResult::error(format!("{why}. The answer: {}", shown(&bytes)));
        r.meta = Some(json!({"contentType": kind}));
        return r;
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

/// A JSON answer of an operation whose document gives its schema, checked
/// against it: under `strict_responses` a departure is a tool error naming
/// the field; by default the answer is passed through (the first departure
/// of each operation logged as a warning, each noted in the result's
/// `_meta`), since a listed schema it might not match is not listed.
fn checked(source: &str, op: &Operation, what: &str, schema: &Value, v: Value) -> CallResult {
    // An answer that is not the object the document promises is checked
    // as it came (`$: expected object, got array`), and wrapped to be
    // structured content all the same.
    let problems = if op.wrapped {
        check::problems_in(schema, &op.defs, &json!({"result": &v}), "$")
    } else {
        check::problems_in(schema, &op.defs, &v, "$")
    };
    let answer = if op.wrapped || !v.is_object() {
        json!({"result": v})
    } else {
        v
    };
    if problems.is_empty() {
        return CallResult::structured(answer);
    }
    let more = problems.len().saturating_sub(3);
    let mut listed = problems[..problems.len().min(3)].join("; ");
    if more > 0 {
        listed.push_str(&format!(" (and {more} more)"));
    }
    if op.strict {
        return CallResult::error(format!(
            "{what}: the answer does not match the document's response schema (strict_responses): {listed}"
        ));
    }
    if !op.drift_seen() {
        tracing::warn!(
            source,
            operation = %op.name,
            "{what}: the answer departs from the document's response schema (passed through; strict_responses = true makes this an error): {listed}"
        );
    }
    let mut r = CallResult::structured(answer);
    r.meta = Some(json!({"drift": problems}));
    r
}
