"""Strict settings (issue #14, point 6).

- An unknown key in wf's own tables (top level, `[server]`, `[admin]`,
  `[plugins]`) is an error naming the file, the table and the key, with the
  nearest known key as a hint: `wf check` and `wf serve` both exit 1.
- A source's settings are checked against the JSON Schema its plugin
  declares for the kind (the mcp and std plugins declare theirs): `wf check`
  names each unknown key with a hint; `wf serve` leaves that source out
  (never started, failed with the same line) and serves the rest; an admin
  `add_source` with such a key is refused and writes nothing; a reload with
  one fails that source.
- A pasted `mcpServers` entry keeps the keys other clients write
  (`disabled`, `timeout`, `autoApprove`, `alwaysAllow`, `type`, …).
- `[server] plugin_threads` sizes each plugin's own runtime (counted from
  /proc), and a value outside 1..=64 stops `wf serve` with a one-line error.
- `wf serve` runs one worker thread over stdio, `--workers`, `WF_WORKERS` or
  `[server] workers` threads when set, and one per CPU over HTTP (counted
  from /proc); `[server] workers` outside 1..=1024 stops it with a one-line
  error.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from admin_support import OP_TIMEOUT, admin, admin_outcome, sources_by_name, tool_names, write_atomic
from conftest import Wf, content_text, toml_config, wait_listed

pytestmark = pytest.mark.anyio


def check(wf: Wf, config: Path) -> tuple[int, list[str]]:
    done = wf.run("check", "--config", str(config), *wf.plugin_args(), "--log-level", "error")
    return done.returncode, (done.stdout + done.stderr).splitlines()


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('[server]\nhtp = "127.0.0.1:1"\n', 'server: unknown key "htp" (did you mean "http"?)'),
        ('[admin]\ntokn = "x"\n', 'admin: unknown key "tokn" (did you mean "token"?)'),
        ('[plugins]\ndir = ["x"]\n', 'plugins: unknown key "dir" (did you mean "dirs"?)'),
        ('[sever]\nhttp = "127.0.0.1:1"\n', 'top level: unknown key "sever" (did you mean "server"?)'),
    ],
    ids=["server", "admin", "plugins", "top-level"],
)
def test_unknown_keys_in_wfs_own_tables_stop_check_and_serve(wf: Wf, text: str, line: str) -> None:
    config = wf.write_config(text)
    code, lines = check(wf, config)
    assert code == 1 and lines == [f"wf check: {config}: {line}"], lines
    served = wf.run("serve", "--config", str(config), *wf.plugin_args())
    assert served.returncode == 1 and f"{config}: {line}" in served.stderr, (served.returncode, served.stderr)


def test_check_names_unknown_source_settings_with_a_hint(wf: Wf, fixture_upstream_bin: Path) -> None:
    fx = str(fixture_upstream_bin)
    config = wf.write_config(
        toml_config(
            {
                "fs": {"command": fx, "comand": fx, "argz": ["x"]},
                "wf.std": {"kind": "std", "enabeld": False},
                "fine": {"command": fx, "args": ["--start-delay-ms", "0"]},
            }
        )
    )
    code, lines = check(wf, config)
    assert code == 1, lines
    assert lines == [
        f'{config}: sources.fs: unknown key "argz" (did you mean "args"?); '
        'sources.fs: unknown key "comand" (did you mean "command"?)',
        f'{config}: sources.wf.std: unknown key "enabeld" (did you mean "enabled"?)',
        "wf check: 2 problem(s)",
    ], lines
    # Wrong types are named by key too.
    config.write_text(toml_config({"fs": {"command": fx, "args": "--verbose"}}))
    code, lines = check(wf, config)
    assert code == 1 and lines[0] == f"{config}: sources.fs.args: expected array, got string", lines


def marked_processes(var: str) -> set[str]:
    """The values of `var` in the environments of this user's processes now."""
    found = set()
    for d in Path("/proc").iterdir():
        try:
            env = (d / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        found |= {e.split(b"=", 1)[1].decode() for e in env if e.startswith(var.encode() + b"=")}
    return found


async def test_serve_leaves_out_a_source_with_unknown_settings(wf: Wf, fixture_upstream_bin: Path) -> None:
    fx = str(fixture_upstream_bin)
    var = "WF_E2E_STRICT_SETTINGS"
    config = wf.write_config(
        toml_config(
            {
                "bad": {"command": fx, "env": {var: f"bad-{wf.root.name}"}, "comand": fx},
                "fx": {"command": fx, "env": {var: f"good-{wf.root.name}"}},
            }
        )
    )
    line = f'{config}: sources.bad: unknown key "comand" (did you mean "command"?)'
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        await wait_listed(c, "fx__echo")
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool("fx__echo", {"message": "the rest is served"})
        assert not result.is_error and content_text(result.content) == "the rest is served", result
        rows = await sources_by_name(c)
        assert rows["bad"]["state"] == "failed" and rows["bad"]["error"] == line, rows["bad"]
        assert not any(n.startswith("bad__") for n in await tool_names(c))
        # Never started: the good source's server runs, no process has the bad one's environment.
        running = marked_processes(var)
        assert f"good-{wf.root.name}" in running and f"bad-{wf.root.name}" not in running, running
    log = wf.logs[-1].read_text()
    assert any("WARN" in entry and line in entry for entry in log.splitlines()), log[-3000:]


async def test_admin_edits_and_reload_check_settings(wf: Wf, fixture_upstream_bin: Path) -> None:
    fx = str(fixture_upstream_bin)
    # The operator allows sources that start programs: what is checked here is
    # the settings, not the admin safety switch (test_principals.py).
    config = wf.write_config("[admin]\nallow_process_sources = true\n\n" + toml_config({"fx": {"command": fx}}))
    file = str(config.resolve())
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        await wait_listed(c, "fx__echo")
        before = config.read_bytes()
        for tool, args, expect in [
            (
                "add_source",
                {"name": "fy", "config": {"command": fx, "argz": ["x"]}},
                f'{file}: sources.fy: unknown key "argz" (did you mean "args"?)',
            ),
            (
                "update_source",
                {"name": "fx", "config": {"command": fx, "auth": {"bearer_tokn": "x"}}},
                f'{file}: sources.fx.auth: property "bearer_tokn" is not allowed',
            ),
            (
                "add_source",
                {"name": "std2", "kind": "std", "config": {"anything": 1}},
                f'{file}: sources.std2: unknown key "anything"',
            ),
        ]:
            failed, value = await admin_outcome(c, tool, args)
            assert failed and value["error"] == expect, (tool, value)
            assert config.read_bytes() == before, f"a refused {tool} changed the file"

        # A config edited by hand is checked on reload: the bad source fails, the rest stay.
        write_atomic(config, toml_config({"fx": {"command": fx}, "fy": {"command": fx, "cwdd": "/"}}))
        outcome = await admin(c, "reload")
        assert "fy" in outcome["sources"]["added"], outcome
        rows = await sources_by_name(c)
        assert rows["fy"]["state"] == "failed", rows["fy"]
        assert rows["fy"]["error"] == f'{file}: sources.fy: unknown key "cwdd" (did you mean "cwd"?)', rows["fy"]
        assert rows["fx"]["state"] == "ready", rows["fx"]


async def test_pasted_mcp_servers_entries_keep_other_clients_keys(wf: Wf, fixture_upstream_bin: Path) -> None:
    fx = str(fixture_upstream_bin)
    entries = {
        # Cline / Roo Code
        "cline": {"command": fx, "disabled": False, "timeout": 60, "autoApprove": ["echo"], "alwaysAllow": []},
        # Claude Code / Cursor / VS Code
        "cursor": {"type": "stdio", "command": fx, "args": [], "env": {}},
        # Gemini CLI / Windsurf
        "gemini": {"command": fx, "trust": False, "description": "fixture", "disabledTools": []},
    }
    config = wf.write_config(json.dumps({"mcpServers": entries, "globalShortcut": ""}), "claude_desktop_config.json")
    code, lines = check(wf, config)
    assert code == 0 and len(lines) == 1 and lines[0].startswith(f"ok: {config}: 3 configured sources"), lines
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        for name in entries:
            await wait_listed(c, f"{name}__echo")
            with anyio.fail_after(OP_TIMEOUT):
                result = await c.call_tool(f"{name}__echo", {"message": name})
            assert not result.is_error and content_text(result.content) == name, result
    # A key wf cannot honour is still an error (VS Code's envFile would change the server's environment).
    config.write_text(json.dumps({"mcpServers": {"vs": {"command": fx, "envFile": ".env"}}}))
    code, lines = check(wf, config)
    assert code == 1 and lines[0] == f'{config}: mcpServers.vs: unknown key "envFile"', lines


def plugin_threads(pid: int) -> int:
    """Threads of `pid` named after the plugin runtimes (`wf-plugin`)."""
    tasks = Path(f"/proc/{pid}/task")
    return sum(1 for t in tasks.iterdir() if (t / "comm").read_text().strip() == "wf-plugin")


def runtime_threads_seen(wf: Wf, config: Path) -> int:
    """The plugin runtime threads of a `wf serve` once wf.std is discovered
    (its discovery starts the std plugin's runtime)."""
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    try:
        deadline = time.monotonic() + 10
        while "discovered source=wf.std" not in server.log.read_text():
            assert time.monotonic() < deadline, server.log.read_text()
            time.sleep(0.05)
        return plugin_threads(server.proc.pid)
    finally:
        server.stop()


def test_plugin_threads_sizes_each_plugin_runtime_and_is_bounded(wf: Wf) -> None:
    one = runtime_threads_seen(wf, wf.write_config("[server]\nplugin_threads = 1\n"))
    three = runtime_threads_seen(wf, wf.write_config("[server]\nplugin_threads = 3\n"))
    # Each started plugin runtime has exactly the threads asked for.
    assert one >= 1 and three == 3 * one, (one, three)
    for bad in (0, 65):
        config = wf.write_config(f"[server]\nplugin_threads = {bad}\n")
        served = wf.run("serve", "--config", str(config), *wf.plugin_args())
        line = f"{config}: server.plugin_threads = {bad}: must be between 1 and 64"
        assert served.returncode == 1 and line in served.stderr, (served.returncode, served.stderr)


def wf_workers(pid: int) -> int:
    """Threads of `pid` that are `wf serve`'s runtime workers (`wf-worker`;
    its blocking threads are `wf-blocking`).

    A thread a worker starts carries the worker's name until it names itself
    (Linux copies the name on `clone`; Rust sets the new one from inside the
    new thread), so one sample can count a blocking thread being born as a
    worker. A transient thread only adds: the fewest of a few samples is the
    count."""
    tasks = Path(f"/proc/{pid}/task")

    def sample() -> int:
        count = 0
        for t in tasks.iterdir():
            try:
                count += (t / "comm").read_text().strip() == "wf-worker"
            except FileNotFoundError:  # a thread that ended meanwhile
                pass
        return count

    counts = []
    for _ in range(5):
        counts.append(sample())
        time.sleep(0.02)
    return min(counts)


def workers_of_stdio_serve(wf: Wf, *args: str, env: dict[str, str] | None = None) -> int:
    """The worker threads of a `wf serve` over stdio once wf.std is discovered."""
    log = wf.new_log("stdio-workers")
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [str(wf.bin), *wf.serve_args(*args)],
            cwd=wf.root,
            env=wf.env(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 10
        while "discovered source=wf.std" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        return wf_workers(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_wf_serve_runs_one_worker_over_stdio_and_more_when_asked(wf: Wf) -> None:
    # Over stdio: one worker thread (docs/operator-manual.md, "Worker threads").
    assert workers_of_stdio_serve(wf) == 1
    assert workers_of_stdio_serve(wf, "--workers", "3") == 3
    assert workers_of_stdio_serve(wf, env={"WF_WORKERS": "2"}) == 2
    config = wf.write_config("[server]\nworkers = 4\n")
    assert workers_of_stdio_serve(wf, "--config", str(config)) == 4
    # Over HTTP: one per CPU but one, at least one, unless set.
    server = wf.start_http("127.0.0.1", None)
    try:
        # (the CPUs Rust counts can be fewer than the affinity mask under a CPU quota)
        assert 1 <= wf_workers(server.proc.pid) <= max(1, len(os.sched_getaffinity(0)) - 1)
    finally:
        server.stop()
    for bad in (0, 1025):
        config = wf.write_config(f"[server]\nworkers = {bad}\n")
        served = wf.run("serve", "--config", str(config), *wf.plugin_args())
        line = f"{config}: server.workers = {bad}: must be between 1 and 1024"
        assert served.returncode == 1 and line in served.stderr, (served.returncode, served.stderr)
