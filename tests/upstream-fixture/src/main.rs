//! A stateful MCP server for tests and benchmarks: a counter that lives as
//! long as the session, a slow tool, a tool that reports progress, a tool
//! that kills the process, a resource and a prompt.
//!
//! The prompt's `name` argument completes (`completion/complete`) from
//! alice/albert/bob, and `fixture://counter` is subscribable: `increment`
//! sends `notifications/resources/updated` for it while subscribed;
//! `{"event":"subscribe"|"unsubscribe","uri":..}` is recorded for each.
//!
//! With `--probes`, more tools for the hardening tests: `env` (its
//! environment), `big` (a result of N bytes), `garbage_line` (N bytes of
//! non-JSON on stdout, stdio only) and `stderr_bomb_status` (how
//! much of `--stderr-bomb BYTES` — that many bytes of stderr without a
//! newline, written in the background while it serves — is out).
//!
//! With `--asks`, tools that ask the client back mid-call: `ask` (`kind`:
//! `elicit`, `url`, `sample` or `roots`, after the file `until` exists if
//! given) records `{"event":"asked","kind":..,"ok":..,"answer"|"error":..}` and
//! returns the answer; `log` sends a `notifications/message` during the call;
//! `echo_header` returns its `message`, whose schema has `x-mcp-header: Message`
//! (SEP-2243: a 2026-07-28 client sends it as the `Mcp-Param-Message` header too).
//! To a 2026-07-28 client, `ask` answers in rounds instead (`InputRequiredResult`,
//! then the retry's `inputResponses`), recording `"round": true`. `confirm`
//! is listed and served only to 2026-07-28 clients: it asks its question in a
//! round (as `ask` with `kind: elicit`), logs `confirmed` (warning, logger
//! `fixture`) on the retry's request, and returns the answer.
//!
//! With `--tasks`, it serves MCP Tasks (SEP-2663, the `io.modelcontextprotocol/tasks`
//! extension): `job` (`ms`, `text`) waits `ms` milliseconds and returns `text`; to a
//! client that declared the extension it answers with a task at once, served by
//! `tasks/get` and `tasks/cancel` (rmcp's `TaskManager`), and records
//! `{"event":"task_created"|"task_cancelled","task_id":..}`. With `ask: true`
//! the task first asks the client for a name (`input_required`, input key
//! `name`), answered by `tasks/update` (recorded as `task_input`).
//!
//! `wf-fixture-upstream [--http ADDR] [--start-delay-ms N] [--probes] [--asks] [--tasks] [--stderr-bomb BYTES]
//! [--events PATH]`: stdio by default. With `--events`, it appends one JSON line per event a
//! test must observe from outside: `{"event":"call","tool":"slow","request_id":..}` when a
//! slow call starts, `{"event":"cancelled","request_id":..,"reason":..}` when a
//! `notifications/cancelled` arrives, `{"event":"slow_done",..}` /
//! `{"event":"slow_aborted",..}` when a slow call ends, `{"event":"roots_list_changed"}`
//! when the client says its roots changed, (over HTTP) `{"event":"http","method":..,"uri":..}`
//! for each request, and `{"event":"trace",..}` for each call that carries a W3C `traceparent`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::*;
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// Bytes of `--stderr-bomb` written so far, and the total asked for.
static BOMB_WRITTEN: AtomicU64 = AtomicU64::new(0);
static BOMB_TOTAL: AtomicU64 = AtomicU64::new(0);

/// Writes `total` bytes of `x` to stderr, never a newline.
fn stderr_bomb(total: u64) {
    BOMB_TOTAL.store(total, Ordering::SeqCst);
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        let mut err = std::io::stderr().lock();
        let mut left = total;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            if err.write_all(&chunk[..n]).is_err() {
                return;
            }
            left -= n as u64;
            BOMB_WRITTEN.fetch_add(n as u64, Ordering::SeqCst);
        }
    });
}

