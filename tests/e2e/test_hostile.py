"""A third-party plugin written as an attacker would write it (issue #48):
tests/fixtures/hostile, dropped into a plugin folder and run with wf's
defaults (not bundled, not pinned: a sandboxed child, no `[plugins.*]`
table). Each attack is refused, bounded or contained, and wf and its other
clients are served throughout (another client calls `wf.std` in a loop and
must see no error).

- memory: a tool that allocates and touches 6 GiB fails at the default
  bound with an error naming it; the child is restarted and serves again;
  processes it forks, each just under the per-process bound, are bounded
  together by the child's memory cgroup;
- CPU: a tool that never yields holds one worker of the plugin's runtime;
  the plugin's other calls are served meanwhile (they all end before it),
  `list_sources` reports the silent call, and its caller's deadline holds;
- processes: a `setsid` double-forked daemon dies with its child, on a
  restart, on wf's normal exit and on `kill -9` of wf; a fork bomb and a
  thread bomb stop at the default bound;
- the limits cannot be raised back from inside.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from admin_support import admin, sources_by_name, wait_for
from conftest import Wf, call_outcome, content_text, descendants_of, proc_info, wait_listed

pytestmark = pytest.mark.anyio

PLUGIN = "fixture-hostile"
# The defaults (host/src/plugins/process/spawn.rs) the operator manual states.
DEFAULT_MEMORY_MB = 2048
DEFAULT_MAX_PROCESSES = 512
CHILD_NICE = 10
# What the child's memory cgroup allows over memory_mb (host/src/plugins/process/cgroup.rs).
MEMORY_HEADROOM_MB = 256
# Restarts back off 250 ms doubling to 4 s: a generous bound for "comes back".
BACK_WITHIN_S = 30


def plugin_hosts(wf_pid: int) -> list[Any]:
    """wf's plugin-host processes that hold the hostile plugin's library."""
    out = []
    for p in descendants_of(wf_pid):
        try:
            if "fixture_hostile" in Path(f"/proc/{p.pid}/maps").read_text():
                out.append(p)
        except OSError:
            continue
    return out


def alive(pid: int) -> bool:
    """Alive and not a zombie."""
    info = proc_info(pid)
    return info is not None and info.state != "Z"


def session_of(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return int(raw[raw.rindex(")") + 2 :].split()[3])


async def tool(c: Client, name: str, arguments: dict[str, Any] | None = None) -> Any:
    result = await c.call_tool(f"hostile__{name}", arguments or {})
    assert not result.is_error, content_text(result.content)
    return result.structured_content


async def others_keep_being_served(c: Client, stop: anyio.Event, errors: list[str], counts: list[int]) -> None:
    """Another client calls another plugin's tool until `stop`; records any error."""
    n = 0
    while not stop.is_set():
        _, err = await call_outcome(c, "wf_std__const", {"value": n})
        if err is not None:
            errors.append(err)
        n += 1
        await anyio.sleep(0.02)
    counts.append(n)


class Bystander:
    """A second client served in the background for the length of a block."""

    def __init__(self, c: Client) -> None:
        self.c, self.stop, self.errors, self.counts = c, anyio.Event(), [], []

    async def __aenter__(self) -> Bystander:
        self.tg = anyio.create_task_group()
        await self.tg.__aenter__()
        self.tg.start_soon(others_keep_being_served, self.c, self.stop, self.errors, self.counts)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.stop.set()
        await self.tg.__aexit__(*exc)
        assert self.errors == [], f"another client saw errors meanwhile: {self.errors[:3]}"
        assert self.counts and self.counts[0] > 0, f"another client was not served meanwhile: {self.counts}"


async def ok_until_back(c: Client) -> None:
    async def probe() -> str | None:
        return (await call_outcome(c, "hostile__ok"))[1]

    await wait_for(probe, lambda err: err is None, "the hostile plugin serving again", BACK_WITHIN_S, 0.2)


def serve(wf: Wf, *extra: str) -> Any:
    wf.install("hostile")
    # No [plugins.fixture-hostile] table: the defaults are what is tested
    # (the admin tools over loopback HTTP, for list_sources).
    config = wf.write_config('[admin]\nover_http = "open"\n')
    return wf.start_http("127.0.0.1", None, "--config", str(config), *extra)


