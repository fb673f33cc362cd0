"""`wf check --deep`: every configured source is created in a throwaway state
directory and discovered once, bounded by `server.discovery_timeout_ms`, so
what `wf serve` would only meet later is a `file: key: reason` line now (exit 1):
a plugin rejecting its settings, a `command` not on PATH, an unreachable URL,
an upstream that never answers. Plain `wf check` does not start configured
sources, and neither touches the real state directory.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from conftest import Wf, free_port, toml_config


def check(wf: Wf, config: Path, *extra: str) -> tuple[int, list[str]]:
    proc = wf.run("check", "--config", str(config), *wf.plugin_args(), *extra)
    return proc.returncode, proc.stderr.splitlines()


def line_for(lines: list[str], prefix: str) -> str:
    found = [x for x in lines if x.startswith(prefix)]
    assert len(found) == 1, (prefix, lines)
    return found[0]


def test_deep_reports_a_plugin_config_rejection(wf: Wf) -> None:
    wf.install("bad-schema")
    config = wf.write_config(toml_config({"counter": {"kind": "bad-schema", "step": 0}}))
    code, lines = check(wf, config)
    assert not any(x.startswith(f"{config}: sources.counter") for x in lines), lines
    code, lines = check(wf, config, "--deep")
    assert code == 1, lines
    line = line_for(lines, f"{config}: sources.counter: ")
    assert "could not be created" in line and "step must be positive (got 0)" in line, line


def test_deep_reports_a_missing_command(wf: Wf) -> None:
    config = wf.write_config(toml_config({"tools": {"command": "wf-e2e-no-such-command"}}))
    code, lines = check(wf, config)
    assert code == 0, lines
    code, lines = check(wf, config, "--deep")
    assert code == 1, lines
    line = line_for(lines, f"{config}: sources.tools.command: ")
    assert line.endswith('"wf-e2e-no-such-command" not found on PATH'), line


def test_deep_reports_an_unreachable_url(wf: Wf) -> None:
    port = free_port()  # nothing listens there
    url = f"http://127.0.0.1:{port}/mcp"
    config = wf.write_config(toml_config({"remote": {"url": url}}))
    code, lines = check(wf, config)
    assert code == 0, lines
    code, lines = check(wf, config, "--deep")
    assert code == 1, lines
    line = line_for(lines, f"{config}: sources.remote.url: ")
    assert "discovery failed" in line and url in line, line


def test_deep_bounds_discovery_of_an_upstream_that_never_answers(wf: Wf) -> None:
    # A socket that accepts connections and never says a word.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        config = wf.write_config(
            toml_config({"mute": {"url": url}}, server={"discovery_timeout_ms": 1000})
        )
        started = time.monotonic()
        code, lines = check(wf, config, "--deep")
        took = time.monotonic() - started
    assert code == 1, lines
    line = line_for(lines, f"{config}: sources.mute.url: ")
    assert "timed out after 1000 ms" in line, line
    # The bound is the behaviour: 1 s of discovery, plus start-up and shutdown.
    assert took < 15, took


def test_deep_passes_a_good_config_and_leaves_the_state_dir_alone(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = wf.write_config(toml_config({"fx": {"command": str(fixture_upstream_bin)}}))
    proc = wf.run("check", "--deep", "--config", str(config), *wf.plugin_args())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"ok: {config}: 1 configured sources"), proc.stdout
    assert "2 sources tried" in proc.stdout, proc.stdout  # fx and wf.std
    assert list(wf.state_dir.iterdir()) == [], list(wf.state_dir.iterdir())