/// `n` bytes of text that show where they were cut: `0123456789` repeated.
fn pattern(n: usize) -> String {
    (0..n).map(|i| (b'0' + (i % 10) as u8) as char).collect()
}

/// `--events PATH`: where [`record`] appends its JSON lines.
static EVENTS: OnceLock<PathBuf> = OnceLock::new();

/// Appends one event line (with this process's id) to the `--events` file, if any.
/// One `write_all` of a whole line on an O_APPEND file: lines never interleave.
fn record(mut event: Value) {
    let Some(path) = EVENTS.get() else { return };
    event["pid"] = json!(std::process::id());
    let line = format!("{event}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("fixture: cannot write {}: {e}", path.display());
    }
}

/// Records each HTTP request's method and URI (path and query) with `--events`.
async fn record_request(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    record(
        json!({"event": "http", "method": request.method().as_str(), "uri": request.uri().to_string()}),
    );
    next.run(request).await
}

/// A traced call (W3C `traceparent` in `_meta`) is recorded with what came
/// in `_meta` and, over HTTP, in the header:
/// `{"event":"trace","tool":..,"meta":..,"header":..}`.
fn record_trace(tool: &str, context: &RequestContext<RoleServer>) {
    let Some(meta) = context.meta.get_traceparent() else {
        return;
    };
    let header = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.headers.get("traceparent"))
        .and_then(|v| v.to_str().ok());
    record(json!({"event": "trace", "tool": tool, "meta": meta, "header": header}));
}

/// `ask` for a 2026-07-28 client: the first request gets an
/// `InputRequiredResult` with the request under key `q` (state `fixture-state`);
/// the retry's `inputResponses["q"]` is recorded like an answer and returned.
fn ask_in_rounds(
    context: &RequestContext<RoleServer>,
    kind: &str,
    request: &CallToolRequestParams,
) -> CallToolResponse {
    let answer = request.input_responses.as_ref().and_then(|r| r.get("q"));
    let Some(answer) = answer else {
        record(
            json!({"event": "call", "tool": "ask", "kind": kind, "request_id": json!(context.id), "round": true}),
        );
        let input: InputRequest = serde_json::from_value(ask_request(kind)).expect("request");
        let requests = InputRequests::from([("q".to_string(), input)]);
        return InputRequiredResult::new(Some(requests), Some("fixture-state".into())).into();
    };
    let state = request.request_state.clone();
    let out = json!({"ok": true, "answer": answer, "state": state});
    record(
        json!({"event": "asked", "kind": kind, "round": true, "ok": true, "answer": answer, "state": out["state"]}),
    );
    structured(out).into()
}

#[derive(Clone, Default)]
struct Fixture {
    /// One counter per server instance: per process over stdio, per session over HTTP.
    count: Arc<AtomicI64>,
    /// Whether the probe tools are listed and served.
    probes: bool,
    /// Resource URIs the client subscribed to.
    subscribed: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// Whether the tools that ask the client back are listed and served.
    asks: bool,
    /// With `--tasks`: `job` and the tasks it runs (shared by every session).
    tasks: Option<Arc<rmcp::task_manager::TaskManager>>,
}

/// The request `ask` sends its client for `kind`.
fn ask_request(kind: &str) -> Value {
    match kind {
        "elicit" => json!({"method": "elicitation/create", "params": {
            "message": "fixture asks your name",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        }}),
        "url" => json!({"method": "elicitation/create", "params": {
            "mode": "url", "message": "open this", "url": "https://example.com/fixture", "elicitationId": "fx-1",
        }}),
        "sample" => json!({"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "fixture prompt"}}],
            "maxTokens": 10,
        }}),
        _ => json!({"method": "roots/list"}),
    }
}

