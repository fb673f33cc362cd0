"""wf answers a plain 2026-07-28 stateless `tools/call` over HTTP itself, in the
request's task, instead of starting an rmcp service for it, and a plain
2025-11-25 session's call without its session worker (docs/benchmarks.md,
"The HTTP front"). These tests hold it to rmcp's answers from outside, with raw
requests against the Rust fixture upstream: what the direct path takes it
answers as JSON; everything it must not take (a call that sends progress or log
messages first, headers rmcp has to judge) still gets rmcp's answer. wf's
debug log says which requests it answered itself, so each case also checks
which path served it.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from conftest import UpstreamEvents, Wf, toml_config

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
DIRECT_LINE = "answered in place"
LOG = "info,wf_host::server::http::direct=debug,wf_host::server::http::session_calls=debug"
SESSION_LINE = "session tools/call answered in place"

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"},
}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
}


def start(wf: Wf, fixture_upstream_bin: Path, events: UpstreamEvents, **server: Any) -> Any:
    settings = {"command": str(fixture_upstream_bin), "args": ["--asks", *events.args()], "session": "shared"}
    config = wf.write_config(toml_config({"fix": settings}, server=server or None))
    return wf.start_http("127.0.0.1", None, "--config", str(config), env={"WF_LOG": LOG})


def body(name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None, rid: int = 1) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": {**META, **(meta or {})}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


def post(url: str, name: str, arguments: dict[str, Any], headers: Any = None, meta: Any = None) -> httpx2.Response:
    """One raw stateless call; `headers` (a list of pairs, so a name may repeat)
    replace the defaults of the same name."""
    extra = list(headers or [])
    names = {k for k, _ in extra}
    pairs = [(k, v) for k, v in {**HEADERS, "mcp-name": name}.items() if k not in names] + extra
    with httpx2.Client(timeout=OP_TIMEOUT, trust_env=False) as http:
        return http.post(url, content=body(name, arguments, meta), headers=pairs)


def direct_count(server: Any) -> int:
    """Stateless calls answered in place (the session line says more)."""
    text = server.log.read_text(errors="replace")
    return text.count(DIRECT_LINE) - text.count(SESSION_LINE)


def session_count(server: Any) -> int:
    return server.log.read_text(errors="replace").count(SESSION_LINE)


def sse_messages(r: httpx2.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]


def assert_sized(r: httpx2.Response) -> None:
    """A JSON answer goes out with its length, not chunked (the request's slot
    held until the body ends must not hide the body's size from hyper)."""
    assert r.headers.get("content-length") == str(len(r.content)), r.headers
    assert "transfer-encoding" not in r.headers, r.headers


async def wait_listed(url: str, tool: str) -> None:
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            r = post(url, tool, {"message": "ready?"})
            if r.status_code == 200 and "result" in r.json():
                return
            await anyio.sleep(0.1)


async def test_a_plain_stateless_call_is_answered_as_json_and_others_as_rmcp_would(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """The plain call: 200, `application/json`, the upstream's result with
    `resultType: complete`, answered in place. Then each request the direct path
    must leave alone, with rmcp's answer and no new direct answer."""
    server = start(wf, fixture_upstream_bin, upstream_events)
    await wait_listed(server.url, "fix__echo")
    before = direct_count(server)
    assert before >= 1, "the plain call was not answered in place"

    r = post(server.url, "fix__echo", {"message": "direct"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", (r.status_code, r.headers)
    assert_sized(r)
    reply = r.json()
    assert reply["id"] == 1 and reply["result"]["content"][0]["text"] == "direct", reply
    assert reply["result"].get("resultType") == "complete", reply
    assert direct_count(server) == before + 1

    # A call that asks for input answers with the round, in place too.
    caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    r = post(server.url, "fix__ask", {"kind": "elicit"}, meta=caps)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", (r.status_code, r.text)
    result = r.json()["result"]
    assert result["resultType"] == "input_required" and result["inputRequests"] and result["requestState"], result
    before = direct_count(server)
    assert before >= 3

    cases: list[tuple[str, dict[str, Any], Any, Any, Any]] = [
        # (tool, arguments, headers, meta, what rmcp answers)
        ("fix__echo", {"message": "x"}, [("mcp-name", "fix__other")], None, (400, "does not match")),
        ("fix__echo", {"message": "x"}, [("mcp-method", "tools/call"), ("mcp-method", "tools/call")], None, (400, "duplicate")),
        ("fix__echo", {"message": "x"}, [("mcp-name", "=?base64?Zml4X19lY2hv?=")], None, (200, "x")),
        ("fix__echo", {"message": "x"}, [("accept", "application/json;q=1, text/event-stream")], None, (200, "x")),
        ("fix__echo", {"message": "x"}, [("accept", "application/json")], None, (406, "Not Acceptable")),
        ("fix__echo_header", {"message": "m"}, [("mcp-param-message", "m")], None, (200, '"m"')),
        ("fix__echo_header", {"message": "m"}, [], None, (400, "missing Mcp-Param-Message")),
        ("fix__nope", {}, [], None, (200, "unknown tool")),
    ]
    for tool, arguments, headers, meta, (status, text) in cases:
        r = post(server.url, tool, arguments, headers, meta)
        assert r.status_code == status and text in r.text, (tool, headers, r.status_code, r.text)
        assert direct_count(server) == before, f"answered in place: {tool} {headers}"

    # A call that sends something before its answer streams it, as rmcp does.
    r = post(server.url, "fix__progress", {"steps": 2, "interval_ms": 50}, meta={"progressToken": "p1"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.headers
    methods = [m.get("method") for m in sse_messages(r)]
    assert methods.count("notifications/progress") == 2 and "result" in sse_messages(r)[-1], r.text
    # A log level asks for the call's log lines: rmcp's (whether the line beats
    # the answer there is a race inside the upstream client, so not checked).
    r = post(server.url, "fix__log", {"text": "hello", "level": "warning"}, meta={"io.modelcontextprotocol/logLevel": "debug"})
    assert r.status_code == 200 and "logged" in r.text, r.text
    assert direct_count(server) == before


async def test_a_direct_call_whose_client_hangs_up_is_cancelled_upstream(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """Hanging up on a call answered in place drops it, and wf tells the upstream
    (`notifications/cancelled` in the fixture's journal); the next call is served."""
    server = start(wf, fixture_upstream_bin, upstream_events)
    await wait_listed(server.url, "fix__echo")
    with socket.create_connection(("127.0.0.1", server.port), timeout=OP_TIMEOUT) as s:
        payload = body("fix__slow", {"ms": 600_000})
        head = "".join(f"{k}: {v}\r\n" for k, v in {**HEADERS, "mcp-name": "fix__slow"}.items())
        s.sendall(
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{server.port}\r\n{head}content-length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        started = await upstream_events.wait_for(event="call", tool="slow")
        assert started, "the slow call never reached the upstream"
    cancelled = await upstream_events.wait_for(event="cancelled", request_id=started["request_id"])
    assert cancelled, "the upstream was not told the call was cancelled"
    r = post(server.url, "fix__echo", {"message": "after"})
    assert r.json()["result"]["content"][0]["text"] == "after", r.text


async def test_without_json_responses_every_call_goes_to_rmcp(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """`http_json_response = false` means an event stream for every answer:
    nothing is answered in place."""
    server = start(wf, fixture_upstream_bin, upstream_events, http_json_response=False)
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            r = post(server.url, "fix__echo", {"message": "s"})
            if r.status_code == 200 and '"s"' in r.text:
                break
            await anyio.sleep(0.1)
    assert r.headers["content-type"].startswith("text/event-stream"), r.headers
    assert direct_count(server) == 0


# ------------------------------------------------------------ 2025-11-25 sessions

V2025 = "2025-11-25"
SESSION_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": V2025,
}


class Session:
    """A raw 2025-11-25 session client: one keep-alive connection."""

    def __init__(self, url: str, capabilities: dict[str, Any] | None = None) -> None:
        self.url = url
        self.http = httpx2.Client(timeout=OP_TIMEOUT, trust_env=False)
        self.next_id = 0
        init = {
            "protocolVersion": V2025,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "e2e", "version": "0"},
        }
        r = self.http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=SESSION_HEADERS)
        assert r.status_code == 200, (r.status_code, r.text)
        self.id = r.headers["mcp-session-id"]
        self.headers = {**SESSION_HEADERS, "mcp-session-id": self.id}
        r = self.notify("notifications/initialized", {})
        assert r.status_code == 202, (r.status_code, r.text)

    def notify(self, method: str, params: dict[str, Any]) -> httpx2.Response:
        return self.http.post(self.url, json={"jsonrpc": "2.0", "method": method, "params": params}, headers=self.headers)

    def call(self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None, headers: Any = None) -> httpx2.Response:
        self.next_id += 1
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params}
        return self.http.post(self.url, json=message, headers={**self.headers, **(headers or {})})

    def answer(self, r: httpx2.Response) -> dict[str, Any]:
        if r.headers["content-type"].startswith("text/event-stream"):
            return [m for m in sse_messages(r) if m.get("id") == self.next_id][-1]
        return r.json()

    def raw_call(self, port: int, name: str, arguments: dict[str, Any]) -> socket.socket:
        """Sends a call on a connection of its own and returns the socket, unread."""
        self.next_id += 1
        payload = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        ).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        s = socket.create_connection(("127.0.0.1", port), timeout=OP_TIMEOUT)
        s.sendall(f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{head}content-length: {len(payload)}\r\n\r\n".encode() + payload)
        return s


async def nth_slow_call(events: UpstreamEvents, n: int) -> dict[str, Any]:
    """The upstream's record of the n-th `slow` call to start (from 1)."""
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            calls = [e for e in events.read() if e.get("event") == "call" and e.get("tool") == "slow"]
            if len(calls) >= n:
                return calls[n - 1]
            await anyio.sleep(0.05)


async def served_in_place(server: Any, session: Session) -> None:
    """Waits until the session's calls are answered in place (its handler
    registers it once it has seen `notifications/initialized`)."""
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            before = session_count(server)
            r = session.call("fix__echo", {"message": "ready?"})
            assert r.status_code == 200, (r.status_code, r.text)
            if session_count(server) > before:
                return
            await anyio.sleep(0.05)


async def test_a_plain_session_call_is_answered_as_json_and_others_as_rmcp_would(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """A 2025-11-25 session's plain call is answered in place as JSON; a call with
    a progress token, a session whose client could be asked something mid-call,
    and headers rmcp refuses all get rmcp's answer."""
    server = start(wf, fixture_upstream_bin, upstream_events)
    await wait_listed(server.url, "fix__echo")
    session = Session(server.url)
    await served_in_place(server, session)
    before = session_count(server)

    r = session.call("fix__echo", {"message": "in place"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", (r.status_code, r.headers)
    assert_sized(r)
    reply = r.json()
    assert reply["id"] == session.next_id and reply["result"]["content"][0]["text"] == "in place", reply
    # A tool error is an answer like any other: 200, in the body.
    r = session.call("fix__nope", {})
    assert r.status_code == 200 and "unknown tool" in r.text, r.text
    assert session_count(server) == before + 2
    before += 2

    # Progress rides the request's stream: rmcp's.
    r = session.call("fix__progress", {"steps": 2, "interval_ms": 50}, meta={"progressToken": "p1"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.headers
    methods = [m.get("method") for m in sse_messages(r)]
    assert methods.count("notifications/progress") == 2 and "result" in session.answer(r), r.text
    # rmcp's header checks: an unknown version is refused; a later one needs _meta.
    r = session.call("fix__echo", {"message": "x"}, headers={"mcp-protocol-version": "1999-01-01"})
    assert r.status_code == 400 and "Unsupported MCP-Protocol-Version" in r.text, (r.status_code, r.text)
    r = session.call("fix__echo", {"message": "x"}, headers={"accept": "application/json"})
    assert r.status_code == 406, (r.status_code, r.text)
    # An unknown session is rmcp's 404.
    r = session.call("fix__echo", {"message": "x"}, headers={"mcp-session-id": "nope"})
    assert r.status_code == 404, (r.status_code, r.text)
    assert session_count(server) == before

    # A client that declared sampling could be asked mid-call: every call of
    # its session is rmcp's, on the request's stream.
    asking = Session(server.url, {"sampling": {}})
    for _ in range(5):
        r = asking.call("fix__echo", {"message": "streamed"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.headers
        assert asking.answer(r)["result"]["content"][0]["text"] == "streamed", r.text
        await anyio.sleep(0.05)
    assert session_count(server) == before


async def test_a_session_call_answered_in_place_is_cancelled_by_the_client_or_the_session_end(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """`notifications/cancelled` reaches a call answered in place, and so does the
    session's end (DELETE); a client that hangs up does not cancel its call
    (a disconnection is not a cancellation), which runs to its end."""
    server = start(wf, fixture_upstream_bin, upstream_events)
    await wait_listed(server.url, "fix__echo")
    session = Session(server.url)
    await served_in_place(server, session)

    with session.raw_call(server.port, "fix__slow", {"ms": 600_000}):
        rid = session.next_id
        started = await nth_slow_call(upstream_events, 1)
        session.notify("notifications/cancelled", {"requestId": rid, "reason": "e2e"})
        assert await upstream_events.wait_for(event="cancelled", request_id=started["request_id"])

    gate = wf.root / "gate"
    with session.raw_call(server.port, "fix__slow", {"ms": 600_000, "until": str(gate)}):
        second = await nth_slow_call(upstream_events, 2)
    gate.touch()
    assert await upstream_events.wait_for(event="slow_done", request_id=second["request_id"])
    ends = [e["event"] for e in upstream_events.read() if e.get("request_id") == second["request_id"]]
    assert ends == ["call", "slow_done"], ends

    with session.raw_call(server.port, "fix__slow", {"ms": 600_000}):
        third = await nth_slow_call(upstream_events, 3)
        r = session.http.delete(server.url, headers=session.headers)
        assert r.status_code == 200, (r.status_code, r.text)
        assert await upstream_events.wait_for(event="cancelled", request_id=third["request_id"])
    r = session.call("fix__echo", {"message": "gone"})
    assert r.status_code == 404, (r.status_code, r.text)


async def test_calls_a_client_hung_up_on_still_count_against_max_calls_per_client(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """A session call whose client hung up runs on, so it keeps its slot: with
    `max_calls_per_client = 2`, two such calls leave that session no room (-32000
    naming the limit), while another session is served; once they end, the
    session is served again. Without the bound a client could start calls and
    hang up without limit."""
    server = start(wf, fixture_upstream_bin, upstream_events, max_calls_per_client=2)
    await wait_listed(server.url, "fix__echo")
    session = Session(server.url)
    await served_in_place(server, session)
    gate = wf.root / "gate"
    for n in (1, 2):
        with session.raw_call(server.port, "fix__slow", {"ms": 600_000, "until": str(gate)}):
            await nth_slow_call(upstream_events, n)
    r = session.call("fix__echo", {"message": "one too many"})
    assert r.status_code == 200, (r.status_code, r.text)
    error = session.answer(r)["error"]
    assert error["code"] == -32000 and "max_calls_per_client = 2" in error["message"], error
    other = Session(server.url)
    r = other.call("fix__echo", {"message": "another client"})
    assert other.answer(r)["result"]["content"][0]["text"] == "another client", r.text
    gate.touch()
    for n in (1, 2):
        started = await nth_slow_call(upstream_events, n)
        assert await upstream_events.wait_for(event="slow_done", request_id=started["request_id"])
    with anyio.fail_after(OP_TIMEOUT):
        while "error" in (reply := session.answer(session.call("fix__echo", {"message": "room again"}))):
            await anyio.sleep(0.05)  # the calls' tasks end just after the upstream answers
    assert reply["result"]["content"][0]["text"] == "room again", reply


async def test_a_session_used_only_by_calls_answered_in_place_stays_open_until_idle(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """The session's worker never sees a call answered in place, yet its idle
    timeout still counts from the client's last call: a session in use for
    three idle timeouts stays open, and closes one timeout after it falls silent."""
    server = start(wf, fixture_upstream_bin, upstream_events, session_idle_timeout_ms=1500)
    await wait_listed(server.url, "fix__echo")
    session = Session(server.url)
    await served_in_place(server, session)
    before = session_count(server)
    with anyio.fail_after(OP_TIMEOUT):
        until = anyio.current_time() + 4.5
        calls = 0
        while anyio.current_time() < until:
            r = session.call("fix__echo", {"message": "still here"})
            assert r.status_code == 200 and "still here" in r.text, (calls, r.status_code, r.text)
            calls += 1
            await anyio.sleep(0.2)
    assert session_count(server) == before + calls
    await anyio.sleep(3.5)
    r = session.call("fix__echo", {"message": "expired"})
    assert r.status_code == 404, (r.status_code, r.text)


async def test_a_call_answered_in_place_that_outlasts_the_idle_timeout_is_streamed_and_pinged(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """A connection silent for `idle_timeout_ms` is closed, so a call answered in
    place that takes longer than a keep-alive interval is answered as an event
    stream, with keep-alive comments until its answer: both for a stateless
    2026-07-28 call and a session's. A quick one is still JSON."""
    server = start(wf, fixture_upstream_bin, upstream_events, idle_timeout_ms=1500)
    await wait_listed(server.url, "fix__echo")
    session = Session(server.url)
    await served_in_place(server, session)
    before = (direct_count(server), session_count(server))

    r = post(server.url, "fix__slow", {"ms": 4000})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), (r.status_code, r.text)
    assert r.text.count("\n:") + r.text.startswith(":") >= 3, f"no keep-alive comments: {r.text!r}"
    assert sse_messages(r)[-1]["result"]["structuredContent"] == {"slept_ms": 4000}, r.text

    r = session.call("fix__slow", {"ms": 4000})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), (r.status_code, r.text)
    assert r.text.count("\n:") + r.text.startswith(":") >= 3, f"no keep-alive comments: {r.text!r}"
    assert session.answer(r)["result"]["structuredContent"] == {"slept_ms": 4000}, r.text

    r = session.call("fix__echo", {"message": "quick"})
    assert r.headers["content-type"] == "application/json" and "quick" in r.text, r.text
    assert (direct_count(server), session_count(server)) == (before[0] + 1, before[1] + 2)


async def test_a_slow_stateless_call_rmcp_answers_is_streamed_and_pinged_too(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """The calls wf leaves to rmcp (here: a `logLevel` opt-in, and an `Mcp-Param-*`
    header) are answered as JSON too once they finish, and rmcp sends nothing
    meanwhile: one that takes longer than a keep-alive interval is streamed
    with keep-alive comments instead, so `idle_timeout_ms` does not cut it off.
    A quick one is still rmcp's JSON, and rmcp's header refusals are unchanged."""
    server = start(wf, fixture_upstream_bin, upstream_events, idle_timeout_ms=1500)
    await wait_listed(server.url, "fix__echo")
    before = direct_count(server)
    slow = [
        ("logLevel", {"meta": {"io.modelcontextprotocol/logLevel": "error"}}),
        ("Mcp-Param-*", {"headers": [("mcp-param-extra", "x")]}),
    ]
    for what, extra in slow:
        r = post(server.url, "fix__slow", {"ms": 4000}, **extra)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), (what, r.status_code, r.text)
        assert r.text.count("\n:") + r.text.startswith(":") >= 3, f"{what}: no keep-alive comments: {r.text!r}"
        assert sse_messages(r)[-1]["result"]["structuredContent"] == {"slept_ms": 4000}, (what, r.text)
        r = post(server.url, "fix__echo", {"message": "quick"}, **extra)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json", (what, r.headers)
        assert r.json()["result"]["content"][0]["text"] == "quick", (what, r.text)
    r = post(server.url, "fix__echo", {"message": "x"}, headers=[("mcp-name", "fix__other")])
    assert r.status_code == 400, (r.status_code, r.text)
    assert direct_count(server) == before
