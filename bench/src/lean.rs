//! Blocking one-thread clients: an HTTP/1.1 GET over a kept-alive
//! `TcpStream`, and MCP JSON-RPC lines over a child's pipes.
//!
//! rmcp's client and reqwest each run on the benchmark's tokio runtime and
//! hand every request and answer between tasks (and often threads) of the
//! benchmark process itself. Timed with those, "wf's added time" also holds
//! the MCP client's own hand-offs, which the HTTP client's do not cancel.
//! These two clients do nothing but write the request and read the answer
//! on the calling thread, the same way on both sides, so the difference of
//! their round trips is what the server side adds (openapi.rs).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// An HTTP/1.1 client for one kept-alive connection.
pub struct LeanHttp {
    stream: BufReader<TcpStream>,
    host: String,
    line: String,
}

impl LeanHttp {
    /// Connects to `base` (`http://host:port`).
    pub fn connect(base: &str) -> anyhow::Result<Self> {
        let host = base
            .strip_prefix("http://")
            .context("only http:// bases")?
            .trim_end_matches('/')
            .to_string();
        let stream = TcpStream::connect(&host).with_context(|| format!("connecting to {host}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(LeanHttp {
            stream: BufReader::new(stream),
            host,
            line: String::new(),
        })
    }

    /// `GET path`, the answer's body parsed as JSON (a 200 is required).
    pub fn get_json(&mut self, path: &str) -> anyhow::Result<Value> {
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: {}\r\naccept: */*\r\n\r\n",
            self.host
        );
        self.stream.get_mut().write_all(request.as_bytes())?;
        let mut length = None;
        let mut status = None;
        loop {
            self.line.clear();
            if self.stream.read_line(&mut self.line)? == 0 {
                bail!("the API closed the connection");
            }
            let line = self.line.trim_end();
            if line.is_empty() {
                break;
            }
            if status.is_none() {
                status = line.split(' ').nth(1).map(str::to_string);
            } else if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = Some(value.trim().parse::<usize>()?);
            }
        }
        if status.as_deref() != Some("200") {
            bail!("status {status:?}");
        }
        let mut body = vec![0; length.context("no content-length")?];
        self.stream.read_exact(&mut body)?;
        Ok(serde_json::from_slice(&body)?)
    }
}

/// An MCP client over a child's stdio: one request line, then lines read
/// until its answer (notifications in between are skipped).
pub struct LeanMcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl LeanMcp {
    /// Starts `command` (its stderr to `log`) and opens a session.
    pub fn start(mut command: Command, log: &Path) -> anyhow::Result<Self> {
        let stderr = std::fs::File::create(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("cannot start the server")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut client = LeanMcp {
            child,
            stdin,
            stdout,
            next_id: 0,
            line: String::new(),
        };
        client.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "wf-bench-lean", "version": "0"},
            }),
        )?;
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(client)
    }

    /// Waits until `tools/list` names `tool` (sources discover after the
    /// handshake).
    pub fn wait_for_tool(&mut self, tool: &str, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let listed = self.request("tools/list", json!({}))?;
            let found = listed["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| t["name"] == tool));
            if found {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{tool} was not listed within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `tools/call`: the result (a JSON-RPC error or `isError` fails).
    pub fn call_tool(&mut self, name: &str, arguments: &Value) -> anyhow::Result<Value> {
        let result = self.request("tools/call", json!({"name": name, "arguments": arguments}))?;
        if result["isError"] == true {
            bail!("{name} failed: {result}");
        }
        Ok(result)
    }

    fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let mut bytes = serde_json::to_vec(message)?;
        bytes.push(b'\n');
        self.stdin.write_all(&bytes)?;
        Ok(())
    }

    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line)? == 0 {
                bail!("the server closed stdout");
            }
            let message: Value = serde_json::from_str(&self.line)?;
            if message["id"] != id {
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("{method}: {error}");
            }
            return Ok(message["result"].clone());
        }
    }
}

impl Drop for LeanMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A std `Command` with the program, arguments and environment of `cmd`.
pub fn std_command(cmd: &tokio::process::Command) -> Command {
    let cmd = cmd.as_std();
    let mut out = Command::new(cmd.get_program());
    out.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => out.env(k, v),
            None => out.env_remove(k),
        };
    }
    out
}
