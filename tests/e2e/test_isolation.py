"""Process isolation (issue 32, docs/operator-manual.md "Plugin isolation"):
a plugin that is not bundled with wf runs in `wf-plugin-host`, a supervised
child of its own. The fixture plugin tests/fixtures/crashy has tools that
segfault, abort(), exit(0) mid-call, allocate without bound and spin.

Proven from outside, against a real `wf serve --http` and the official
`mcp` client: wf stays up, the crashing call gets an error naming the
plugin, two other clients are served without error meanwhile, the plugin
comes back and serves again; its limits stop the allocator and the spinner
while wf's RSS stays flat; `kill -9` of wf leaves no child behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from admin_support import sources_by_name, wait_for, write_atomic
from conftest import (
    Wf,
    call_outcome,
    children_of,
    content_text,
    descendants_of,
    proc_info,
    wait_listed,
    wait_processes_gone,
    wait_processes_gone_async,
)

pytestmark = pytest.mark.anyio

PLUGIN = "fixture-crashy"
# host/src/plugins/process/supervisor.rs: crashes restarted before it gives up.
MAX_CRASHES_IN_A_ROW = 5
# Restarts back off 250 ms doubling (host/src/plugins/process/supervisor.rs):
# a generous bound for "comes back".
BACK_WITHIN_S = 30


def plugin_children(wf_pid: int) -> list[Any]:
    """wf's wf-plugin-host children now: one per plugin (each the outer
    process of its child: the plugin runs two levels below, in a PID
    namespace, host/src/plugins/process/contain.rs)."""
    out = []
    for p in children_of(wf_pid):
        try:
            exe = os.readlink(f"/proc/{p.pid}/exe")
        except OSError:
            continue
        if exe.endswith("/wf-plugin-host"):
            out.append(p)
    return out


def crashy_children(wf_pid: int) -> list[Any]:
    """wf's wf-plugin-host children whose plugin is the crashy one."""
    out = []
    for p in plugin_children(wf_pid):
        for d in descendants_of(p.pid):
            try:
                maps = Path(f"/proc/{d.pid}/maps").read_text()
            except OSError:
                continue
            if "fixture_crashy" in maps:
                out.append(p)
                break
    return out


def plugin_host(child_pid: int) -> int:
    """The process below wf's child `child_pid` that runs the plugin."""
    for d in descendants_of(child_pid):
        with contextlib.suppress(OSError):
            if "fixture_crashy" in Path(f"/proc/{d.pid}/maps").read_text():
                return d.pid
    raise AssertionError(f"no plugin host below {child_pid}")


def data_limit(child_pid: int) -> int:
    """The soft RLIMIT_DATA of the plugin below wf's child `child_pid`, in bytes."""
    pid = plugin_host(child_pid)
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max data size"):
            return int(line.split()[3])
    raise AssertionError(f"no data limit for {pid}")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def config_text(table: dict[str, Any] | None = None, crashy_enabled: bool = True) -> str:
    lines = []
    if table:
        lines.append(f'[plugins."{PLUGIN}"]')
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    if not crashy_enabled:
        lines += ["[sources.crashy]", 'kind = "crashy"', "enabled = false"]
    return "\n".join(lines) + "\n"


def config(wf: Wf, table: dict[str, Any] | None = None) -> Path:
    return wf.write_config(config_text(table))


async def echo_until_back(c: Client) -> str:
    """Calls crashy__echo until the restarted plugin answers."""

    async def probe() -> str | None:
        _, err = await call_outcome(c, "crashy__echo", {"text": "back"})
        return err

    await wait_for(probe, lambda err: err is None, "the plugin serving again", BACK_WITHIN_S, 0.2)
    result = await c.call_tool("crashy__echo", {"text": "back"})
    return content_text(result.content)


async def others_keep_being_served(c: Client, stop: anyio.Event, errors: list[str], counts: list[int]) -> None:
    """Calls another source's tool in a loop until `stop`; records any error."""
    n = 0
    while not stop.is_set():
        _, err = await call_outcome(c, "wf_std__const", {"value": n})
        if err is not None:
            errors.append(err)
        n += 1
        await anyio.sleep(0.01)
    counts.append(n)