def memory_cgroup_possible() -> bool:
    """Whether this machine lets wf (in the tests' own cgroup) make memory
    cgroups: v1's memory hierarchy, or v2 with the controller delegated."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        num, controllers, path = line.split(":", 2)
        if num == "0" and controllers == "":
            for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                d = root / path.lstrip("/")
                control = d / "cgroup.subtree_control"
                if (root / "cgroup.controllers").exists() and control.exists():
                    if "memory" in control.read_text().split() and os.access(d, os.W_OK):
                        return True
        elif "memory" in controllers.split(","):
            if os.access(Path("/sys/fs/cgroup/memory") / path.lstrip("/"), os.W_OK):
                return True
    return False


def cgroup_dir(pid: int, controller: str) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        num, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup") / controller / path.lstrip("/")
        if num == "0" and controllers == "":
            for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                if (root / path.lstrip("/") / "memory.max").exists():
                    return root / path.lstrip("/")
    raise AssertionError(f"process {pid} is in no {controller} cgroup")


def memory_bound_bytes(d: Path) -> int:
    for name in ("memory.max", "memory.limit_in_bytes"):
        if (d / name).exists():
            return int((d / name).read_text().split()[0])
    raise AssertionError(f"no memory bound in {d}")


def limit(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith(name):
            return line[len(name) :].split()[0]
    raise AssertionError(f"no {name!r} in /proc/{pid}/limits")


def test_wf_plugins_shows_the_default_bounds(wf: Wf) -> None:
    wf.install("hostile")
    doc = wf.plugins_json("--config", str(wf.write_config("# defaults only\n")))
    [row] = [p for p in doc["loaded"] if p["name"] == PLUGIN]
    assert row["isolation"] == "process", row
    limits = row["process"]["limits"]
    assert limits["memory_mb"] == DEFAULT_MEMORY_MB and limits["max_processes"] == DEFAULT_MAX_PROCESSES, limits
    assert limits["nice"] == CHILD_NICE, limits
    assert "own PID namespace" in row["process"]["sandbox"], row["process"]
    # The operator raises or lowers them in the plugin's table.
    config = wf.write_config(f"[plugins.{PLUGIN}]\nmemory_mb = 300\nmax_processes = 64\n", "set.toml")
    doc = wf.plugins_json("--config", str(config))
    [row] = [p for p in doc["loaded"] if p["name"] == PLUGIN]
    assert row["process"]["limits"]["memory_mb"] == 300 and row["process"]["limits"]["max_processes"] == 64
    text = wf.run("plugins", *wf.plugin_args(), "--config", str(config))
    assert "limits: memory_mb 300, max_processes 64" in text.stdout, text.stdout


async def test_a_memory_hog_stops_at_the_default_bound_named_in_its_error(wf: Wf) -> None:
    server = serve(wf)
    async with wf.http_client(server) as c, wf.http_client(server) as other:
        await wait_listed(c, "hostile__hog")
        [host] = [p for p in plugin_hosts(server.proc.pid) if p.ppid != server.proc.pid]
        assert int(limit(host.pid, "Max data size")) == DEFAULT_MEMORY_MB << 20
        async with Bystander(other):
            with anyio.fail_after(120):
                result, err = await call_outcome(c, "hostile__hog", {"mib": 6144})
            assert err is not None, f"the hog succeeded: {content_text(result.content)}"
            assert f'plugin "{PLUGIN}" exited' in err and f"memory_mb = {DEFAULT_MEMORY_MB}" in err, err
            await ok_until_back(c)
        assert server.proc.poll() is None, "wf exited"


@pytest.mark.skipif(not memory_cgroup_possible(), reason="no memory cgroup wf may make on this machine")
async def test_forked_processes_are_bounded_together_by_the_memory_cgroup(wf: Wf) -> None:
    """RLIMIT_DATA bounds each process only: four forked children each
    touching 200 MiB under `memory_mb = 256` would hold 800 MiB. The child's
    memory cgroup (memory_mb + 256 MiB) bounds them together: the call fails
    naming the bound, the child is restarted, and wf and another client are
    served throughout."""
    mb, procs, each = 256, 4, 200
    wf.install("hostile")
    config = wf.write_config(f'[admin]\nover_http = "open"\n\n[plugins.{PLUGIN}]\nmemory_mb = {mb}\n')
    text = wf.run("plugins", *wf.plugin_args(), "--config", str(config)).stdout
    assert f"memory {mb + MEMORY_HEADROOM_MB} MiB together (memory cgroup)" in text, text
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server) as c, wf.http_client(server) as other:
        await wait_listed(c, "hostile__forkhog")
        [host] = [p for p in plugin_hosts(server.proc.pid) if p.ppid != server.proc.pid]
        assert int(limit(host.pid, "Max data size")) == mb << 20
        # The plugin's own bound, set in its cgroup (not the default it started with).
        assert memory_bound_bytes(cgroup_dir(host.pid, "memory")) == (mb + MEMORY_HEADROOM_MB) << 20
        async with Bystander(other):
            with anyio.fail_after(120):
                result, err = await call_outcome(c, "hostile__forkhog", {"procs": procs, "mib": each})
            assert err is not None, f"{procs} x {each} MiB went through: {content_text(result.content)}"
            assert f'plugin "{PLUGIN}" exited (out of memory' in err, err
            assert f"memory_mb = {mb}" in err and "memory cgroup" in err, err
            await ok_until_back(c)
        assert server.proc.poll() is None, "wf exited"
        # A share that fits the bound still goes through in the new child.
        seen = await tool(c, "forkhog", {"procs": 2, "mib": 64})
        assert seen["touched"] == 2, seen


def test_without_a_memory_cgroup_wf_says_so(wf: Wf) -> None:
    """Where wf may make no memory cgroup (here: switched off for the
    test), `wf plugins` and the log say that memory is bounded per process
    only."""
    wf.install("hostile")
    config = wf.write_config("# defaults only\n")
    out = wf.run(
        "plugins", *wf.plugin_args(), "--config", str(config), env={"WF_TEST_NO_MEMORY_CGROUP": "1"}
    )
    assert "memory NOT bounded together (no memory cgroup)" in out.stdout, out.stdout
    assert out.stderr.count("no memory cgroup") == 1, out.stderr


@pytest.mark.parametrize("progress", [False, True], ids=["silent", "after-a-progress-report"])
async def test_a_call_that_never_yields_does_not_starve_its_plugin(wf: Wf, progress: bool) -> None:
    server = serve(wf)
    async with wf.http_client(server) as c, wf.http_client(server) as d, wf.http_client(server) as other:
        await wait_listed(c, "hostile__spin")
        events: list[str] = []

        async def spinner() -> None:
            await tool(c, "spin", {"seconds": 12, "progress": progress})
            events.append("spin")

        async def oks() -> None:
            await anyio.sleep(0.5)
            for n in range(5):
                assert await tool(d, "ok") == "ok"
                events.append(f"ok{n}")

        async with Bystander(other), anyio.create_task_group() as tg:
            tg.start_soon(spinner)
            tg.start_soon(oks)
            # The spinning call says nothing for STALLED (5 s): reported.
            rows = await wait_for(
                lambda: sources_by_name(d),
                lambda r: bool(r["hostile"]["stalled_calls"]),
                "the silent call reported in list_sources",
                30,
                0.5,
            )
            [stalled] = rows["hostile"]["stalled_calls"]
            assert stalled["silent_ms"] >= 5000, stalled
        # Every other call of the plugin was served while one call held a worker.
        assert events == ["ok0", "ok1", "ok2", "ok3", "ok4", "spin"], events
        assert (await sources_by_name(d))["hostile"]["stalled_calls"] == []


async def test_the_callers_deadline_holds_while_a_call_never_yields(wf: Wf) -> None:
    server = serve(wf)
    async with wf.http_client(server) as c:
        await wait_listed(c, "hostile__spin")
        started = time.monotonic()
        with anyio.move_on_after(2) as scope:
            await tool(c, "spin", {"seconds": 20})
        waited = time.monotonic() - started
        assert scope.cancelled_caller if hasattr(scope, "cancelled_caller") else scope.cancel_called
        # Answered at its deadline, not when the plugin's code returns (20 s).
        assert waited < 10, f"the cancelled call took {waited:.1f} s"
        assert await tool(c, "ok") == "ok"
        rows = await sources_by_name(c)
        assert rows["hostile"]["calls_in_flight"] == 0, rows["hostile"]


async def daemon_pid(c: Client, wf_pid: int) -> int:
    pid = (await tool(c, "daemon"))["daemon"]
    assert pid > 0 and alive(pid), pid
    hosts = {p.pid for p in plugin_hosts(wf_pid)} - {pid}
    # It left the child's session: a process group kill alone would miss it.
    assert hosts and all(session_of(pid) != session_of(h) for h in hosts), "the daemon did not setsid"
    return pid


async def test_a_daemon_dies_with_its_child_on_a_restart(wf: Wf) -> None:
    server = serve(wf)
    async with wf.http_client(server) as c:
        await wait_listed(c, "hostile__daemon")
        pid = await daemon_pid(c, server.proc.pid)
        # The child ends (here: over its memory bound); the restart leaves nothing.
        _, err = await call_outcome(c, "hostile__hog", {"mib": 6144})
        assert err is not None
        await ok_until_back(c)
        assert not alive(pid), f"daemon {pid} outlived its child's restart"


@pytest.mark.parametrize("how", ["exit", "kill -9"])
async def test_a_daemon_does_not_outlive_wf(wf: Wf, how: str) -> None:
    server = serve(wf)
    async with wf.http_client(server) as c:
        await wait_listed(c, "hostile__daemon")
        pid = await daemon_pid(c, server.proc.pid)
        hosts = plugin_hosts(server.proc.pid)
    if how == "exit":
        server.proc.send_signal(signal.SIGTERM)
    else:
        server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not alive(pid), f"daemon {pid} outlived wf ({how})"
    assert not any(alive(h.pid) for h in hosts)


@pytest.mark.parametrize("threads", [False, True])
async def test_a_fork_bomb_stops_at_the_default_bound(wf: Wf, threads: bool) -> None:
    server = serve(wf)
    async with wf.http_client(server) as c, wf.http_client(server) as other:
        await wait_listed(c, "hostile__forks")
        async with Bystander(other):
            with anyio.fail_after(120):
                # Four times the bound: enough to see it, not a machine's worth.
                seen = await tool(c, "forks", {"max": 4 * DEFAULT_MAX_PROCESSES, "threads": threads})
        assert seen["errno"] == errno.EAGAIN, seen
        assert 0 < seen["started"] < DEFAULT_MAX_PROCESSES, seen
        assert await tool(c, "ok") == "ok"


async def test_the_limits_cannot_be_raised_from_inside(wf: Wf) -> None:
    server = serve(wf)
    async with wf.http_client(server) as c:
        await wait_listed(c, "hostile__escape")
        me = await tool(c, "whoami")
        assert me["nice"] == CHILD_NICE, me
        seen = await tool(c, "escape")
        assert seen["raise_data_limit"] == {"ok": False, "errno": errno.EPERM}, seen
        assert seen["raise_priority"]["ok"] is False, seen
        assert (await tool(c, "whoami"))["nice"] == CHILD_NICE


async def test_a_child_that_stops_reading_is_killed_and_deadlines_hold_meanwhile(wf: Wf) -> None:
    """`freeze` spins every worker of the plugin's runtime, so nothing reads
    its call lane: wf's writes back up, and after 5 s without progress the
    child is killed (and restarted). Meanwhile a caller's deadline holds."""
    server = serve(wf)
    async with wf.http_client(server) as c, wf.http_client(server) as d, wf.http_client(server) as other:
        await wait_listed(c, "hostile__freeze")
        [first] = [p for p in descendants_of(server.proc.pid) if p.ppid == server.proc.pid]
        errors: list[str | None] = []

        async def call(client: Client, name: str, arguments: dict[str, Any]) -> None:
            _, err = await call_outcome(client, f"hostile__{name}", arguments)
            errors.append(err)

        async with Bystander(other):
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, c, "freeze", {"seconds": 120})
                    await anyio.sleep(1)
                    # A call whose caller gives up after 2 s is answered then.
                    started = time.monotonic()
                    with anyio.move_on_after(2):
                        await d.call_tool("hostile__ok", {})
                    assert time.monotonic() - started < 10
                    # Calls pile up in the unread socket until wf's writes stall.
                    for _ in range(24):
                        tg.start_soon(call, d, "ok", {"pad": "x" * (256 << 10)})
        assert len(errors) == 25 and all(e is not None and f'plugin "{PLUGIN}"' in e for e in errors), errors[:3]
        assert any("stopped reading its socket for 5 s and was killed" in (e or "") for e in errors), errors[:3]
        await ok_until_back(c)
        after = [p for p in descendants_of(server.proc.pid) if p.ppid == server.proc.pid]
        assert len(after) == 1 and after[0].pid != first.pid, (first, after)
