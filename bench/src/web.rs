//! A minimal MCP client over streamable HTTP (raw JSON-RPC over reqwest), so
//! the benchmark controls exactly what each request looks like: a 2025-11-25
//! client with its session, or a stateless 2026-07-28 client. And `wf serve
//! --http` as a child process that is always stopped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

pub const V2025: &str = "2025-11-25";
pub const V2026: &str = "2026-07-28";

/// Which protocol generation a client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    /// `initialize`, then every request on its `Mcp-Session-Id`.
    Sessions2025,
    /// No handshake; every request carries its protocol version.
    Stateless2026,
}

/// One client: a 2025 session, or a 2026 stateless caller.
pub struct WebClient {
    http: reqwest::Client,
    url: String,
    generation: Generation,
    session: Option<String>,
    next_id: u64,
    /// Responses per content type seen: (JSON bodies, SSE bodies).
    pub bodies: (u64, u64),
}

impl WebClient {
    /// Connects: for a 2025 client, `initialize` + `notifications/initialized`.
    pub async fn connect(
        http: &reqwest::Client,
        url: &str,
        generation: Generation,
    ) -> anyhow::Result<Self> {
        let mut c = Self {
            http: http.clone(),
            url: url.to_string(),
            generation,
            session: None,
            next_id: 1,
            bodies: (0, 0),
        };
        if generation == Generation::Sessions2025 {
            let init = json!({
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": V2025, "capabilities": {},
                           "clientInfo": {"name": "wf-bench", "version": "0"}}
            });
            let resp = c.post(&init, None).await?;
            let session = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .context("initialize: no Mcp-Session-Id in the reply")?;
            c.session = Some(session);
            c.read(resp, 0).await.context("initialize")?;
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let resp = c.post(&note, None).await?;
            if !resp.status().is_success() {
                bail!("notifications/initialized: HTTP {}", resp.status());
            }
        }
        Ok(c)
    }

    /// Another caller on an existing 2025 session, numbering its requests from `first_id`.
    pub fn on_session(
        http: &reqwest::Client,
        url: &str,
        session: Option<&str>,
        first_id: u64,
    ) -> Self {
        Self {
            http: http.clone(),
            url: url.to_string(),
            generation: Generation::Sessions2025,
            session: session.map(str::to_string),
            next_id: first_id,
            bodies: (0, 0),
        }
    }

    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    async fn post(
        &self,
        body: &Value,
        method: Option<(&str, &str)>,
    ) -> anyhow::Result<reqwest::Response> {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        match self.generation {
            Generation::Sessions2025 => {
                if let Some(s) = &self.session {
                    req = req
                        .header("mcp-session-id", s)
                        .header("mcp-protocol-version", V2025);
                }
            }
            Generation::Stateless2026 => {
                req = req.header("mcp-protocol-version", V2026);
                if let Some((m, name)) = method {
                    req = req.header("mcp-method", m).header("mcp-name", name);
                }
            }
        }
        req.body(serde_json::to_vec(body)?)
            .send()
            .await
            .context("HTTP request")
    }

    /// The JSON-RPC answer with `id` from a JSON or SSE body.
    async fn read(&mut self, resp: reqwest::Response, id: u64) -> anyhow::Result<Value> {
        let status = resp.status();
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let text = resp.text().await.context("reading the body")?;
        if !status.is_success() {
            bail!(
                "HTTP {status}: {}",
                text.chars().take(300).collect::<String>()
            );
        }
        let answer = if sse {
            self.bodies.1 += 1;
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m.get("id").and_then(Value::as_u64) == Some(id))
                .context("the event stream ended without the answer")?
        } else {
            self.bodies.0 += 1;
            serde_json::from_str(&text).context("a JSON body that is not JSON")?
        };
        if let Some(e) = answer.get("error") {
            bail!("JSON-RPC error: {e}");
        }
        answer
            .get("result")
            .cloned()
            .context("an answer without a result")
    }

    /// One `tools/call` of an echo tool; fails unless the reply carries the message.
    pub async fn echo(&mut self, tool: &str, message: &str) -> anyhow::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = json!({"name": tool, "arguments": {"message": message}});
        if self.generation == Generation::Stateless2026 {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": V2026,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "wf-bench", "version": "0"}
            });
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let resp = self.post(&body, Some(("tools/call", tool))).await?;
        let result = self
            .read(resp, id)
            .await
            .with_context(|| format!("calling {tool}"))?;
        let echoed = result["content"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["text"].as_str().is_some_and(|t| t.contains(message)))
        });
        if result["isError"] == json!(true) || !echoed {
            bail!("{tool} did not echo {message:?}: {result}");
        }
        Ok(())
    }

    /// One `tools/list` (its first page) on a 2025-11-25 session; how many
    /// tools it listed.
    pub async fn list_tools(&mut self) -> anyhow::Result<usize> {
        if self.generation != Generation::Sessions2025 {
            bail!("list_tools is for a 2025-11-25 session");
        }
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}});
        let resp = self.post(&body, None).await?;
        let result = self.read(resp, id).await.context("tools/list")?;
        Ok(result["tools"].as_array().map_or(0, Vec::len))
    }

    /// Ends a 2025 session (`DELETE`); nothing for a stateless client.
    pub async fn close(self) -> anyhow::Result<()> {
        let Some(s) = &self.session else {
            return Ok(());
        };
        let resp = self
            .http
            .delete(&self.url)
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", V2025)
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("DELETE session: HTTP {}", resp.status());
        }
        Ok(())
    }
}

/// `wf serve --http 127.0.0.1:PORT` as a child: SIGTERM, then SIGKILL, on stop or drop.
pub struct HttpWf {
    pub pid: u32,
    pub url: String,
    /// Where its stderr goes.
    pub log: PathBuf,
    child: Option<Child>,
}

impl HttpWf {
    /// Starts `cmd` (a `wf serve` command) on a free loopback port and waits
    /// until it accepts connections.
    pub async fn start(cmd: Command, log: &Path) -> anyhow::Result<Self> {
        Self::start_with(cmd, log, |cmd, addr| {
            cmd.arg("--http").arg(addr);
        })
        .await
    }

    /// Like [`HttpWf::start`], for any server: `listen` tells `cmd` its address.
    pub async fn start_with(
        mut cmd: Command,
        log: &Path,
        listen: impl FnOnce(&mut Command, &str),
    ) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let f = std::fs::File::create(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        listen(&mut cmd, &format!("127.0.0.1:{port}"));
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(f);
        let mut child = cmd.spawn().context("cannot start wf serve --http")?;
        let pid = child.id().unwrap_or(0);
        let until = Instant::now() + crate::HANDSHAKE_TIMEOUT;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "wf serve --http exited ({status}) before listening; see {}",
                    log.display()
                );
            }
            if Instant::now() > until {
                let _ = child.start_kill();
                bail!(
                    "wf serve --http did not listen within 30 s; see {}",
                    log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            pid,
            url: format!("http://127.0.0.1:{port}/mcp"),
            log: log.to_path_buf(),
            child: Some(child),
        })
    }

    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        crate::proc::signal(self.pid, libc::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

impl Drop for HttpWf {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            crate::proc::signal(self.pid, libc::SIGTERM);
            let until = Instant::now() + Duration::from_secs(3);
            while Instant::now() < until {
                if !matches!(child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.start_kill();
        }
    }
}

/// Open file descriptors of a process.
pub fn fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}