@pytest.mark.parametrize(("tool", "how"), [("segfault", "signal 11"), ("abort", "signal 6"), ("exit", "status 0")])
async def test_a_crash_costs_only_that_plugin(wf: Wf, tool: str, how: str) -> None:
    wf.install("crashy")
    server = wf.start_http("127.0.0.1", None, "--config", str(config(wf)))
    async with wf.http_client(server) as c, wf.http_client(server) as a, wf.http_client(server) as b:
        await wait_listed(c, "crashy__echo")
        children = plugin_children(server.proc.pid)
        assert len(children) == 1, f"one child for the one process-mode plugin: {children}"
        first = await c.call_tool("crashy__echo", {"text": "hi"})
        assert content_text(first.content) == "hi"

        stop, errors, counts = anyio.Event(), [], []
        async with anyio.create_task_group() as tg:
            tg.start_soon(others_keep_being_served, a, stop, errors, counts)
            tg.start_soon(others_keep_being_served, b, stop, errors, counts)
            await anyio.sleep(0.2)
            with anyio.fail_after(10):
                _, err = await call_outcome(c, f"crashy__{tool}")
            assert err is not None, f"{tool}: the call succeeded"
            assert f'plugin "{PLUGIN}" exited ({how}' in err, err
            assert await echo_until_back(c) == "back"
            stop.set()
        assert errors == [], f"other clients saw errors during the crash: {errors[:3]}"
        assert all(n > 5 for n in counts), f"other clients were not served meanwhile: {counts}"
        assert server.proc.poll() is None, "wf exited"
        after = plugin_children(server.proc.pid)
        assert len(after) == 1 and after[0].pid != children[0].pid, f"restarted child: {children} -> {after}"


async def test_memory_limit_stops_the_allocator_and_wf_stays_flat(wf: Wf) -> None:
    wf.install("crashy")
    server = wf.start_http("127.0.0.1", None, "--config", str(config(wf, {"memory_mb": 256})))
    async with wf.http_client(server) as c:
        await wait_listed(c, "crashy__echo")
        await c.call_tool("crashy__echo", {"text": "warm"})
        before = rss_kb(server.proc.pid)
        with anyio.fail_after(60):
            _, err = await call_outcome(c, "crashy__alloc")
        assert err is not None and f'plugin "{PLUGIN}" exited' in err, err
        after = rss_kb(server.proc.pid)
        # The child allocated 256 MiB before its limit stopped it; wf grew by
        # no more than noise.
        assert after - before < 32 * 1024, f"wf's RSS grew from {before} kB to {after} kB"
        assert await echo_until_back(c) == "back"


async def test_cpu_limit_stops_the_spinner(wf: Wf) -> None:
    wf.install("crashy")
    server = wf.start_http("127.0.0.1", None, "--config", str(config(wf, {"cpu_seconds": 2})))
    async with wf.http_client(server) as c:
        await wait_listed(c, "crashy__echo")
        with anyio.fail_after(30):
            _, err = await call_outcome(c, "crashy__spin")
        # RLIMIT_CPU: SIGXCPU at the soft limit (SIGKILL at the hard one).
        assert err is not None and f'plugin "{PLUGIN}" exited (signal' in err, err
        assert "SIGXCPU" in err or "SIGKILL" in err, err
        assert await echo_until_back(c) == "back"


async def test_the_child_gets_nothing_of_wfs(wf: Wf) -> None:
    """Cleared environment (a fixed PATH and its own HOME, nothing of wf's),
    no descriptor of wf's but stdio and its two sockets, its own process group."""
    wf.install("crashy")
    server = wf.start_http("127.0.0.1", None, "--config", str(config(wf)), env={"WF_SECRET_FOR_TEST": "s3cret"})
    async with wf.http_client(server) as c:
        await wait_listed(c, "crashy__whoami")
        seen = json.loads(content_text((await c.call_tool("crashy__whoami", {})).content))
        assert seen["env"] == ["HOME", "PATH"], seen["env"]
        # Whatever the child has open beyond stdio it opened itself: no
        # socket, database or file of wf's (fds are compared by what they
        # point to; a socket's inode names its end).
        assert any(f.startswith("3=socket:") for f in seen["fds"]), seen["fds"]
        assert any(f.startswith("4=socket:") for f in seen["fds"]), "the call lane: " + str(seen["fds"])
        theirs = {f.split("=", 1)[1] for f in seen["fds"] if int(f.split("=")[0]) > 2}
        ours = set()
        for fd in os.listdir(f"/proc/{server.proc.pid}/fd"):
            with contextlib.suppress(OSError):
                ours.add(os.readlink(f"/proc/{server.proc.pid}/fd/{fd}"))
        # (`anon_inode:[eventpoll]` names no instance: every runtime has one.)
        shared = {f for f in theirs & ours if not f.startswith("anon_inode:")} - {"/dev/null"}
        assert shared == set(), f"inherited from wf: {shared}"
        assert not any(str(wf.state_dir) in f for f in theirs), theirs
        # The plugin runs in the process group of the child wf started (the
        # pid wf knows), not in wf's.
        [child] = plugin_children(server.proc.pid)
        assert os.getpgid(seen["pid"]) == child.pid, "not in its child's process group"
        assert os.getpgid(seen["pid"]) != os.getpgid(server.proc.pid)


