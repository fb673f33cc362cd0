"""`[server]` keys read from the config file, end to end:

- `http` serves streamable HTTP on that address without `--http`;
- `http_token` (here from a `${VAR}`) is the bearer token a request must send (401 without);
- `allowed_hosts` / `allowed_origins` admit their extra `Host` / `Origin` values,
  others get 403;
- `state_dir` is relative to the config file;
- `WF_CONFIG` names the config file when `--config` is absent;
- without `--state-dir` or `state_dir`, the state goes to `$XDG_STATE_HOME/wf`,
  else `~/.local/state/wf`.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from admin_support import http_client_with_headers, tool_names
from conftest import Wf, free_port, port_accepts, stop_process, tail, toml_config
from promise_support import OP_TIMEOUT

pytestmark = pytest.mark.anyio

TOKEN = "srv-token-0123456789abcdef"  # >= 16 characters
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
ACCEPT = "application/json, text/event-stream"
GREET = {"name": "greet", "nodes": [{"id": "c", "use": "wf.std.const", "args": {"value": 1}}]}


def start_serve(wf: Wf, *args: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    log = wf.new_log("serve")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(wf.bin), "serve", *args], cwd=wf.root, env=wf.env(env), stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    return proc


def wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + OP_TIMEOUT
    while not port_accepts("127.0.0.1", port):
        if proc.poll() is not None:
            pytest.fail(f"wf serve exited {proc.returncode} before listening on {port}:\n{tail(log)}")
        if time.monotonic() > deadline:
            pytest.fail(f"wf serve did not listen on {port} (server.http) within {OP_TIMEOUT}s:\n{tail(log)}")
        time.sleep(0.05)


def post(port: int, headers: dict[str, str]) -> int:
    h = {"Accept": ACCEPT, "Content-Type": "application/json", **headers}
    with httpx2.Client(timeout=OP_TIMEOUT, trust_env=False) as http:
        return http.post(f"http://127.0.0.1:{port}/mcp", content=json.dumps(INIT), headers=h).status_code


async def test_server_keys_of_the_config_file_apply_over_real_http(wf: Wf) -> None:
    port = free_port()
    cfg = wf.root / "cfg"
    cfg.mkdir()
    config = cfg / "wf.toml"
    server = {
        "http": f"127.0.0.1:{port}",
        "http_token": "${PROMISE_HTTP_TOKEN}",
        "allowed_hosts": ["wf.internal"],
        "allowed_origins": ["https://app.example"],
        "state_dir": "st",
    }
    config.write_text(toml_config({}, server=server))
    proc = start_serve(wf, "--config", str(config), "--plugins", str(wf.plugin_dir), env={"PROMISE_HTTP_TOKEN": TOKEN})
    try:
        wait_listening(proc, port, wf.logs[-1])

        bearer = {"Authorization": f"Bearer {TOKEN}"}
        statuses = {
            "no token": post(port, {}),
            "wrong token": post(port, {"Authorization": "Bearer not-the-token-0123456789"}),
            "token": post(port, bearer),
            "allowed host": post(port, {**bearer, "Host": "wf.internal"}),
            "other host": post(port, {**bearer, "Host": "evil.example"}),
            "allowed origin": post(port, {**bearer, "Origin": "https://app.example"}),
            "other origin": post(port, {**bearer, "Origin": "https://evil.example"}),
        }
        assert statuses == {
            "no token": 401,
            "wrong token": 401,
            "token": 200,
            "allowed host": 200,
            "other host": 403,
            "allowed origin": 200,
            "other origin": 403,
        }, statuses

        url = f"http://127.0.0.1:{port}/mcp"
        async with http_client_with_headers(url, bearer) as c:
            with anyio.fail_after(OP_TIMEOUT):
                assert "wf_std__const" in await tool_names(c)
                result = await c.call_tool("wf_planner__run_workflow", {"workflow": GREET})
            assert not result.is_error, result
            run_id = result.structured_content["run_id"]
    finally:
        stop_process(proc)

    # state_dir = "st" is cfg/st: the run is there, and nothing went to the XDG default.
    assert (cfg / "st" / "wf.db").exists(), sorted(p.name for p in cfg.iterdir())
    assert not (wf.home / ".local" / "state" / "wf").exists()
    listed = wf.run("runs", "--json", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [run_id], listed.stdout


async def test_wf_config_names_the_config_file(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = wf.write_config(toml_config({"fx": {"command": str(fixture_upstream_bin)}}), "elsewhere.toml")
    async with wf.stdio_client("auto", env={"WF_CONFIG": str(config)}) as c:
        with anyio.fail_after(OP_TIMEOUT):
            names = await tool_names(c)
    assert {"fx__echo", "fx__increment"} <= names, sorted(names)


def run_env(wf: Wf, **changes: str | None) -> dict[str, str]:
    env = wf.env()
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def wf_cli(wf: Wf, env: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(wf.bin), *args], cwd=wf.root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    wf.new_log("cli").write_text(f"$ wf {' '.join(args)}\n[exit {proc.returncode}]\n{proc.stdout}\n{proc.stderr}")
    assert proc.returncode == 0, f"wf {' '.join(args)}: {proc.stderr}"
    return proc


def test_default_state_dir_is_xdg_state_home_else_local_state(wf: Wf) -> None:
    workflow = wf.root / "greet.json"
    workflow.write_text(json.dumps(GREET))
    xdg = wf.root / "xdg-state"
    local = wf.home / ".local" / "state" / "wf"
    for env, expect, absent in [
        (run_env(wf, XDG_STATE_HOME=str(xdg)), xdg / "wf", local),
        (run_env(wf, XDG_STATE_HOME=None), local, None),
    ]:
        assert not expect.exists(), expect
        ran = wf_cli(wf, env, "run", str(workflow), "--plugins", str(wf.plugin_dir), "--log-level", "error")
        assert (expect / "wf.db").exists(), (expect, ran.stderr)
        if absent is not None:
            assert not absent.exists(), absent
        listed = json.loads(wf_cli(wf, env, "runs", "--json").stdout)
        assert len(listed) == 1 and listed[0]["status"] == "succeeded", listed
