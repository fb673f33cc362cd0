"""Helpers of the HTTP and stdio hardening tests: wf's open sockets as
/proc shows them, raw sockets, a raw JSON-RPC session over HTTP (to send what
the official client never would), and polling with a deadline."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest

T = TypeVar("T")

MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PROTOCOL = "2025-11-25"


def held_connections(pid: int, client_ports: set[int]) -> int:
    """How many of the connections from these local client ports process `pid`
    holds open: its sockets whose peer is one of them (by socket inode, from
    /proc/net/tcp{,6}), so a socket wf opened or closed for its own reasons
    never counts."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if int(cols[2].rsplit(":", 1)[1], 16) in client_ports and cols[9] != "0":
                inodes.add(f"socket:[{cols[9]}]")
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                n += 1
        except OSError:
            pass  # closed while we looked
    return n


def ports(socks: list[socket.socket]) -> set[int]:
    """The local ports of these client sockets."""
    return {s.getsockname()[1] for s in socks}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def wait_until(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    """Polls `check` until it returns something truthy; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {got!r})")
        time.sleep(interval)


def log_lines(path: Path, needle: str) -> list[str]:
    return [line for line in path.read_text(errors="replace").splitlines() if needle in line]


def idle_socket(port: int) -> socket.socket:
    """A connection that sends nothing."""
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def is_closed_by_peer(s: socket.socket, timeout: float) -> bool:
    """True when the server closes `s` (EOF or reset) within `timeout` s."""
    s.settimeout(timeout)
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def stalled_post(port: int, path: str = "/mcp", timeout: float = 30) -> socket.socket:
    """A POST whose head is complete but whose body stops half way: a request
    in progress for as long as the socket stays open. Returns once wf is
    reading the body (its `100 Continue` says so)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n"
        ).encode()
    )
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        assert chunk, f"wf closed the connection instead of reading the body: {got!r}"
        got += chunk
    assert got.startswith(b"HTTP/1.1 100"), f"expected 100 Continue, got {got[:200]!r}"
    s.sendall(b'{"jsonrpc":')
    return s


def read_http_status(s: socket.socket, timeout: float) -> int:
    """The status code of the response that arrives on `s`."""
    s.settimeout(timeout)
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    line = data.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = line.split()
    assert len(parts) >= 2 and parts[0].startswith("HTTP/1."), f"not an HTTP response: {data[:200]!r}"
    return int(parts[1])


def initialize_body(id_: int | str = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "wf-e2e", "version": "0"}},
    }


def parse_reply(r: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, sent as JSON or as one SSE event."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                msg = json.loads(line[5:])
                if "id" in msg:
                    return msg
        raise AssertionError(f"no JSON-RPC reply in the event stream: {r.text[:500]}")
    return r.json()


class RawSession:
    """A 2025-11-25 session driven by hand over HTTP."""

    def __init__(self, http: httpx2.Client, url: str, headers: dict[str, str] | None = None) -> None:
        self.http, self.url, self.headers = http, url, dict(headers or {})
        self.id: str | None = None
        self.next_id = 100

    def initialize(self, follow: bool = True) -> httpx2.Response:
        """Opens the session; with `follow`, also says `initialized` (which
        starts the session's list-change follower)."""
        r = self.http.post(self.url, json=initialize_body(), headers={**MCP_HEADERS, **self.headers})
        if r.status_code != 200:
            return r
        self.id = r.headers["mcp-session-id"]
        if follow:
            n = self.http.post(
                self.url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=self.session_headers(),
            )
            assert n.status_code == 202, (n.status_code, n.text)
        return r

    def session_headers(self) -> dict[str, str]:
        assert self.id, "not initialized"
        return {**MCP_HEADERS, **self.headers, "mcp-session-id": self.id, "mcp-protocol-version": PROTOCOL}

    def post_raw(self, body: bytes | dict[str, Any]) -> httpx2.Response:
        if isinstance(body, dict):
            return self.http.post(self.url, json=body, headers=self.session_headers())
        return self.http.post(self.url, content=body, headers=self.session_headers())

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        r = self.post_raw({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        assert r.status_code == 200, (r.status_code, r.text)
        return parse_reply(r)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def delete(self) -> int:
        return self.http.delete(self.url, headers=self.session_headers()).status_code


class RawStdio:
    """`wf serve` over stdio driven line by line, stderr to a log file."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        import queue
        import subprocess
        import threading

        self.log = log
        self._err = log.open("wb")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.put(json.loads(line))

        threading.Thread(target=read, daemon=True).start()

    def send(self, data: bytes | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        if isinstance(data, dict):
            data = json.dumps(data).encode() + b"\n"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def reply(self, timeout: float) -> dict[str, Any]:
        """The next reply wf writes (a message with an `id`, null included),
        skipping its notifications (e.g. list_changed once discovery ends);
        fails after `timeout` s."""
        import queue

        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no reply from wf within {timeout}s")
            if "id" in msg:
                return msg
            self.notifications.append(msg)

    def initialize(self, timeout: float) -> None:
        self.send(initialize_body(0))
        assert self.reply(timeout)["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> int:
        import subprocess

        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._err.close()
        return code