async def test_kill_9_of_wf_leaves_no_plugin_child(wf: Wf) -> None:
    wf.install("crashy")
    server = wf.start_http("127.0.0.1", None, "--config", str(config(wf)))
    async with wf.http_client(server) as c:
        await wait_listed(c, "crashy__echo")
        children = plugin_children(server.proc.pid)
        assert children, "no plugin child to watch"
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)
    # Gone, not even a zombie (init reaps it once its parent is dead).
    left = wait_processes_gone(children, timeout=10)
    assert left == [], f"plugin children outlived wf: {left}"
    assert all(proc_info(p.pid) is None or proc_info(p.pid).starttime != p.starttime for p in children)


async def test_wf_plugins_shows_each_mode(wf: Wf) -> None:
    wf.install("crashy")
    out = wf.plugins_json("--config", str(config(wf)))
    rows = {p["name"]: p for p in out["loaded"]}
    assert rows[PLUGIN]["isolation"] == "process"
    assert rows[PLUGIN]["process"]["state"] == "running" and rows[PLUGIN]["process"]["pid"] > 0
    assert rows["wf-source-std"]["isolation"] == "in_process" and rows["wf-source-std"]["process"] is None
    # In process, an unpinned third party's plugin is refused without the
    # operator's opt-in (one line saying what to add), and loads with it.
    out = wf.plugins_json("--allow-refused", "--config", str(config(wf, {"isolation": "in_process"})))
    refused = [r["reason"] for r in out["refused"]]
    assert len(refused) == 1 and "allow_unpinned_in_process = true" in refused[0], out["refused"]
    assert PLUGIN not in {p["name"] for p in out["loaded"]}
    out = wf.plugins_json(
        "--config", str(config(wf, {"isolation": "in_process", "allow_unpinned_in_process": True}))
    )
    rows = {p["name"]: p for p in out["loaded"]}
    assert rows[PLUGIN]["isolation"] == "in_process"


def test_a_bundled_plugin_runs_in_a_child_when_configured(wf: Wf) -> None:
    """Bundled plugins default to in process; `[plugins.<name>]` and
    `[server] plugin_isolation` move them."""
    out = wf.plugins_json("--config", str(wf.write_config('[plugins.wf-source-mcp]\nisolation = "process"\n')))
    rows = {p["name"]: p for p in out["loaded"]}
    assert rows["wf-source-mcp"]["isolation"] == "process" and rows["wf-source-mcp"]["process"]["pid"] > 0
    assert rows["wf-source-std"]["isolation"] == "in_process"
    out = wf.plugins_json("--config", str(wf.write_config('[server]\nplugin_isolation = "process"\n', "all.toml")))
    assert {p["name"]: p["isolation"] for p in out["loaded"]} == {
        "wf-source-mcp": "process",
        "wf-source-openapi": "process",
        "wf-source-std": "process",
        "wf-source-wasm": "process",
    }


def test_wf_check_validates_the_plugin_tables(wf: Wf) -> None:
    bad = wf.write_config('[plugins.wf-source-mcp]\nisolation = "process"\nmemory_mb = 4\n', "bad.toml")
    r = wf.run("check", "--config", str(bad), *wf.plugin_args())
    assert r.returncode == 1 and "plugins.wf-source-mcp.memory_mb = 4: must be at least 16" in r.stderr, r.stderr
    typo = wf.write_config('[plugins.wf-source-mcp]\nisolaton = "process"\n', "typo.toml")
    r = wf.run("check", "--config", str(typo), *wf.plugin_args())
    assert r.returncode == 1 and "isolaton" in r.stderr, r.stderr
    other = wf.write_config('[plugins.wf-source-mpc]\nisolation = "process"\n', "other.toml")
    r = wf.run("check", "--config", str(other), *wf.plugin_args())
    assert r.returncode == 0, r.stderr
    assert 'plugins.wf-source-mpc: warning: no loaded plugin is named "wf-source-mpc" (did you mean "wf-source-mcp"?)' in r.stderr


# Reloads (docs/operator-manual.md "Plugin isolation"): wf watches its config
# file; a bound generous enough for the watcher, the reload and the reaping.
RELOAD_WITHIN_S = 30


