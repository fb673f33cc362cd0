"""The HTTP front under abuse, driven from outside with real sockets and
/proc: idle and stalled connections, the connection, request, session and
body limits, exact JSON-RPC errors, and sessions' list followers ending with
their sessions."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import anyio
import httpx2
import pytest

from conftest import HttpServer, Wf, all_tools, tail
from hardening_support import (
    MCP_HEADERS,
    RawSession,
    held_connections,
    idle_socket,
    initialize_body,
    is_closed_by_peer,
    log_lines,
    parse_reply,
    ports,
    read_http_status,
    rss_kib,
    stalled_post,
    wait_until,
)

OP_TIMEOUT = 30
# Closing what a timeout or a limit closes: generous for a loaded 2-core machine.
CLOSE_TIMEOUT = 30
ADMIN_TOKEN = "e2e-admin-token-0123456789"


@pytest.fixture
def http() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=OP_TIMEOUT, trust_env=False) as c:
        yield c


def serve(wf: Wf, server_toml: str, admin: bool = False) -> HttpServer:
    text = "[server]\n" + server_toml
    if admin:
        text += f'\n[admin]\nover_http = "token"\ntoken = "{ADMIN_TOKEN}"\n'
    cfg = wf.write_config(text)
    return wf.start_http("127.0.0.1", None, "--config", str(cfg))


def close_all(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()


@pytest.mark.anyio
async def test_idle_sockets_over_the_limit_do_not_starve_a_client(wf: Wf) -> None:
    """More idle sockets than max_connections: the oldest idle ones make room,
    wf never holds more than the limit, a real client is served, and the
    limit is logged once, not once per socket."""
    limit = 20
    server = serve(wf, f"max_connections = {limit}\nheader_read_timeout_ms = 120000\n")
    pid = server.proc.pid
    socks = [idle_socket(server.port) for _ in range(3 * limit)]
    mine = ports(socks)
    try:
        # Each socket beyond the limit closes the oldest idle one.
        evicted = [s for s in socks[: 2 * limit] if is_closed_by_peer(s, CLOSE_TIMEOUT)]
        assert len(evicted) == 2 * limit, f"only {len(evicted)} of the oldest {2 * limit} idle sockets were closed"
        wait_until(lambda: held_connections(pid, mine) == limit, CLOSE_TIMEOUT, f"wf to hold exactly {limit} of them")
        async with wf.http_client(server, "legacy") as c:
            with anyio.fail_after(OP_TIMEOUT):
                names = {t.name for t in await all_tools(c)}
                result = await c.call_tool("wf_std__const", {"value": "served"})
        assert "wf_std__const" in names
        assert result.structured_content == {"value": "served"}
        assert held_connections(pid, mine) <= limit
        # 40-odd evictions, logged at most once per 10 s.
        warnings = log_lines(server.log, "connection limit reached")
        assert 1 <= len(warnings) <= 3, warnings
    finally:
        close_all(socks)


def test_idle_sockets_are_closed_after_the_header_read_timeout(wf: Wf) -> None:
    server = serve(wf, "header_read_timeout_ms = 1500\n")
    pid = server.proc.pid
    socks = [idle_socket(server.port) for _ in range(30)]
    # One that starts a request head and never finishes it (slowloris).
    slow = idle_socket(server.port)
    slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    socks.append(slow)
    mine = ports(socks)
    try:
        wait_until(lambda: held_connections(pid, mine) == 31, CLOSE_TIMEOUT, "wf to accept 31 sockets")
        wait_until(lambda: held_connections(pid, mine) == 0, CLOSE_TIMEOUT, "wf to close the idle sockets")
        assert all(is_closed_by_peer(s, 5) for s in socks)
    finally:
        close_all(socks)


def test_a_stalled_body_is_closed_after_the_idle_timeout(wf: Wf) -> None:
    server = serve(wf, "idle_timeout_ms = 1500\nheader_read_timeout_ms = 120000\n")
    pid = server.proc.pid
    s = stalled_post(server.port)  # returns once wf is reading the body
    mine = ports([s])
    try:
        assert held_connections(pid, mine) == 1, "wf does not hold the stalled connection"
        assert is_closed_by_peer(s, CLOSE_TIMEOUT), "a stalled request body kept its connection open"
        wait_until(lambda: held_connections(pid, mine) == 0, CLOSE_TIMEOUT, "wf to release the socket")
    finally:
        s.close()


@pytest.mark.anyio
async def test_a_call_longer_than_the_idle_timeout_still_succeeds(wf: Wf) -> None:
    """Live response streams are pinged, so only silent connections time out."""
    server = serve(wf, "idle_timeout_ms = 1500\n")
    async with wf.http_client(server, "legacy") as c:
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool("wf_std__sleep", {"ms": 4000})
    assert not result.is_error, result


def test_when_every_connection_is_busy_a_new_one_gets_503(wf: Wf) -> None:
    server = serve(wf, "max_connections = 2\n")
    # An idle connection first, which a busy one evicts: the eviction's
    # warning must not silence the refusal's that follows (they were one
    # rate-limited warning, and CI once saw the refusal go unlogged).
    idle = idle_socket(server.port)
    # Both connections have sent a request, so neither may be closed to make room.
    busy = [stalled_post(server.port) for _ in range(2)]
    try:
        assert is_closed_by_peer(idle, OP_TIMEOUT)
        idle.close()
        wait_until(lambda: log_lines(server.log, "closed the oldest connection"), CLOSE_TIMEOUT, "the eviction warning")
        extra = idle_socket(server.port)
        try:
            assert read_http_status(extra, OP_TIMEOUT) == 503
            assert is_closed_by_peer(extra, OP_TIMEOUT)
        finally:
            extra.close()
        wait_until(lambda: log_lines(server.log, "HTTP connection refused (503)"), CLOSE_TIMEOUT, "the refusal warning")
    finally:
        close_all(busy)


def test_a_call_past_the_principal_bound_waits_then_gets_429(wf: Wf) -> None:
    """Calls in progress count against `max_requests_per_principal`; one more
    waits in its principal's queue for `queue_wait_ms`, then gets 429 with
    Retry-After and a JSON-RPC error naming the limit; past
    `max_queued_per_principal` it is refused at once. Session set-up and
    tear-down are never refused for a bound they do not take."""
    server = serve(wf, "max_requests_per_principal = 2\nmax_queued_per_principal = 1\nqueue_wait_ms = 1500\n")
    with httpx2.Client(timeout=OP_TIMEOUT, trust_env=False) as http:
        holders = [RawSession(http, server.url) for _ in range(2)]
        for s in holders:
            assert s.initialize().status_code == 200
    sleeps = [(s.id, s.session_headers()) for s in holders]

    def long_call(headers: dict[str, str]) -> None:
        with httpx2.Client(timeout=OP_TIMEOUT, trust_env=False) as c:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wf_std__sleep", "arguments": {"ms": 8000}}}
            c.post(server.url, json=body, headers=headers)

    threads = [threading.Thread(target=long_call, args=(h,), daemon=True) for _, h in sleeps]
    for t in threads:
        t.start()
    with httpx2.Client(timeout=OP_TIMEOUT, trust_env=False) as http:
        # Both slots taken: a third call waits its 1.5 s, then 429.
        third = RawSession(http, server.url)
        assert third.initialize().status_code == 200, "initialize is never refused for the call bound"
        queued: dict[str, httpx2.Response] = {}

        def queued_call() -> None:
            queued["r"] = third.post_raw(
                {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "wf_std__const", "arguments": {"value": 1}}}
            )

        def both_slots_taken() -> bool:
            probe = third.post_raw({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {}})
            return probe.status_code == 429

        wait_until(both_slots_taken, CLOSE_TIMEOUT, "both slots held by the sleeping calls")
        waiter = threading.Thread(target=queued_call, daemon=True)
        started = time.monotonic()
        waiter.start()
        # While it waits, the queue (of one) is full: the next is refused at once.
        time.sleep(0.3)
        full = third.post_raw({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {}})
        assert full.status_code == 429, full.text
        assert "server.max_queued_per_principal = 1" in full.json()["error"]["message"], full.text
        waiter.join(OP_TIMEOUT)
        waited = time.monotonic() - started
        r = queued["r"]
        assert r.status_code == 429, r.text
        assert r.headers["retry-after"] == "1"
        body = r.json()
        assert body["id"] == 7 and body["error"]["code"] == -32000, body
        assert "server.max_requests_per_principal = 2" in body["error"]["message"], body
        assert "server.queue_wait_ms" in body["error"]["message"], body
        assert waited >= 1.4, f"refused after {waited:.2f} s, before its queue wait was over"
        # Set-up and tear-down still pass while every slot is taken.
        fourth = RawSession(http, server.url)
        assert fourth.initialize().status_code == 200
        assert fourth.delete() == 200
        wait_until(lambda: log_lines(server.log, "HTTP request refused (429)"), CLOSE_TIMEOUT, "the warning")
        for t in threads:
            t.join(OP_TIMEOUT)
        # The slots come back when the calls end.
        assert third.call_tool("wf_std__const", {"value": "again"})["result"]["structuredContent"] == {"value": "again"}


def test_streams_have_their_own_bound(wf: Wf) -> None:
    """A 2025-11-25 session's GET stream takes a stream slot
    (`max_streams_per_principal`), not a call slot: with one stream slot
    taken, a second GET stream gets 429, and calls are still served."""
    server = serve(wf, "max_streams_per_principal = 1\nmax_requests_per_principal = 1\n")
    with httpx2.Client(timeout=OP_TIMEOUT, trust_env=False) as http:
        a, b = RawSession(http, server.url), RawSession(http, server.url)
        assert a.initialize().status_code == 200 and b.initialize().status_code == 200
        sse = {**a.session_headers(), "Accept": "text/event-stream"}
        with http.stream("GET", server.url, headers=sse) as stream:
            assert stream.status_code == 200
            second = http.get(server.url, headers={**b.session_headers(), "Accept": "text/event-stream"})
            assert second.status_code == 429, second.text
            assert "server.max_streams_per_principal = 1" in second.json()["error"]["message"]
            # The open stream holds no call slot: both sessions' calls pass.
            for s in (a, b):
                assert s.call_tool("wf_std__const", {"value": 1})["result"]["structuredContent"] == {"value": 1}


def test_exact_errors(wf: Wf, http: httpx2.Client) -> None:
    server = serve(wf, "max_request_bytes = 65536\n")
    # Malformed JSON: 400 with JSON-RPC -32700 (rmcp alone says 415).
    r = http.post(server.url, content=b'{"jsonrpc": "2.0", "id": 1, "method": ', headers=MCP_HEADERS)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == -32700 and r.json()["id"] is None, r.text
    # JSON that is not a JSON-RPC message: 400 with -32600 and its id.
    r = http.post(server.url, json={"jsonrpc": "1.0", "id": 5, "method": "ping"}, headers=MCP_HEADERS)
    assert r.status_code == 400, r.text
    assert (r.json()["error"]["code"], r.json()["id"]) == (-32600, 5), r.text
    # Over max_request_bytes: 413, logged.
    r = http.post(server.url, content=b"x" * 70000, headers=MCP_HEADERS)
    assert r.status_code == 413, r.text
    assert log_lines(server.log, "body over server.max_request_bytes"), tail(server.log)

    s = RawSession(http, server.url)
    assert s.initialize().status_code == 200
    # Ill-typed arguments: -32602 for that id (rmcp alone says -32601).
    r = s.post_raw({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "wf_std__const", "arguments": "oops"}})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert (reply["id"], reply["error"]["code"]) == (7, -32602), reply
    # An unknown method is still -32601, from rmcp.
    r = s.post_raw({"jsonrpc": "2.0", "id": 8, "method": "vendor/unknown", "params": {}})
    assert parse_reply(r)["error"]["code"] == -32601, r.text
    # The session still works.
    assert s.call_tool("wf_std__const", {"value": 1})["result"]["structuredContent"] == {"value": 1}
    # DELETE: 200 for the session (what clients expect), then 404 once it is gone; 404 for a made-up id.
    assert s.delete() == 200
    assert s.delete() == 404
    r = http.delete(server.url, headers={**MCP_HEADERS, "mcp-session-id": "no-such-session"})
    assert r.status_code == 404, r.text


def status(observer: RawSession) -> dict:
    reply = observer.call_tool("wf_admin__status", {})
    return reply["result"]["structuredContent"]["front"]


def test_sessions_are_bounded_and_their_followers_end(wf: Wf, http: httpx2.Client) -> None:
    server = serve(wf, "max_sessions = 6\nsession_idle_timeout_ms = 3000\n", admin=True)
    # The observer never says `initialized`, so it has no follower; it polls
    # often enough never to expire.
    observer = RawSession(http, server.url, {"X-Wf-Admin-Token": ADMIN_TOKEN})
    assert observer.initialize(follow=False).status_code == 200
    sessions = [RawSession(http, server.url) for _ in range(5)]
    for s in sessions:
        assert s.initialize().status_code == 200
    # Followers start when `initialized` is handled, just after its 202.
    wait_until(
        lambda: (f := status(observer)) and (f["http_sessions"], f["list_followers"]) == (6, 5),
        CLOSE_TIMEOUT,
        "six sessions, five of them followed",
        interval=0.2,
    )
    # Over the bound: a clear refusal.
    r = http.post(server.url, json=initialize_body(9), headers=MCP_HEADERS)
    assert r.status_code == 503, r.text
    assert (r.json()["id"], r.json()["error"]["code"]) == (9, -32000), r.text
    assert "server.max_sessions" in r.json()["error"]["message"]
    assert log_lines(server.log, "too many open sessions"), tail(server.log)
    # DELETE ends a session and its follower at once.
    for s in sessions[:2]:
        assert s.delete() == 200
    wait_until(
        lambda: (f := status(observer)) and (f["http_sessions"], f["list_followers"]) == (4, 3),
        CLOSE_TIMEOUT,
        "two sessions and their followers to end",
        interval=0.2,
    )
    # The other three expire, and their followers with them.
    wait_until(
        lambda: (f := status(observer)) and (f["http_sessions"], f["list_followers"]) == (1, 0),
        CLOSE_TIMEOUT,
        "idle sessions to expire",
        interval=0.5,
    )
    # Room again.
    assert RawSession(http, server.url).initialize().status_code == 200


def test_sessions_never_deleted_do_not_grow_memory(wf: Wf, http: httpx2.Client) -> None:
    server = serve(wf, "max_sessions = 50\n")
    pid = server.proc.pid
    opened = [RawSession(http, server.url) for _ in range(50)]
    for s in opened:
        assert s.initialize().status_code == 200
    before = rss_kib(pid)
    refused = 0
    for _ in range(500):
        refused += RawSession(http, server.url).initialize().status_code == 503
    assert refused == 500
    grown = rss_kib(pid) - before
    # 500 open sessions cost ~37 MB (74 KB each); refusals cost nothing lasting.
    assert grown < 8 * 1024, f"RSS grew by {grown} KiB over 500 refused sessions"
