"""Session scopes (`session = "shared" | "principal" | "client"` per source), with
the stateful Rust fixture upstream: each upstream session is its own process
with its own counter, so a session is told apart by the upstream's pid and its
state by the counter. Behind `wf serve --http` with two named principals
(alice, bob), driven by the official Python `mcp` client: `legacy` mode for
2025-11-25 clients (one `Mcp-Session-Id` each), `auto` for 2026-07-28
(stateless) clients, which hold a session through a `wf_session__open` handle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from conftest import Wf, call_outcome, proc_info, tail, wait_listed, wait_processes_gone_async
from sessions_support import (
    OP_TIMEOUT,
    SOURCE,
    client_as,
    count,
    fixture_source,
    increment,
    pid,
    sessions_config,
    tool_json,
)

pytestmark = pytest.mark.anyio


async def error_of(c: Any, name: str, args: dict[str, Any] | None = None, meta: Any = None) -> str:
    """The error text of a call that must fail (an MCP error or an isError result)."""
    try:
        result = await c.call_tool(name, args or {}, meta=meta)
    except MCPError as e:
        return f"{e.message} {json.dumps(e.data) if e.data is not None else ''}"
    assert result.is_error, f"{name} succeeded: {result}"
    return " ".join(getattr(b, "text", "") for b in result.content)


async def wait_log(server: Any, needle: str, timeout: float = 30) -> None:
    with anyio.move_on_after(timeout):
        while needle not in server.log.read_text(errors="replace"):
            await anyio.sleep(0.05)
        return
    pytest.fail(f"{needle!r} never appeared in wf's log:\n{tail(server.log)}")


async def test_client_scope_isolates_clients_and_principals(wf: Wf, fixture_upstream_bin: Path) -> None:
    """`session = "client"` over HTTP: each 2025-11-25 client (two of alice's,
    one of bob's) gets its own upstream session; A's state survives B's calls."""
    config = sessions_config(wf, {SOURCE: fixture_source(fixture_upstream_bin, session="client")})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    with anyio.fail_after(OP_TIMEOUT * 2):
        async with client_as(server, "alice") as a1, client_as(server, "alice") as a2, client_as(server, "bob") as b:
            await wait_listed(a1, f"{SOURCE}__increment")
            assert [await increment(a1) for _ in range(3)] == [1, 2, 3]
            assert await increment(a2) == 1
            assert await increment(b) == 1
            assert await increment(b) == 2
            # A's state survived the others' calls; each saw only its own.
            assert (await count(a1), await count(a2), await count(b)) == (3, 1, 2)
            pids = {await pid(a1), await pid(a2), await pid(b)}
            assert len(pids) == 3, f"clients shared an upstream process: {pids}"


async def test_the_default_over_http_is_one_shared_session(wf: Wf, fixture_upstream_bin: Path) -> None:
    """With no `session` set, HTTP clients share the source's one upstream
    session (one process, whatever the number of clients), and `wf check`
    says nothing about it for a source that does not look stateful."""
    config = sessions_config(wf, {SOURCE: fixture_source(fixture_upstream_bin)})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    with anyio.fail_after(OP_TIMEOUT * 2):
        async with client_as(server, "alice") as a, client_as(server, "bob") as b:
            await wait_listed(a, f"{SOURCE}__increment")
            assert await increment(a) == 1
            assert await increment(b) == 2, "the default scope gave bob a session of his own"
            assert await pid(a) == await pid(b)
    check = wf.run("check", "--config", str(config))
    assert "warning" not in check.stderr, check.stderr


async def test_principal_scope_shares_within_a_principal_only(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = sessions_config(wf, {SOURCE: fixture_source(fixture_upstream_bin, session="principal")})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    with anyio.fail_after(OP_TIMEOUT * 2):
        async with client_as(server, "alice") as a1, client_as(server, "alice") as a2, client_as(server, "bob") as b:
            await wait_listed(a1, f"{SOURCE}__increment")
            assert await increment(a1) == 1
            assert await increment(a2) == 2, "two connections of one principal did not share the session"
            assert await count(b) == 0, "another principal saw alice's state"
            assert await pid(a1) == await pid(a2) != await pid(b)


async def test_stateless_client_holds_a_session_with_a_handle(wf: Wf, fixture_upstream_bin: Path) -> None:
    """A 2026-07-28 client (mode="auto") has no protocol session: without a
    handle it uses its principal's session; with a `wf_session__open` handle in
    `_meta["wf/session"]` it keeps its own state across calls; another principal
    presenting that handle is refused; closing the handle ends the session."""
    config = sessions_config(wf, {SOURCE: fixture_source(fixture_upstream_bin, session="client")})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    with anyio.fail_after(OP_TIMEOUT * 2):
        async with client_as(server, "alice", mode="auto") as a, client_as(server, "alice", mode="auto") as a2:
            assert a.protocol_version == "2026-07-28", a.protocol_version
            await wait_listed(a, f"{SOURCE}__increment")
            await wait_listed(a2, f"{SOURCE}__increment")
            # Without a handle: the principal's session, shared by alice's stateless clients.
            assert await increment(a) == 1
            assert await increment(a2) == 2

            opened = await tool_json(a, "wf_session__open")
            handle = opened["handle"]
            meta = {"wf/session": handle}
            assert await increment(a, meta) == 1, "a new handle did not get a session of its own"
            assert await increment(a, meta) == 2
            assert await count(a, meta) == 2, "state was lost between two calls with the handle"
            assert await count(a) == 2, "the handle's calls leaked into the principal's session"
            held = await pid(a, meta)
            assert held != await pid(a)

            async with client_as(server, "bob", mode="auto") as b:
                await wait_listed(b, f"{SOURCE}__increment")
                refused = await error_of(b, f"{SOURCE}__get_count", meta=meta)
                assert "belongs to another principal" in refused, refused
                refused = await error_of(b, "wf_session__close", {"handle": handle})
                assert "belongs to another principal" in refused, refused
            unknown = await error_of(a, f"{SOURCE}__get_count", meta={"wf/session": "wfs_not-a-handle"})
            assert "unknown session handle" in unknown and "wf_session__open" in unknown, unknown

            before = proc_info(held)
            assert before is not None
            closed = await tool_json(a, "wf_session__close", {"handle": handle})
            assert closed["sessions_closed"] == 1, closed
            left = await wait_processes_gone_async([before], timeout=30)
            assert left == [], f"the handle's upstream outlived wf_session__close: {left}"
            after = await error_of(a, f"{SOURCE}__get_count", meta=meta)
            assert "unknown session handle" in after, after


async def test_idle_session_is_closed_with_its_process(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = sessions_config(
        wf, {SOURCE: fixture_source(fixture_upstream_bin, session="client", session_idle_ms=1500)}, admin_open=True, principals=False
    )
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    with anyio.fail_after(OP_TIMEOUT * 2):
        async with client_as(server, None) as c:
            await wait_listed(c, f"{SOURCE}__increment")
            assert await increment(c) == 1
            upstream = proc_info(await pid(c))
            assert upstream is not None
            sources = await tool_json(c, "wf_admin__list_sources")
            [row] = [s for s in sources["sources"] if s["name"] == SOURCE]
            [session] = row["sessions"]
            assert session["scope"] == "client" and session["principal"] == "local", session
            assert session["epoch"] == 1 and session["calls_in_flight"] == 0, session
            assert session["client"].startswith("http-") and session["age_ms"] >= session["idle_ms"], session
            status = await tool_json(c, "wf_admin__status")
            assert status["sessions"]["open"] == 1 and status["sessions"]["by_source"] == {SOURCE: 1}, status

            # Nothing more is called: after 1.5 s idle the session and its process end.
            await wait_log(server, 'reason="idle"')
            left = await wait_processes_gone_async([upstream], timeout=30)
            assert left == [], f"the idle session's upstream is still there: {left}"
            sources = await tool_json(c, "wf_admin__list_sources")
            [row] = [s for s in sources["sources"] if s["name"] == SOURCE]
            assert row["sessions"] == [], row["sessions"]
            # The next call opens a fresh session: the old state is gone.
            assert await count(c) == 0


async def test_max_sessions_is_refused_clearly(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = sessions_config(wf, {SOURCE: fixture_source(fixture_upstream_bin, session="client", max_sessions=2)})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    with anyio.fail_after(OP_TIMEOUT * 2):
        async with client_as(server, "alice") as a, client_as(server, "bob") as b, client_as(server, "bob") as b2:
            await wait_listed(a, f"{SOURCE}__increment")
            assert await increment(a) == 1
            assert await increment(b) == 1
            refused = await error_of(b2, f"{SOURCE}__increment")
            assert f'source "{SOURCE}" has 2 sessions open (max_sessions = 2)' in refused, refused
            # Refused without harm: the others keep their state, and the host stays up.
            assert (await count(a), await count(b)) == (1, 1)


async def test_client_disconnect_closes_its_sessions(wf: Wf, fixture_upstream_bin: Path) -> None:
    """A 2025-11-25 client that ends its session (the mcp client sends DELETE on
    exit) takes its upstream session and process with it."""
    config = sessions_config(wf, {SOURCE: fixture_source(fixture_upstream_bin, session="client")})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    with anyio.fail_after(OP_TIMEOUT * 2):
        async with client_as(server, "alice") as stays:
            await wait_listed(stays, f"{SOURCE}__increment")
            assert await increment(stays) == 1
            async with client_as(server, "alice") as leaves:
                assert await increment(leaves) == 1
                gone = proc_info(await pid(leaves))
                assert gone is not None
            await wait_log(server, 'reason="client gone"')
            left = await wait_processes_gone_async([gone], timeout=30)
            assert left == [], f"a departed client's upstream is still there: {left}"
            assert await count(stays) == 1, "the remaining client's session was closed too"


async def test_stdio_default_is_shared_and_client_scope_can_be_set(wf: Wf, fixture_upstream_bin: Path) -> None:
    """Over stdio the default stays `shared` (one desktop client): a workflow's
    call_capability and the proxied calls share the one session, and no
    per-client session is opened."""
    config = sessions_config(wf, {SOURCE: fixture_source(fixture_upstream_bin)}, principals=False)
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await wait_listed(c, f"{SOURCE}__increment")
            assert await increment(c) == 1
            out, err = await call_outcome(c, "wf_admin__list_sources")
            assert err is None, err
            [row] = [s for s in out.structured_content["sources"] if s["name"] == SOURCE]
            assert row["sessions"] == [] and row["session_epoch"] == 1, row