async def test_a_reload_that_removes_its_sources_reaps_the_child(wf: Wf) -> None:
    wf.install("crashy")
    path = config(wf)
    server = wf.start_http("127.0.0.1", None, "--config", str(path))
    async with wf.http_client(server) as c:
        await wait_listed(c, "crashy__echo")
        children = crashy_children(server.proc.pid)
        assert len(children) == 1, children
        write_atomic(path, config_text(crashy_enabled=False))
        # Gone, not even a zombie: wf reaped it.
        left = await wait_processes_gone_async(children, timeout=RELOAD_WITHIN_S)
        assert left == [], f"the plugin's child outlived its sources: {left}"
        assert crashy_children(server.proc.pid) == []
        # wf and its other sources serve on.
        _, err = await call_outcome(c, "wf_std__const", {"value": 1})
        assert err is None, err
        # A source of the plugin again: a new child serves it.
        write_atomic(path, config_text())
        assert await echo_until_back(c) == "back"
        again = crashy_children(server.proc.pid)
        assert len(again) == 1 and again[0].pid != children[0].pid, again


async def test_a_changed_memory_limit_restarts_the_child_with_it(wf: Wf) -> None:
    wf.install("crashy")
    path = config(wf, {"memory_mb": 512})
    server = wf.start_http("127.0.0.1", None, "--config", str(path))
    async with wf.http_client(server) as c:
        await wait_listed(c, "crashy__echo")
        [first] = crashy_children(server.proc.pid)
        assert data_limit(first.pid) == 512 << 20
        write_atomic(path, config_text({"memory_mb": 768}))

        async def new_child() -> list[Any]:
            return [p for p in crashy_children(server.proc.pid) if p.pid != first.pid]

        [second] = await wait_for(new_child, lambda l: len(l) == 1, "a new child", RELOAD_WITHIN_S, 0.1)
        assert data_limit(second.pid) == 768 << 20
        assert await wait_processes_gone_async([first], timeout=RELOAD_WITHIN_S) == []
        # Its source is served by the new child.
        assert await echo_until_back(c) == "back"


async def test_a_reload_after_its_file_is_gone_reaps_the_child(wf: Wf) -> None:
    lib = wf.install("crashy")
    path = config(wf)
    server = wf.start_http("127.0.0.1", None, "--config", str(path))
    async with wf.http_client(server) as c:
        await wait_listed(c, "crashy__echo")
        children = crashy_children(server.proc.pid)
        assert len(children) == 1, children
        lib.unlink()
        # The same text, a new modification time: the watcher reloads.
        write_atomic(path, config_text() + "# touched\n")
        left = await wait_processes_gone_async(children, timeout=RELOAD_WITHIN_S)
        assert left == [], f"the plugin's child outlived its file: {left}"
        _, err = await call_outcome(c, "wf_std__const", {"value": 1})
        assert err is None, err


async def test_a_child_that_crashes_5_times_in_a_row_is_given_up(wf: Wf) -> None:
    """Five crashes in a row are restarted (250 ms doubling); the sixth is not:
    the plugin's sources stay `failed`, with the reason, and calls fail at
    once naming it, while wf and its other sources serve on."""
    wf.install("crashy")
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config('[admin]\nover_http = "open"\n')))
    async with wf.http_client(server) as c:
        await wait_listed(c, "crashy__echo")
        for n in range(1, MAX_CRASHES_IN_A_ROW + 1):
            _, err = await call_outcome(c, "crashy__segfault")
            assert err is not None and f'plugin "{PLUGIN}" exited (signal 11' in err, (n, err)
            assert await echo_until_back(c) == "back", n
        _, err = await call_outcome(c, "crashy__segfault")
        assert err is not None, err

        async def state() -> dict[str, Any]:
            return (await sources_by_name(c))["crashy"]

        row = await wait_for(state, lambda r: r["state"] != "restarting", "the sixth crash's outcome", 30, 0.1)
        assert row["state"] == "failed", row
        assert "crashed 6 times in a row, so it is not restarted any more" in row["error"], row
        # It stays failed: longer than the longest backoff (4 s), no child comes back.
        await anyio.sleep(6)
        row = await state()
        assert row["state"] == "failed", row
        assert crashy_children(server.proc.pid) == []
        _, err = await call_outcome(c, "crashy__echo", {"text": "x"})
        assert err is not None and "not restarted any more" in err, err
        _, err = await call_outcome(c, "wf_std__const", {"value": 1})
        assert err is None, err
