"""Workflow runs against the stateful Rust fixture (source `fx`): the session
epoch check when the upstream dies mid-run, run-scoped leases versus the shared
persistent session, and cancelling a run.

Everything goes through the official `mcp` client on `wf serve` (planner tools
`wf_planner__*` and the proxied `fx__*` tools).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import UpstreamEvents, Wf, all_procs, descendants_of, proc_info, toml_config
from planner_support import fx_config, get_run, planner, tool_json, wait_node, wait_run

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
STATE_LOST = "upstream session restarted; state lost"


def now_ms() -> int:
    return int(time.time() * 1000)


def kill_fixture(pid: int) -> int:
    """SIGKILLs the fixture process `pid`; returns the time of the kill (ms since the epoch)."""
    assert proc_info(pid) is not None, f"fixture {pid} is not running"
    at = now_ms()
    os.kill(pid, signal.SIGKILL)
    return at


async def pid_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = proc_info(pid)
        if info is None:
            return True
        await anyio.sleep(0.05)
    return proc_info(pid) is None


LONG_MS = 600_000  # a call that never ends by itself within a test


def upstream_below_plugin_child(upstream_bin: Path) -> tuple[int, int]:
    """(wf's plugin child, the upstream below it), as this machine numbers them.
    The plugin runs in a PID namespace of its own below wf's child, so the pid an
    upstream reports (`fx__pid`) is the namespace's, not this machine's."""
    def exe(pid: int) -> str:
        try:
            return os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return ""

    for p in all_procs():
        if exe(p.pid) != str(upstream_bin):
            continue
        child, up = None, proc_info(p.ppid)
        while up is not None and up.pid > 1:
            if exe(up.pid).endswith("/wf-plugin-host"):
                child = up.pid  # the outermost wins: the one wf started
            up = proc_info(up.ppid)
        if child is not None:
            return child, p.pid
    raise AssertionError(f"no {upstream_bin.name} below a wf-plugin-host")


def gate_node(gate: Path, after: list[str]) -> dict[str, Any]:
    """Node `wait`: a slow call on a second fixture process (source `gate`) that ends
    when the file `gate` exists — when the test opens the gate, so it cannot end
    before the test has done its part, however slow the machine. Source `fx` is idle
    meanwhile."""
    return {"id": "wait", "use": "gate.slow", "args": {"ms": LONG_MS, "until": str(gate)}, "after": after}


def gated_config(wf: Wf, fixture_upstream_bin: Path, fx: UpstreamEvents) -> Path:
    """Sources `fx` (the fixture, with its event journal) and `gate` (another fixture)."""
    bin = str(fixture_upstream_bin)
    return wf.write_config(toml_config({"fx": {"command": bin, "args": fx.args()}, "gate": {"command": bin}}))


def no_success_after(nodes: dict[str, dict[str, Any]], killed_at: int) -> None:
    """Nothing ran on a fresh session silently: no node that started after the kill
    succeeded, and no fx node finished successfully after it."""
    late = [
        n
        for n in nodes.values()
        if n["status"] == "succeeded"
        and (
            (n["started_at"] or 0) >= killed_at
            or (n["capability"].startswith("fx.") and (n["finished_at"] or 0) >= killed_at)
        )
    ]
    assert late == [], f"nodes succeeded after the upstream was killed: {late}"


def incr_slow_incr(slow: dict[str, Any], sessions: dict[str, str] | None = None) -> dict[str, Any]:
    wf: dict[str, Any] = {
        "name": "epoch-check",
        "nodes": [
            {"id": "first", "use": "fx.increment"},
            {**slow, "id": "wait", "after": ["first"]},
            {"id": "second", "use": "fx.increment", "after": ["wait"]},
        ],
        "outputs": {"count": {"$ref": "nodes.second.output.count"}},
    }
    if sessions:
        wf["sessions"] = sessions
    return wf


async def test_upstream_killed_during_a_node_fails_the_run(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """increment → a 10-minute fx.slow → increment on the shared session; the fixture
    is SIGKILLed while the slow call runs upstream. The in-flight node fails (its
    session ended), the run fails, and the next increment never runs — not on a
    fresh session either."""
    config = fx_config(wf, fixture_upstream_bin, args=upstream_events.args())
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            pid = (await tool_json(c, "fx__pid"))["pid"]
            started = await planner(
                c, "run_workflow", {"workflow": incr_slow_incr({"use": "fx.slow", "args": {"ms": LONG_MS}}), "wait": False}
            )
            run_id = started["run_id"]
            assert started["status"] == "running"
            _, nodes = await wait_node(c, run_id, "wait", "running")
            assert nodes["first"]["status"] == "succeeded" and nodes["first"]["output"] == {"count": 1}
            assert (await upstream_events.wait_for(event="call", tool="slow"))["pid"] == pid
            killed_at = kill_fixture(pid)

            run, nodes = await wait_run(c, run_id)
            assert run["status"] == "failed", run
            assert nodes["wait"]["status"] == "failed"
            assert "upstream session ended" in nodes["wait"]["error"], nodes["wait"]
            assert run["error"].startswith('node "wait" (fx.slow) failed:'), run["error"]
            # `second` never started: it has no record at all (or a pending one).
            assert nodes.get("second", {"status": "pending"})["status"] == "pending", nodes
            no_success_after(nodes, killed_at)
            assert run["outputs"] is None
            # Both nodes ran on the session the run opened (epoch 1).
            assert nodes["first"]["epoch"] == nodes["wait"]["epoch"] == 1
            assert run["sessions"] == {"fx": {"expect_epoch": 1}}

            # The next proxied call starts a new upstream session: new process, counter 0.
            new_pid = (await tool_json(c, "fx__pid"))["pid"]
            assert new_pid != pid
            assert await tool_json(c, "fx__get_count") == {"count": 0}


@pytest.mark.parametrize(
    "between",
    [
        pytest.param("fx.slow", id="slow-node-continues"),
        pytest.param("gate.slow", id="between-fx-nodes"),
    ],
)
async def test_next_node_after_a_restart_reports_state_lost(
    wf: Wf, fixture_upstream_bin: Path, between: str, upstream_events: UpstreamEvents
) -> None:
    """The fixture dies after `first` built state and before `second` runs — during an
    fx.slow node whose failure the workflow tolerates (on_error: continue), or during
    a node of another source (the fx session is idle). `second` must not silently
    start a new upstream session: it fails with "upstream session restarted; state lost"."""
    gate = wf.root / "gate"
    wait = (
        {"use": "fx.slow", "args": {"ms": LONG_MS}, "on_error": "continue"}
        if between == "fx.slow"
        else gate_node(gate, ["first"])
    )
    config = gated_config(wf, fixture_upstream_bin, upstream_events)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            pid = (await tool_json(c, "fx__pid"))["pid"]
            await tool_json(c, "gate__get_count")
            started = await planner(c, "run_workflow", {"workflow": incr_slow_incr(wait), "wait": False})
            run_id = started["run_id"]
            await wait_node(c, run_id, "wait", "running")
            if between == "fx.slow":  # the call is running upstream
                await upstream_events.wait_for(event="call", tool="slow")
            killed_at = kill_fixture(pid)
            assert await pid_gone(pid), "the killed fixture was not reaped"
            gate.touch()

            run, nodes = await wait_run(c, run_id)
            assert run["status"] == "failed", (run, nodes)
            assert nodes["second"]["status"] == "failed", nodes
            assert STATE_LOST in nodes["second"]["error"], nodes["second"]
            # The run record keeps the typed code (wf-plugin-api 1.2), not only the text.
            assert nodes["second"]["error_code"] == "state_lost", nodes["second"]
            assert nodes["second"]["attempts"] == 1
            assert STATE_LOST in run["error"]
            no_success_after(nodes, killed_at)
            if between == "fx.slow":
                assert nodes["wait"]["status"] == "failed" and "upstream session ended" in nodes["wait"]["error"]
            else:
                assert nodes["wait"]["status"] == "succeeded"

            # The host reconnects for calls that do not depend on the old state.
            assert (await tool_json(c, "fx__pid"))["pid"] != pid
            assert await tool_json(c, "fx__get_count") == {"count": 0}


async def test_state_lost_even_when_a_proxied_call_reconnected_first(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """The fixture dies while the run waits on another source (the gate); a proxied
    call then reconnects (a new, live session, epoch 2) before the run's next fx
    node. That node must still fail: its state lived in epoch 1."""
    gate = wf.root / "gate"
    config = gated_config(wf, fixture_upstream_bin, upstream_events)
    workflow = incr_slow_incr(gate_node(gate, ["first"]))
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            pid = (await tool_json(c, "fx__pid"))["pid"]
            await tool_json(c, "gate__get_count")
            run_id = (await planner(c, "run_workflow", {"workflow": workflow, "wait": False}))["run_id"]
            await wait_node(c, run_id, "wait", "running")
            killed_at = kill_fixture(pid)
            assert await pid_gone(pid)
            # A proxied call in the meantime starts a fresh upstream session.
            new_pid = (await tool_json(c, "fx__pid"))["pid"]
            assert new_pid != pid
            run, nodes = await get_run(c, run_id)
            assert run["status"] == "running" and nodes["wait"]["status"] == "running", (run, nodes)

            gate.touch()
            run, nodes = await wait_run(c, run_id)
            assert run["status"] == "failed", (run, nodes)
            assert STATE_LOST in nodes["second"]["error"], nodes["second"]
            no_success_after(nodes, killed_at)
            # The fresh session was not touched by the failed node.
            assert await tool_json(c, "fx__get_count") == {"count": 0}
            assert (await tool_json(c, "fx__pid"))["pid"] == new_pid


async def test_a_lost_lease_fails_the_run(wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents) -> None:
    """With `sessions: {fx: run}` the run's own upstream process dies mid-run: the
    next node fails with state lost, and the shared session is unaffected."""
    gate = wf.root / "gate"
    workflow = {
        "name": "leased",
        "sessions": {"fx": "run"},
        "nodes": [
            {"id": "pid", "use": "fx.pid"},
            {"id": "first", "use": "fx.increment", "after": ["pid"]},
            gate_node(gate, ["first"]),
            {"id": "second", "use": "fx.increment", "after": ["wait"]},
        ],
    }
    config = gated_config(wf, fixture_upstream_bin, upstream_events)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            shared_pid = (await tool_json(c, "fx__pid"))["pid"]
            await tool_json(c, "gate__get_count")
            run_id = (await planner(c, "run_workflow", {"workflow": workflow, "wait": False}))["run_id"]
            _, nodes = await wait_node(c, run_id, "wait", "running")
            lease_pid = nodes["pid"]["output"]["pid"]
            assert lease_pid != shared_pid
            killed_at = kill_fixture(lease_pid)
            assert await pid_gone(lease_pid)
            gate.touch()
            run, nodes = await wait_run(c, run_id)
            assert run["status"] == "failed"
            assert STATE_LOST in nodes["second"]["error"], nodes["second"]
            no_success_after(nodes, killed_at)
            assert (await tool_json(c, "fx__pid"))["pid"] == shared_pid


async def test_state_lost_is_not_retried(wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents) -> None:
    """A node with retries still fails at once on a lost session (retrying on a fresh
    session would be the silent restart the epoch check prevents)."""
    gate = wf.root / "gate"
    workflow = {
        "name": "retrying",
        "nodes": [
            {"id": "first", "use": "fx.increment"},
            gate_node(gate, ["first"]),
            {"id": "second", "use": "fx.increment", "after": ["wait"], "retry": {"attempts": 3, "backoff_ms": 10}},
        ],
    }
    config = gated_config(wf, fixture_upstream_bin, upstream_events)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            pid = (await tool_json(c, "fx__pid"))["pid"]
            await tool_json(c, "gate__get_count")
            run_id = (await planner(c, "run_workflow", {"workflow": workflow, "wait": False}))["run_id"]
            await wait_node(c, run_id, "wait", "running")
            killed_at = kill_fixture(pid)
            assert await pid_gone(pid)
            gate.touch()
            run, nodes = await wait_run(c, run_id)
            assert run["status"] == "failed"
            assert STATE_LOST in nodes["second"]["error"] and nodes["second"]["attempts"] == 1, nodes["second"]
            no_success_after(nodes, killed_at)


def counting(sessions: dict[str, str] | None, pause_ms: int = 300) -> dict[str, Any]:
    """pid → increment → slow → increment → slow → increment, outputs the three counts."""
    wf: dict[str, Any] = {
        "name": "counting",
        "nodes": [
            {"id": "pid", "use": "fx.pid"},
            {"id": "i1", "use": "fx.increment", "after": ["pid"]},
            {"id": "s1", "use": "fx.slow", "args": {"ms": pause_ms}, "after": ["i1"]},
            {"id": "i2", "use": "fx.increment", "after": ["s1"]},
            {"id": "s2", "use": "fx.slow", "args": {"ms": pause_ms}, "after": ["i2"]},
            {"id": "i3", "use": "fx.increment", "after": ["s2"]},
        ],
        "outputs": {
            "pid": {"$ref": "nodes.pid.output.pid"},
            "counts": [
                {"$ref": "nodes.i1.output.count"},
                {"$ref": "nodes.i2.output.count"},
                {"$ref": "nodes.i3.output.count"},
            ],
        },
    }
    if sessions:
        wf["sessions"] = sessions
    return wf


async def run_concurrently(c: Client, workflow: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Starts `n` runs of `workflow` (wait=false), then polls each to its end."""
    ids = [(await planner(c, "run_workflow", {"workflow": workflow, "wait": False}))["run_id"] for _ in range(n)]
    runs = []
    for run_id in ids:
        run, _ = await wait_run(c, run_id)
        assert run["status"] == "succeeded", run
        runs.append(run)
    # They really overlapped in time.
    assert max(r["started_at"] for r in runs) < min(r["finished_at"] for r in runs), runs
    return runs


async def test_run_scoped_leases_keep_concurrent_runs_apart(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            shared_pid = (await tool_json(c, "fx__pid"))["pid"]
            await tool_json(c, "fx__increment", {"by": 100})

            # Two concurrent runs, each with its own upstream session (`sessions: {fx: run}`).
            leased = await run_concurrently(c, counting({"fx": "run"}), 2)
            assert [r["outputs"]["counts"] for r in leased] == [[1, 2, 3], [1, 2, 3]]
            lease_pids = {r["outputs"]["pid"] for r in leased}
            assert len(lease_pids) == 2 and shared_pid not in lease_pids
            for r in leased:
                assert r["sessions"]["fx"]["lease"], r["sessions"]
            assert leased[0]["sessions"]["fx"]["lease"] != leased[1]["sessions"]["fx"]["lease"]
            # A lease ends with its run: its upstream process is gone.
            for pid in lease_pids:
                assert await pid_gone(pid), f"lease process {pid} outlived its run"
            # The shared session was untouched.
            assert await tool_json(c, "fx__get_count") == {"count": 100}

            # The same two runs on the shared session trample each other's counter.
            shared = await run_concurrently(c, counting(None), 2)
            assert {r["outputs"]["pid"] for r in shared} == {shared_pid}
            all_counts = sorted(x for r in shared for x in r["outputs"]["counts"])
            assert all_counts == list(range(101, 107)), shared
            assert max(r["outputs"]["counts"][2] for r in shared) == 106
            assert await tool_json(c, "fx__get_count") == {"count": 106}
            assert (await tool_json(c, "fx__pid"))["pid"] == shared_pid


async def test_cancel_a_running_run(wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents) -> None:
    """cancel_run stops the run in the plugin (the node's call is dropped) and upstream:
    the fixture itself records `notifications/cancelled` for the node's request and
    abandons the 10-minute call; the shared session stays up."""
    workflow = {
        "name": "long",
        "nodes": [
            {"id": "mark", "use": "fx.increment"},
            {"id": "long", "use": "fx.slow", "args": {"ms": LONG_MS}, "after": ["mark"]},
            {"id": "after", "use": "fx.increment", "after": ["long"]},
        ],
    }
    config = fx_config(wf, fixture_upstream_bin, args=upstream_events.args())
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            pid = (await tool_json(c, "fx__pid"))["pid"]
            run_id = (await planner(c, "run_workflow", {"workflow": workflow, "wait": False}))["run_id"]
            await wait_node(c, run_id, "long", "running")
            call = await upstream_events.wait_for(event="call", tool="slow")

            # (Its reply is flagged is_error — a host bug pinned by
            # test_cancel_run_reply_is_not_an_error — so read the structured content directly.)
            # A reply at all (within the overall timeout) means it did not wait for the call.
            reply = await c.call_tool("wf_planner__cancel_run", {"run_id": run_id})
            assert reply.structured_content == {"run_id": run_id, "cancelled": True, "status": "cancelled"}

            # The cancellation reached the upstream, for that very request, on the shared session.
            cancelled = await upstream_events.wait_for(event="cancelled", request_id=call["request_id"])
            assert cancelled["pid"] == call["pid"] == pid
            await upstream_events.wait_for(event="slow_aborted", request_id=call["request_id"])

            run, nodes = await get_run(c, run_id)
            assert run["status"] == "cancelled" and run["finished_at"] is not None
            assert nodes["long"]["status"] == "cancelled" and nodes["long"]["finished_at"] is not None
            assert nodes["long"]["error"] == "the run was cancelled"
            assert nodes["mark"]["status"] == "succeeded"
            assert "after" not in nodes or nodes["after"]["status"] == "pending"
            assert (await planner(c, "list_runs", {"status": "cancelled"}))["runs"][0]["run_id"] == run_id

            # Cancelling again: not running any more.
            again = (await c.call_tool("wf_planner__cancel_run", {"run_id": run_id})).structured_content
            assert again["cancelled"] is False and again["status"] == "cancelled"

            # The host keeps serving, on the same upstream session (the slow call was
            # cancelled upstream, not by killing the session).
            assert (await tool_json(c, "fx__pid"))["pid"] == pid
            assert await tool_json(c, "fx__get_count") == {"count": 1}
            quick = await planner(
                c,
                "run_workflow",
                {"workflow": {"nodes": [{"id": "n", "use": "fx.increment"}], "outputs": {"c": {"$ref": "nodes.n.output.count"}}}},
            )
            assert quick["status"] == "succeeded" and quick["outputs"] == {"c": 2}
            assert not [e for e in upstream_events.read() if e["event"] == "slow_done"]


async def test_cancel_run_reply_is_not_an_error(wf: Wf, fixture_upstream_bin: Path) -> None:
    workflow = {"name": "long", "nodes": [{"id": "long", "use": "wf.std.sleep", "args": {"ms": 30000}}]}
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            run_id = (await planner(c, "run_workflow", {"workflow": workflow, "wait": False}))["run_id"]
            await wait_node(c, run_id, "long", "running")
            reply = await c.call_tool("wf_planner__cancel_run", {"run_id": run_id})
            assert reply.structured_content == {"run_id": run_id, "cancelled": True, "status": "cancelled"}
            # The cancellation succeeded: an MCP client must not see a failed tool call.
            assert not reply.is_error


async def test_cancelling_a_leased_run_closes_its_session(wf: Wf, fixture_upstream_bin: Path) -> None:
    workflow = {
        "name": "leased-long",
        "sessions": {"fx": "run"},
        "nodes": [
            {"id": "pid", "use": "fx.pid"},
            {"id": "long", "use": "fx.slow", "args": {"ms": 30000}, "after": ["pid"]},
        ],
    }
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            run_id = (await planner(c, "run_workflow", {"workflow": workflow, "wait": False}))["run_id"]
            _, nodes = await wait_node(c, run_id, "long", "running", timeout=10)
            lease_pid = nodes["pid"]["output"]["pid"]
            reply = await c.call_tool("wf_planner__cancel_run", {"run_id": run_id})
            assert reply.structured_content["status"] == "cancelled"
            assert await pid_gone(lease_pid), "the cancelled run's lease process is still running"
            _, nodes = await get_run(c, run_id)
            assert nodes["long"]["status"] == "cancelled"


async def test_a_failing_node_stops_the_other_branches(wf: Wf, fixture_upstream_bin: Path) -> None:
    """Independent branches run concurrently; when one fails, the run fails at once
    and the still-running nodes are cancelled (the run's reply comes within the
    overall timeout although its other branches would take 10 minutes)."""
    workflow = {
        "name": "branches",
        "nodes": [
            {"id": "long", "use": "fx.slow", "args": {"ms": LONG_MS}},
            {"id": "nap", "use": "wf.std.sleep", "args": {"ms": LONG_MS}},
            {"id": "pause", "use": "wf.std.sleep", "args": {"ms": 300}},
            {"id": "boom", "use": "wf.std.runtime_error", "args": {"code": "bad", "message": "stop"}, "after": ["pause"]},
        ],
    }
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            got = await c.call_tool("wf_planner__run_workflow", {"workflow": workflow})
            assert got.is_error and got.structured_content["status"] == "failed"
            assert "bad: stop" in got.structured_content["error"]
            _, nodes = await get_run(c, got.structured_content["run_id"])
            assert {k: v["status"] for k, v in nodes.items()} == {
                "long": "cancelled",
                "nap": "cancelled",
                "pause": "succeeded",
                "boom": "failed",
            }
            assert nodes["long"]["error"] == nodes["nap"]["error"] == "another node failed"
            # The shared session survived the cancelled call.
            assert await tool_json(c, "fx__slow", {"ms": 1}) == {"slept_ms": 1}


async def test_when_skips_a_node_and_its_dependents(wf: Wf, fixture_upstream_bin: Path) -> None:
    workflow = {
        "name": "conditional",
        "inputs": {"type": "object", "properties": {"go": {"type": "boolean"}}, "required": ["go"]},
        "nodes": [
            {"id": "inc", "use": "fx.increment", "when": {"$ref": "inputs.go"}},
            {"id": "after_inc", "use": "wf.std.passthrough", "args": {"value": {"$ref": "nodes.inc.output.count"}}},
            {"id": "always", "use": "wf.std.const", "args": {"value": "ok"}},
        ],
        "outputs": {"count": {"$ref": "nodes.after_inc.output.value"}, "always": {"$ref": "nodes.always.output.value"}},
    }
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            skipped = await planner(c, "run_workflow", {"workflow": workflow, "inputs": {"go": False}})
            assert skipped["status"] == "succeeded"
            assert skipped["outputs"] == {"count": None, "always": "ok"}
            assert {n["id"]: n["status"] for n in skipped["nodes"]} == {
                "inc": "skipped",
                "after_inc": "skipped",
                "always": "succeeded",
            }
            assert await tool_json(c, "fx__get_count") == {"count": 0}
            ran = await planner(c, "run_workflow", {"workflow": workflow, "inputs": {"go": True}})
            assert ran["outputs"] == {"count": 1, "always": "ok"}


async def test_node_timeout_and_retry(wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents) -> None:
    """timeout_ms fails a 10-minute node (the call is cancelled upstream and the session
    stays usable); on_error: continue records the failure and lets the run finish;
    retry re-runs a failing node."""
    workflow = {
        "name": "timeouts",
        "nodes": [
            {"id": "slow", "use": "fx.slow", "args": {"ms": LONG_MS}, "timeout_ms": 300, "on_error": "continue"},
            {"id": "next", "use": "fx.increment", "after": ["slow"]},
            {
                "id": "flaky",
                "use": "wf.std.runtime_error",
                "args": {"code": "x", "message": "always"},
                "retry": {"attempts": 3, "backoff_ms": 20},
                "on_error": "continue",
            },
        ],
        "outputs": {"slow": {"$ref": "nodes.slow.output"}, "count": {"$ref": "nodes.next.output.count"}},
    }
    config = fx_config(wf, fixture_upstream_bin, args=upstream_events.args())
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            got = await planner(c, "run_workflow", {"workflow": workflow})
            assert got["status"] == "succeeded", got
            assert "no result within 300 ms" in got["outputs"]["slow"]["error"]
            assert got["outputs"]["count"] == 1
            _, nodes = await get_run(c, got["run_id"])
            assert nodes["slow"]["status"] == "failed"
            assert nodes["flaky"]["status"] == "failed" and nodes["flaky"]["attempts"] == 3
            call = await upstream_events.wait_for(event="call", tool="slow")
            await upstream_events.wait_for(event="slow_aborted", request_id=call["request_id"])


def fixture_procs_below(pid: int, fixture_upstream_bin: Path) -> list[Any]:
    """The fixture server processes below `pid` now."""
    found = []
    for p in descendants_of(pid):
        try:
            exe = os.readlink(f"/proc/{p.pid}/exe")
        except OSError:
            continue
        if Path(exe) == fixture_upstream_bin.resolve() and p.state != "Z":
            found.append(p)
    return found


async def test_a_run_that_cannot_open_its_sessions_leaks_no_lease(wf: Wf, fixture_upstream_bin: Path) -> None:
    """Source `a` (leased) opens fine; source `b` answers discovery but refuses any
    later session (a wrapper that runs the fixture only once). The run fails
    before any node — and must close `a`'s lease."""
    marker = wf.root / "b-started-once"
    wrapper = wf.root / "b-once.sh"
    wrapper.write_text(
        f"#!/bin/sh\nif [ -e '{marker}' ]; then echo 'b refuses' >&2; exit 1; fi\n"
        f"touch '{marker}'\nexec '{fixture_upstream_bin}'\n"
    )
    wrapper.chmod(0o755)
    config = wf.write_config(
        toml_config({"a": {"command": str(fixture_upstream_bin)}, "b": {"command": str(wrapper), "connect_timeout_ms": 5000}})
    )
    workflow = {
        "name": "two-sources",
        "sessions": {"a": "run", "b": "run"},
        "nodes": [{"id": "pa", "use": "a.pid"}, {"id": "pb", "use": "b.pid"}],
    }
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            # Discovery of both sources is done (and its one-shot sessions closed).
            deadline = time.monotonic() + 20
            while not (marker.exists() and {"a__pid", "b__pid"} <= {t.name for t in (await c.list_tools()).tools}):
                assert time.monotonic() < deadline, "discovery of a and b did not finish"
                await anyio.sleep(0.1)
            deadline = time.monotonic() + 10
            while fixture_procs_below(server.proc.pid, fixture_upstream_bin):
                assert time.monotonic() < deadline, "discovery sessions did not close"
                await anyio.sleep(0.1)

            got = await c.call_tool("wf_planner__run_workflow", {"workflow": workflow})
            assert got.is_error and got.structured_content["status"] == "failed", got.structured_content
            assert "cannot open a session" in got.structured_content["error"]

            # `a`'s lease closes as the run fails: its process goes (waited for, up to 20 s).
            deadline = time.monotonic() + 20
            while (leaked := fixture_procs_below(server.proc.pid, fixture_upstream_bin)) and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert leaked == [], f"lease processes left running after the run failed: {leaked}"


async def test_a_plugin_child_restart_is_state_lost_too(wf: Wf, fixture_upstream_bin: Path) -> None:
    """Issue 32: the mcp plugin in a child of its own. The child (and with it
    the upstream) dies between two fx nodes, while a wf.std node sleeps; wf
    restarts the child, whose sessions start over. `second` must fail as
    state-lost, not run silently on the new child's fresh session."""
    text = toml_config({"fx": {"command": str(fixture_upstream_bin)}})
    text += '\n[plugins.wf-source-mcp]\nisolation = "process"\n'
    config = wf.write_config(text)
    wait = {"use": "wf.std.sleep", "args": {"ms": 3000}}
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await tool_json(c, "fx__pid")
            child, upstream = upstream_below_plugin_child(fixture_upstream_bin)
            started = await planner(c, "run_workflow", {"workflow": incr_slow_incr(wait), "wait": False})
            run_id = started["run_id"]
            await wait_node(c, run_id, "wait", "running")
            killed_at = kill_fixture(child)
            assert await pid_gone(child), "the killed plugin child was not reaped"

            run, nodes = await wait_run(c, run_id)
            assert run["status"] == "failed", (run, nodes)
            assert nodes["first"]["status"] == "succeeded", nodes
            assert nodes["second"]["status"] == "failed", nodes
            assert STATE_LOST in nodes["second"]["error"], nodes["second"]
            assert nodes["second"]["error_code"] == "state_lost", nodes["second"]
            no_success_after(nodes, killed_at)

            # The restarted child serves calls that do not depend on the old state.
            assert (await tool_json(c, "fx__get_count")) == {"count": 0}
            await tool_json(c, "fx__pid")
            assert upstream_below_plugin_child(fixture_upstream_bin)[1] != upstream
