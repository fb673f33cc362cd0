"""Upstream failures and process lifecycle of the `mcp` source plugin, through wf.

An upstream that dies between calls (SIGKILL) or while answering (the fixture's
`crash` tool) costs at most the call in flight — with an error that names the
source — and the next call runs on a fresh session. wf never leaves a child
process behind (neither running nor a zombie) when it exits, whether its stdio
client goes away or it gets SIGTERM. Upstreams that are dead at start or slow to
start delay neither wf's start nor the other sources.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.client.stdio
import pytest
from mcp import Client

from conftest import (
    ProcInfo,
    Wf,
    all_prompts,
    all_resources,
    all_tools,
    call_outcome,
    children_of,
    content_text,
    descendants_of,
    free_port,
    proc_info,
    tail,
    toml_config,
    wait_processes_gone,
    wait_processes_gone_async,
)

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 30
# How long a dead process may take to be reaped / a stopped wf's children to go.
REAP_TIMEOUT = 5.0
# Timeouts a host must not wait out in the slow/dead upstream tests (seconds).
GRACE_S = 120
# The Python stdio client waits this long after closing wf's stdin before it
# escalates to SIGTERM (mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT, 2 s by
# default); the test that checks wf exits by itself raises it to this.
CLIENT_STDIN_GRACE = 60.0

FRONTS = [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto")]

# The process checks read /proc (pids, parents, zombie state, start times).
needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


@pytest.fixture(params=FRONTS, ids=[f"wf-{t}-{m}" for t, m in FRONTS])
def front(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


def fx(fixture_upstream_bin: Path, *args: str) -> dict[str, Any]:
    return {"command": str(fixture_upstream_bin), "args": list(args)}


async def structured(c: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    result = await c.call_tool(tool, arguments or {})
    assert not result.is_error, f"{tool}: {content_text(result.content)}"
    assert result.structured_content is not None, result.content
    return result.structured_content


async def fx_pid(c: Client) -> int:
    return int((await structured(c, "fx__pid"))["pid"])


async def wait_dead(pid: int, timeout: float = REAP_TIMEOUT) -> None:
    """Waits until `pid` no longer runs (gone, or a zombie waiting for its parent)."""
    deadline = time.monotonic() + timeout
    while (info := proc_info(pid)) is not None and info.state != "Z":
        if time.monotonic() > deadline:
            pytest.fail(f"process {pid} still runs {timeout}s after SIGKILL")
        await anyio.sleep(0.02)


def assert_session_ended_error(text: str | None, source: str = "fx") -> None:
    assert text is not None
    assert f'source "{source}"' in text, f"error does not name the source {source!r}: {text}"
    assert "session ended" in text, f"error does not say the upstream session ended: {text}"


# --------------------------------------------------------------------------- upstream failures


@needs_proc
async def test_killed_upstream_is_replaced_by_a_fresh_session(
    wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]
) -> None:
    config = wf.write_config(toml_config({"fx": fx(fixture_upstream_bin)}))
    async with wf.client(*front, "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            old_pid = await fx_pid(c)
            assert (await structured(c, "fx__increment", {"by": 2})) == {"count": 2}
            old = proc_info(old_pid)
            assert old is not None

            os.kill(old_pid, signal.SIGKILL)
            await wait_dead(old_pid)

            # The call right after: wf may notice the dead session first (and succeed on a
            # new one) or fail this call with an error naming the source.
            result, error = await call_outcome(c, "fx__pid")
            if error is not None:
                assert_session_ended_error(error)
            else:
                assert result.structured_content["pid"] != old_pid

            new_pid = await fx_pid(c)
            assert new_pid != old_pid
            # Fresh session, fresh upstream state.
            assert (await structured(c, "fx__get_count")) == {"count": 0}
            assert (await structured(c, "fx__increment")) == {"count": 1}
            assert await fx_pid(c) == new_pid

            # wf reaped the killed upstream (no zombie) while still running.
            left = await wait_processes_gone_async([old], REAP_TIMEOUT)
            assert not left, f"killed upstream not reaped by wf: {left}"


@needs_proc
async def test_crashing_upstream_fails_the_call_and_wf_keeps_serving(
    wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]
) -> None:
    config = wf.write_config(toml_config({"fx": fx(fixture_upstream_bin)}))
    async with wf.client(*front, "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            old_pid = await fx_pid(c)
            await structured(c, "fx__increment")
            old = proc_info(old_pid)
            assert old is not None

            result, error = await call_outcome(c, "fx__crash")
            assert error is not None, f"fx__crash succeeded: {result}"
            assert_session_ended_error(error)

            # The host keeps serving: the builtins, and fx on a new session.
            passed = await c.call_tool("wf_std__passthrough", {"value": {"still": "up"}})
            assert passed.structured_content == {"value": {"still": "up"}}
            new_pid = await fx_pid(c)
            assert new_pid != old_pid
            assert (await structured(c, "fx__get_count")) == {"count": 0}
            echoed = await c.call_tool("fx__echo", {"message": "back"})
            assert content_text(echoed.content) == "back"

            left = await wait_processes_gone_async([old], REAP_TIMEOUT)
            assert not left, f"crashed upstream not reaped by wf: {left}"


# --------------------------------------------------------------------------- no leftovers


def upstream_config(wf: Wf, fixture_upstream_bin: Path, everything_bin: Path) -> Path:
    """Two stdio upstreams: the fixture and server-everything (a node process)."""
    return wf.write_config(
        toml_config({"fx": fx(fixture_upstream_bin), "ev": {"command": str(everything_bin)}})
    )


async def start_both_runtimes(c: Client) -> int:
    """Makes wf start both persistent sessions; returns the fixture's pid."""
    # server-everything (node) may take longer than the startup grace to be
    # discovered on a loaded machine: wait for its tools, not for a duration.
    with anyio.fail_after(OP_TIMEOUT * 2):
        while "ev__echo" not in {t.name for t in await all_tools(c)}:
            await anyio.sleep(0.1)
    pid = await fx_pid(c)
    echoed = await c.call_tool("ev__echo", {"message": "hi"})
    assert not echoed.is_error, content_text(echoed.content)
    return pid