/// Sends `kind`'s request to the client; records and returns what came back.
async fn ask(context: &RequestContext<RoleServer>, kind: &str, until: Option<PathBuf>) -> Value {
    record(json!({"event": "call", "tool": "ask", "kind": kind, "request_id": json!(context.id)}));
    if let Some(path) = until {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let request: ServerRequest = serde_json::from_value(ask_request(kind)).expect("request");
    let out = match context.peer.send_request(request).await {
        Ok(answer) => json!({"ok": true, "answer": answer}),
        Err(rmcp::service::ServiceError::McpError(e)) => {
            json!({"ok": false, "error": {"code": e.code.0, "message": e.message}})
        }
        Err(e) => json!({"ok": false, "error": {"message": e.to_string()}}),
    };
    let mut event = json!({"event": "asked", "kind": kind});
    if let (Some(e), Some(o)) = (event.as_object_mut(), out.as_object()) {
        e.extend(o.clone());
    }
    record(event);
    out
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    serde_json::from_value(json!({"name": name, "description": description, "inputSchema": schema}))
        .expect("tool")
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn structured(v: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(v.to_string())]);
    r.structured_content = Some(v);
    r
}

fn int_arg(args: &Option<JsonObject>, key: &str, default: i64) -> i64 {
    args.as_ref()
        .and_then(|a| a.get(key))
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)] // logging: 2025-11-25 clients still have it
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            .build();
        let mut caps = caps;
        if self.tasks.is_some() {
            caps.extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_string(), JsonObject::new());
        }
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("wf-fixture-upstream", "0.0.0"))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let mut tools = vec![
            tool(
                "echo",
                "Returns its message",
                obj(json!({"message": {"type": "string"}}), &["message"]),
            ),
            tool(
                "increment",
                "Adds `by` (default 1) to the session's counter",
                obj(json!({"by": {"type": "integer"}}), &[]),
            ),
            tool("get_count", "The session's counter", obj(json!({}), &[])),
            tool(
                "slow",
                "Sleeps `ms` milliseconds, or until the file `until` exists",
                obj(
                    json!({"ms": {"type": "integer"}, "until": {"type": "string"}}),
                    &["ms"],
                ),
            ),
            tool(
                "progress",
                "Reports `steps` progress notifications",
                obj(
                    json!({"steps": {"type": "integer"}, "interval_ms": {"type": "integer"}}),
                    &[],
                ),
            ),
            tool(
                "crash",
                "Exits the server process at once",
                obj(json!({}), &[]),
            ),
            tool("pid", "The server's process id", obj(json!({}), &[])),
        ];
        if self.asks {
            tools.extend([
                tool(
                    "ask",
                    "Asks the client (elicit, url, sample or roots) after the file `until` exists",
                    obj(
                        json!({"kind": {"type": "string"}, "until": {"type": "string"}}),
                        &["kind"],
                    ),
                ),
                tool(
                    "log",
                    "Sends a log message at `level` during the call",
                    obj(
                        json!({"level": {"type": "string"}, "text": {"type": "string"}}),
                        &["text"],
                    ),
                ),
                tool(
                    "echo_header",
                    "Returns its message, which is also an Mcp-Param-Message header",
                    obj(
                        json!({"message": {"type": "string", "x-mcp-header": "Message"}}),
                        &["message"],
                    ),
                ),
            ]);
            if modern {
                tools.push(tool(
                    "confirm",
                    "Asks its question in an input-required round (2026-07-28 clients only)",
                    obj(json!({}), &[]),
                ));
            }
        }
        if self.tasks.is_some() {
            tools.push(tool(
                "job",
                "Waits `ms` milliseconds, then returns `text`; a task for a client that declared MCP Tasks (with `ask`, the task first asks the client for a name)",
                obj(
                    json!({"ms": {"type": "integer"}, "text": {"type": "string"}, "ask": {"type": "boolean"}}),
                    &[],
                ),
            ));
        }
        if !self.probes {
            return Ok(ListToolsResult::with_all_items(tools));
        }
        tools.extend([
            tool(
                "env",
                "The server's environment, as an object",
                obj(json!({}), &[]),
            ),
            tool(
                "big",
                "A text result of `bytes` bytes (0123456789 repeated)",
                obj(json!({"bytes": {"type": "integer"}}), &["bytes"]),
            ),
            tool(
                "garbage_line",
                "Writes a line of `bytes` bytes that is not JSON to stdout, then answers",
                obj(json!({"bytes": {"type": "integer"}}), &["bytes"]),
            ),
            tool(
                "stderr_bomb_status",
                "How much of --stderr-bomb was written",
                obj(json!({}), &[]),
            ),
        ]);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = &request.arguments;
        record_trace(&request.name, &context);
        let result = match &*request.name {
            "echo" => {
                let msg = args
                    .as_ref()
                    .and_then(|a| a.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                CallToolResult::success(vec![ContentBlock::text(msg)])
            }
            "increment" => {
                let by = int_arg(args, "by", 1);
                let count = self.count.fetch_add(by, Ordering::SeqCst) + by;
                let watched = self
                    .subscribed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains("fixture://counter");
                if watched {
                    let _ = context
                        .peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(
                            "fixture://counter",
                        ))
                        .await;
                }
                structured(json!({"count": count}))
            }
            "get_count" => structured(json!({"count": self.count.load(Ordering::SeqCst)})),
            "slow" => {
                let ms = int_arg(args, "ms", 0).max(0) as u64;
                let until = args
                    .as_ref()
                    .and_then(|a| a.get("until"))
                    .and_then(Value::as_str)
                    .map(PathBuf::from);
                let id = json!(context.id);
                record(json!({"event": "call", "tool": "slow", "request_id": id}));
                // A gate a test opens by creating the file: an event, not a duration.
                let gate = async {
                    match until {
                        Some(path) => {
                            while !path.exists() {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = gate => {
                        record(json!({"event": "slow_done", "request_id": id}));
                        structured(json!({"gate": "open"}))
                    }
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                        record(json!({"event": "slow_done", "request_id": id}));
                        structured(json!({"slept_ms": ms}))
                    }
                    _ = context.ct.cancelled() => {
                        record(json!({"event": "slow_aborted", "request_id": id}));
                        return Err(ErrorData::internal_error("cancelled", None));
                    }
                }
            }
            "progress" => {
                let steps = int_arg(args, "steps", 3).max(0);
                let interval = int_arg(args, "interval_ms", 10).max(0) as u64;
                if let Some(token) = context.meta.get_progress_token() {
                    for i in 1..=steps {
                        let p = ProgressNotificationParam::new(token.clone(), i as f64)
                            .with_total(steps as f64)
                            .with_message(format!("step {i}"));
                        let _ = context.peer.notify_progress(p).await;
                        tokio::time::sleep(Duration::from_millis(interval)).await;
                    }
                }
                structured(json!({"steps": steps}))
            }
            "ask" | "log" | "echo_header" | "confirm" if !self.asks => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {} (start with --asks)", request.name),
                    None,
                ));
            }
            "job" if self.tasks.is_some() => {
                let ms = u64::try_from(int_arg(args, "ms", 0)).unwrap_or(0);
                let text = args
                    .as_ref()
                    .and_then(|a| a.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or("done")
                    .to_string();
                let wants_task = context
                    .client_capabilities()
                    .is_some_and(|c| c.supports_tasks());
                let asks = args
                    .as_ref()
                    .and_then(|a| a.get("ask"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if let (true, Some(tasks)) = (wants_task, &self.tasks) {
                    return Ok(start_job(tasks, ms, text, asks).into());
                }
                tokio::time::sleep(Duration::from_millis(ms)).await;
                structured(json!({"text": text}))
            }
            "confirm" => {
                let modern = context
                    .protocol_version()
                    .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
                if !modern {
                    return Err(ErrorData::invalid_params(
                        "unknown tool confirm (2026-07-28 clients only)",
                        None,
                    ));
                }
                if request.input_responses.is_some() {
                    // A log line after the round, on the retry's own request.
                    let note: ServerNotification = serde_json::from_value(json!({
                        "method": "notifications/message",
                        "params": {"level": "warning", "logger": "fixture", "data": "confirmed"},
                    }))
                    .expect("notification");
                    let _ = context.peer.send_notification(note).await;
                }
                return Ok(ask_in_rounds(&context, "elicit", &request));
            }
            "echo_header" => {
                let msg = args
                    .as_ref()
                    .and_then(|a| a.get("message"))
                    .and_then(Value::as_str);
                CallToolResult::success(vec![ContentBlock::text(msg.unwrap_or(""))])
            }
            "ask" => {
                let arg = |k: &str| {
                    args.as_ref()
                        .and_then(|a| a.get(k))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                let kind = arg("kind").unwrap_or_default();
                let modern = context
                    .protocol_version()
                    .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
                if modern {
                    // 2026-07-28: no request to the client; an input-required round.
                    return Ok(ask_in_rounds(&context, &kind, &request));
                }
                structured(ask(&context, &kind, arg("until").map(PathBuf::from)).await)
            }
            "log" => {
                let arg = |k: &str| args.as_ref().and_then(|a| a.get(k)).cloned();
                let level = arg("level").unwrap_or(json!("info"));
                let text = arg("text").unwrap_or(json!(""));
                let note: ServerNotification = serde_json::from_value(json!({
                    "method": "notifications/message",
                    "params": {"level": level, "logger": "fixture", "data": text},
                }))
                .expect("notification");
                let _ = context.peer.send_notification(note).await;
                structured(json!({"logged": true}))
            }
            "crash" => std::process::exit(3),
            "pid" => structured(json!({"pid": std::process::id()})),
            "env" | "big" | "garbage_line" | "stderr_bomb_status" if !self.probes => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {} (start with --probes)", request.name),
                    None,
                ));
            }
            "env" => structured(Value::Object(
                std::env::vars()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect(),
            )),
            "big" => {
                let n = int_arg(args, "bytes", 0).max(0) as usize;
                CallToolResult::success(vec![ContentBlock::text(pattern(n))])
            }
            "garbage_line" => {
                // Straight to fd 1, ahead of the reply rmcp writes once we return.
                use std::io::Write;
                let n = int_arg(args, "bytes", 0).max(0) as usize;
                let mut line = vec![b'z'; n];
                line.push(b'\n');
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&line).and_then(|()| out.flush());
                structured(json!({"written": n}))
            }
            "stderr_bomb_status" => {
                let (written, total) = (
                    BOMB_WRITTEN.load(Ordering::SeqCst),
                    BOMB_TOTAL.load(Ordering::SeqCst),
                );
                structured(json!({"written": written, "total": total, "done": written == total}))
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let tasks = self.tasks.as_ref().ok_or_else(no_tasks)?;
        Ok(GetTaskResult::new(tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let tasks = self.tasks.as_ref().ok_or_else(no_tasks)?;
        tasks.update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let tasks = self.tasks.as_ref().ok_or_else(no_tasks)?;
        tasks.cancel_task(&request.task_id)?;
        record(json!({"event": "task_cancelled", "task_id": request.task_id}));
        Ok(())
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _: NotificationContext<RoleServer>,
    ) {
        record(json!({
            "event": "cancelled",
            "request_id": notification.request_id,
            "reason": notification.reason,
        }));
    }

    async fn on_roots_list_changed(&self, _: NotificationContext<RoleServer>) {
        record(json!({"event": "roots_list_changed"}));
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let r: Resource = serde_json::from_value(
            json!({"uri": "fixture://counter", "name": "counter", "mimeType": "text/plain"}),
        )
        .expect("resource");
        Ok(ListResourcesResult::with_all_items(vec![r]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != "fixture://counter" {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let r: ReadResourceResult = serde_json::from_value(json!({
            "resultType": "complete",
            "contents": [{"uri": "fixture://counter", "mimeType": "text/plain", "text": self.count.load(Ordering::SeqCst).to_string()}]
        })).expect("contents");
        Ok(ReadResourceResponse::Complete(r))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let typed = request.argument.value.as_str();
        let values: Vec<String> = match (&request.r#ref, request.argument.name.as_str()) {
            (Reference::Prompt(p), "name") if p.name == "greet" => ["alice", "albert", "bob"]
                .iter()
                .filter(|v| v.starts_with(typed))
                .map(|v| v.to_string())
                .collect(),
            _ => Vec::new(),
        };
        let info = CompletionInfo::with_all_values(values)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(CompleteResult::new(info))
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        record(json!({"event": "subscribe", "uri": request.uri}));
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(request.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        record(json!({"event": "unsubscribe", "uri": request.uri}));
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let p: Prompt = serde_json::from_value(json!({"name": "greet", "description": "Greets someone", "arguments": [{"name": "name", "required": true}]})).expect("prompt");
        Ok(ListPromptsResult::with_all_items(vec![p]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let name = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("stranger");
        let r: GetPromptResult = serde_json::from_value(json!({
            "resultType": "complete",
            "messages": [{"role": "user", "content": {"type": "text", "text": format!("Hello, {name}!")}}]
        })).expect("prompt result");
        Ok(GetPromptResponse::Complete(r))
    }
}

fn no_tasks() -> ErrorData {
    ErrorData::method_not_found::<GetTaskMethod>()
}

/// `job` as a task: done after `ms`, or cancelled when asked. With `asks`,
/// it first asks for a name under input key `name` (the task reads
/// `input_required` until `tasks/update` answers) and returns it too.
fn start_job(
    tasks: &rmcp::task_manager::TaskManager,
    ms: u64,
    text: String,
    asks: bool,
) -> CreateTaskResult {
    use rmcp::task_manager::{TaskExit, TaskOptions};
    let task = tasks.spawn(TaskOptions::new().with_poll_interval_ms(100), move |ctx| {
        Box::pin(async move {
            let answer = if asks {
                let input: InputRequest =
                    serde_json::from_value(ask_request("elicit")).expect("request");
                let answer = ctx.request_input("name", input).await?;
                record(json!({"event": "task_input", "task_id": ctx.task_id(), "answer": answer}));
                Some(answer)
            } else {
                None
            };
            let mut out = json!({"text": text});
            if let Some(answer) = answer {
                out["answer"] = answer;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(structured(out)),
                () = ctx.cancelled() => Err(TaskExit::Cancelled),
            }
        })
    });
    record(json!({"event": "task_created", "task_id": task.task_id}));
    CreateTaskResult::new(task)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let probes = args.iter().any(|a| a == "--probes");
    let asks = args.iter().any(|a| a == "--asks");
    let tasks = args
        .iter()
        .any(|a| a == "--tasks")
        .then(|| Arc::new(rmcp::task_manager::TaskManager::new()));
    if let Some(bytes) = flag("--stderr-bomb") {
        stderr_bomb(bytes.parse()?);
    }
    let fixture = move || Fixture {
        probes,
        asks,
        tasks: tasks.clone(),
        ..Fixture::default()
    };
    if let Some(path) = flag("--events") {
        EVENTS.set(path.into()).expect("set once");
    }
    if let Some(ms) = flag("--start-delay-ms") {
        tokio::time::sleep(Duration::from_millis(ms.parse()?)).await;
    }
    match flag("--http") {
        None => {
            let service = fixture().serve(rmcp::transport::stdio()).await?;
            service.waiting().await?;
        }
        Some(addr) => {
            use rmcp::transport::streamable_http_server::{
                StreamableHttpServerConfig, StreamableHttpService,
                session::local::LocalSessionManager,
            };
            let service: StreamableHttpService<Fixture, LocalSessionManager> =
                StreamableHttpService::new(
                    move || Ok(fixture()),
                    Default::default(),
                    StreamableHttpServerConfig::default(),
                );
            let listener = tokio::net::TcpListener::bind(&addr).await?;
            eprintln!("fixture listening on http://{}/mcp", listener.local_addr()?);
            let app = axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(record_request));
            axum::serve(listener, app).await?;
        }
    }
    Ok(())
}
