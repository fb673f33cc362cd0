"""wf answers a plain 2026-07-28 stateless `tools/call` over HTTP itself, in the
request's task, instead of starting an rmcp service for it (docs/benchmarks.md,
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
LOG = "info,wf_host::server::http_direct=debug"

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
    return server.log.read_text(errors="replace").count(DIRECT_LINE)


def sse_messages(r: httpx2.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]


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