def snapshot_children(wf_pid: int, fixture_pid: int) -> list[ProcInfo]:
    tree = descendants_of(wf_pid)
    pids = {p.pid for p in tree}
    assert fixture_pid in pids, f"fixture {fixture_pid} is not below wf {wf_pid}: {tree}"
    direct = [p for p in tree if p.ppid == wf_pid and p.state != "Z"]
    # The fixture's session and server-everything's (discovery sessions are closed by now).
    assert len(direct) >= 2, f"expected both upstream sessions as children of wf: {tree}"
    zombies = [p for p in tree if p.state == "Z"]
    assert not zombies, f"zombie children of a running wf: {zombies}"
    return tree


@needs_proc
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_wf_leaves_no_process_behind(
    wf: Wf, fixture_upstream_bin: Path, everything_bin: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client waits this long for wf to exit by itself after closing its stdin
    # before it sends SIGTERM: a close within that time is one wf did on its own.
    monkeypatch.setattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", CLIENT_STDIN_GRACE)
    config = upstream_config(wf, fixture_upstream_bin, everything_bin)
    async with wf.client("stdio", mode, "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            fixture_pid = await start_both_runtimes(c)
        wf_info = proc_info(proc_info(fixture_pid).ppid)  # type: ignore[union-attr]
        assert wf_info is not None
        assert Path(f"/proc/{wf_info.pid}/exe").resolve() == wf.bin.resolve(), "the fixture's parent is not wf"
        tree = snapshot_children(wf_info.pid, fixture_pid)
        closing = time.monotonic()
    closed_in = time.monotonic() - closing

    left = wait_processes_gone([wf_info, *tree], REAP_TIMEOUT)
    assert not left, f"left behind after the stdio client closed (Z = zombie): {left}"
    assert not children_of(wf_info.pid), "processes whose parent is the exited wf"
    # wf stops by itself when its client closes stdin (operator manual): the client
    # never had to escalate to SIGTERM.
    assert closed_in < CLIENT_STDIN_GRACE, f"wf took {closed_in:.2f}s to exit after stdin closed"
    assert "shutting down" in wf.logs[-1].read_text()


@needs_proc
@pytest.mark.parametrize("connected", [False, True], ids=["client-gone", "client-connected"])
async def test_http_wf_sigterm_leaves_no_process_behind(
    wf: Wf, fixture_upstream_bin: Path, everything_bin: Path, connected: bool
) -> None:
    """SIGTERM stops `wf serve --http` cleanly (exit 0) and ends every upstream child,
    whether or not a client is still connected."""
    config = upstream_config(wf, fixture_upstream_bin, everything_bin)
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    wf_pid = server.proc.pid
    tree: list[ProcInfo] = []

    async def sigterm_and_wait() -> int:
        server.proc.send_signal(signal.SIGTERM)
        try:
            return await anyio.to_thread.run_sync(lambda: server.proc.wait(timeout=10))
        except subprocess.TimeoutExpired:
            pytest.fail(f"wf serve --http still runs 10s after SIGTERM:\n{tail(server.log)}")

    code: int | None = None
    async with wf.http_client(server, "auto") as c:
        with anyio.fail_after(OP_TIMEOUT):
            fixture_pid = await start_both_runtimes(c)
        assert proc_info(fixture_pid).ppid == wf_pid  # type: ignore[union-attr]
        tree = snapshot_children(wf_pid, fixture_pid)
        if connected:
            code = await sigterm_and_wait()
    if not connected:
        code = await sigterm_and_wait()

    assert code == 0, f"wf exited {code} on SIGTERM:\n{tail(server.log)}"
    left = wait_processes_gone(tree, REAP_TIMEOUT)
    assert not left, f"left behind after SIGTERM (Z = zombie): {left}"
    assert not children_of(wf_pid)


# --------------------------------------------------------------------------- dead and slow upstreams


async def test_dead_upstreams_at_start_do_not_stop_wf(wf: Wf, fixture_upstream_bin: Path) -> None:
    """A command that does not exist and a URL nobody listens on: wf still starts,
    serves wf.std and the healthy source, without waiting for the dead ones. The
    waits a host could wrongly sit out (startup grace, live-list timeout) are set to
    GRACE_S, so answering within a quarter of that shows none was waited out."""
    config = wf.write_config(
        toml_config(
            {
                "gone": {"command": "/nonexistent/wf-e2e-no-such-server"},
                "nohttp": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
                "fx": fx(fixture_upstream_bin),
            },
            server={"startup_grace_ms": GRACE_S * 1000, "live_list_timeout_ms": GRACE_S * 1000},
        )
    )
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(GRACE_S / 4):
            tools = {t.name for t in await all_tools(c)}
        assert {"wf_std__passthrough", "fx__echo", "fx__increment"} <= tools, sorted(tools)
        assert not [t for t in tools if t.startswith(("gone__", "nohttp__"))], sorted(tools)

        with anyio.fail_after(GRACE_S / 4):
            echoed = await c.call_tool("fx__echo", {"message": "alive"})
            assert content_text(echoed.content) == "alive"
            passed = await c.call_tool("wf_std__passthrough", {"value": 7})
            assert passed.structured_content == {"value": 7}
            resources = {str(r.uri) for r in await all_resources(c)}
            prompts = {p.name for p in await all_prompts(c)}
        assert {"fixture://counter", "wf://std/reference"} <= resources, sorted(resources)
        assert {"fx__greet", "wf_std__author_workflow"} <= prompts, sorted(prompts)

        result, error = await call_outcome(c, "gone__echo", {"message": "x"})
        assert error is not None and "gone__echo" in error, (result, error)


async def test_slow_upstream_delays_neither_start_nor_other_sources(wf: Wf, fixture_upstream_bin: Path) -> None:
    """`slow` cannot speak MCP until the test opens its gate (a script that waits for a
    file); the startup grace is 3 s. wf answers its client, lists without `slow` once
    the grace is over, and serves `fast`; after the gate opens, `slow` is listed. The
    timeouts wf could wrongly wait out for `slow` are GRACE_S, far beyond the bounds."""
    gate = wf.root / "slow-gate"
    script = wf.root / "slow.sh"
    script.write_text(f'#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.05; done\nexec "{fixture_upstream_bin}"\n')
    script.chmod(0o755)
    long_ms = GRACE_S * 1000
    config = wf.write_config(
        toml_config(
            {"slow": {"command": str(script), "connect_timeout_ms": long_ms}, "fast": fx(fixture_upstream_bin)},
            server={"startup_grace_ms": 3000, "discovery_timeout_ms": long_ms},
        )
    )
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        # Connected (initialize answered) while `slow` cannot answer at all.
        # The first list waits (up to the 3 s grace) for discovery, then answers without `slow`.
        with anyio.fail_after(GRACE_S / 4):
            first = {t.name for t in await all_tools(c)}
        assert {"fast__echo", "fast__increment", "wf_std__passthrough"} <= first, sorted(first)
        assert not [t for t in first if t.startswith("slow__")], sorted(first)

        with anyio.fail_after(GRACE_S / 4):
            echoed = await c.call_tool("fast__echo", {"message": "not waiting for slow"})
        assert content_text(echoed.content) == "not waiting for slow"

        # Once the slow upstream speaks, a later list has its tools.
        gate.touch()
        later: set[str] = set()
        with anyio.fail_after(OP_TIMEOUT):
            while "slow__echo" not in later:
                await anyio.sleep(0.1)
                later = {t.name for t in await all_tools(c)}
        assert {f"slow__{t}" for t in ("echo", "increment", "pid")} <= later, sorted(later)
        assert {"fast__echo", "wf_std__passthrough"} <= later
