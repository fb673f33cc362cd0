"""Upstream hardening (issue 15, findings 1 and 2, the upstream side), proven from
outside against real processes:

- a stdio upstream starts with a minimal environment (an allowlist of wf's
  variables, then its own `env` and `auth.env`): none of wf's own variables
  (WF_ADMIN_TOKEN, WF_HTTP_TOKEN) nor another source's `${VAR}` secret reaches
  it — checked through the upstream's own view and /proc/<child>/environ — and
  the admin-token chain the probe ran (read the token through an upstream tool,
  add_source a command, reload) now fails;
- everything an upstream sends is bounded: 512 MiB of stderr without a newline
  leaves wf's peak RSS small, and a reply over `max_message_bytes` fails its
  call with an error naming the limit and the source while wf and the session
  stay up; a reply just under the limit passes intact.

wf runs over HTTP here, started with the test's full environment (as an
operator's shell would start it), so wf's own environment holds the secrets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from admin_support import ADMIN_TOKEN_HEADER, result_value
from conftest import HttpServer, Wf, content_text, free_port, toml_config
from upstream_support import (
    big_reply_client,
    log_matches,
    proc_environ,
    proc_status_kib,
    secret,
    wait_log,
    wait_tools,
)

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
MIB = 1024 * 1024
# The allowlist of wf's variables a stdio upstream gets by default (Linux).
ALLOWED = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE", "TMPDIR"}


def allowed(name: str) -> bool:
    return name in ALLOWED or name.startswith("LC_")


class Secrets:
    """wf's own tokens and one secret per source, all random, in wf's environment."""

    def __init__(self) -> None:
        self.admin = secret("admin")
        self.http = secret("http")
        self.other = secret("other-source")
        self.own = secret("own-source")
        self.unlisted = secret("unlisted")

    def wf_env(self, tmp: Path) -> dict[str, str]:
        return {
            "WF_ADMIN_TOKEN": self.admin,
            "WF_HTTP_TOKEN": self.http,
            "E2E_OTHER_SECRET": self.other,
            "E2E_OWN_SECRET": self.own,
            "E2E_UNLISTED": self.unlisted,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TMPDIR": str(tmp),
        }

    def never_in_a_child(self) -> dict[str, str]:
        return {"WF_ADMIN_TOKEN": self.admin, "WF_HTTP_TOKEN": self.http, "E2E_OTHER_SECRET": self.other}


def start(wf: Wf, config_text: str, env: dict[str, str], name: str = "wf.toml") -> HttpServer:
    config = wf.write_config(config_text, name=name)
    return wf.start_http("127.0.0.1", None, "--config", str(config), env=env)


def client(server: HttpServer, token: str, admin_token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    if admin_token is not None:
        headers[ADMIN_TOKEN_HEADER] = admin_token
    return big_reply_client(server.url, headers, read_timeout_seconds=OP_TIMEOUT)


async def call(c: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """Calls `tool`, which must succeed; returns its structured content (or text)."""
    with anyio.fail_after(OP_TIMEOUT):
        result = await c.call_tool(tool, arguments or {})
    assert not result.is_error, f"{tool}: {content_text(result.content)}"
    return result_value(result)


async def call_error(c: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    """Calls `tool`, which must fail (a JSON-RPC error or an error result); returns the message."""
    with anyio.fail_after(OP_TIMEOUT):
        try:
            result = await c.call_tool(tool, arguments or {})
        except MCPError as e:
            return str(e)
    text = content_text(result.content)
    assert result.is_error, f"{tool} did not fail: {text[:300]}"
    return text


def probe_sources(fx_bin: Path, s: Secrets, **probe: Any) -> dict[str, dict[str, Any]]:
    """`probe` (the fixture with its probe tools) and `other`, whose settings read another secret."""
    return {
        "probe": {
            "command": str(fx_bin),
            "args": ["--probes"],
            "env": {"OWN_KEY": "${E2E_OWN_SECRET}", "SHARED": "from-env"},
            "auth": {"env": {"SHARED": "from-auth", "AUTH_ONLY": "auth-value"}},
            **probe,
        },
        "other": {"command": str(fx_bin), "env": {"API_KEY": "${E2E_OTHER_SECRET}"}},
    }


def assert_no_secret(env: dict[str, str], s: Secrets, where: str) -> None:
    for name, value in s.never_in_a_child().items():
        assert name not in env, f"{where}: {name} reached the upstream"
        leaked = [k for k, v in env.items() if value in v]
        assert not leaked, f"{where}: the value of {name} reached the upstream as {leaked}"


# --------------------------------------------------------------------------- finding 1: environment


async def test_a_stdio_upstream_gets_the_allowlist_and_its_own_env_only(
    wf: Wf, fixture_upstream_bin: Path, tmp_path: Path
) -> None:
    s = Secrets()
    wf_env = s.wf_env(tmp_path)
    server = start(wf, toml_config(probe_sources(fixture_upstream_bin, s)), wf_env)
    async with client(server, s.http) as c:
        await wait_tools(c, "probe__env", "other__echo")
        seen = await call(c, "probe__env")
        pid = (await call(c, "probe__pid"))["pid"]
    from_proc = proc_environ(pid)

    for where, env in (("the upstream's own view", seen), (f"/proc/{pid}/environ", from_proc)):
        assert_no_secret(env, s, where)
        assert "E2E_UNLISTED" not in env and s.unlisted not in env.values(), where
        # Only the allowlist and the source's own keys, nothing else of wf's.
        extra = {k for k in env if not allowed(k)} - {"OWN_KEY", "SHARED", "AUTH_ONLY"}
        assert not extra, f"{where}: variables outside the allowlist: {sorted(extra)}"
        # The allowlisted ones wf has arrive unchanged.
        full = {**os.environ, **wf_env}
        for name in ("PATH", "LANG", "LC_ALL", "TMPDIR"):
            assert env.get(name) == full[name], f"{where}: {name}"
        assert env.get("HOME") == str(wf.home), where
        # Its own env (with its own ${VAR} expanded) and auth env, auth winning.
        assert env.get("OWN_KEY") == s.own, where
        assert env.get("SHARED") == "from-auth", where
        assert env.get("AUTH_ONLY") == "auth-value", where
    assert seen == from_proc


async def test_inherit_env_keeps_wfs_environment_but_never_wf_variables(
    wf: Wf, fixture_upstream_bin: Path, tmp_path: Path
) -> None:
    """The opt-out, in a Claude Desktop `mcpServers` entry: everything but WF_*."""
    s = Secrets()
    sources = probe_sources(fixture_upstream_bin, s, inherit_env=True)
    server = start(wf, json.dumps({"mcpServers": sources}), s.wf_env(tmp_path), name="claude.json")
    async with client(server, s.http) as c:
        await wait_tools(c, "probe__env", "other__echo")
        seen = await call(c, "probe__env")
        pid = (await call(c, "probe__pid"))["pid"]
    for where, env in (("the upstream's own view", seen), (f"/proc/{pid}/environ", proc_environ(pid))):
        assert not [k for k in env if k.startswith("WF_")], f"{where}: {sorted(env)}"
        assert not [k for k, v in env.items() if s.admin in v or s.http in v], where
        # Explicitly inherited: the rest of wf's environment (documented).
        assert env.get("E2E_UNLISTED") == s.unlisted, where
        assert env.get("OWN_KEY") == s.own and env.get("SHARED") == "from-auth", where


async def test_the_admin_token_chain_through_an_upstream_tool_fails(
    wf: Wf, everything_bin: Path, tmp_path: Path
) -> None:
    """The probe's chain: a client with HTTP access but without the admin token reads
    the token through server-everything's get-env, stages a shell command with
    add_source, reloads, and the command runs as wf's user. Now the token never
    reaches the upstream, so the chain stops at its first step; with the token (the
    control) the same steps do run the command, so the token is what it takes."""
    s = Secrets()
    marker = tmp_path / "pwned"
    # The control below adds a command source: the operator allowed that.
    config = (
        toml_config({"ev": {"command": str(everything_bin)}})
        + '\n[admin]\nover_http = "token"\ntoken = "${WF_ADMIN_TOKEN}"\nallow_process_sources = true\n'
    )
    server = start(wf, config, s.wf_env(tmp_path))
    evil = {"command": "/bin/sh", "args": ["-c", f"touch {marker}"]}

    async with client(server, s.http) as c:
        await wait_tools(c, "ev__get-env")
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool("ev__get-env", {})
        assert not result.is_error, content_text(result.content)
        env = json.loads(content_text(result.content))
        assert env.get("PATH"), "get-env shows the upstream's environment"
        stolen = env.get("WF_ADMIN_TOKEN", "")
    # The attacker goes on with what it found.
    async with client(server, s.http, admin_token=stolen) as c:
        with anyio.fail_after(OP_TIMEOUT):
            staged = await c.call_tool("wf_admin__add_source", {"name": "pwn", "config": evil})
            reloaded = await c.call_tool("wf_admin__reload", {})
    config_now = wf.root.joinpath("wf.toml").read_text()
    assert staged.is_error and reloaded.is_error, (content_text(staged.content), content_text(reloaded.content))
    assert "token" in content_text(staged.content), content_text(staged.content)
    # Nothing was staged, so no reload can ever start the command.
    assert "pwn" not in config_now and not marker.exists(), "the chain went through"
    assert_no_secret(env, s, "server-everything's get-env")

    # Control: the same chain with the real admin token does run the command.
    async with client(server, s.http, admin_token=s.admin) as c:
        await call(c, "wf_admin__add_source", {"name": "pwn", "config": evil})
        await call(c, "wf_admin__reload")
        with anyio.fail_after(OP_TIMEOUT):
            while not marker.exists():
                await anyio.sleep(0.05)
    assert server.proc.poll() is None


# --------------------------------------------------------------------------- finding 2: bounds

BOMB = 512 * MIB
# What 512 MiB of stderr may add to wf's peak RSS (it reads in bounded chunks).
BOMB_GROWTH_LIMIT_KIB = 64 * 1024


async def test_a_stderr_bomb_leaves_wf_small_and_serving(wf: Wf, fixture_upstream_bin: Path) -> None:
    """512 MiB of stderr without a newline from an upstream that keeps serving."""
    token = secret("http")
    sources = {
        "bomb": {"command": str(fixture_upstream_bin), "args": ["--probes", "--stderr-bomb", str(BOMB)]},
        "fx": {"command": str(fixture_upstream_bin)},
    }
    server = start(wf, toml_config(sources), {"WF_HTTP_TOKEN": token})
    async with client(server, token) as c:
        await wait_tools(c, "bomb__stderr_bomb_status", "fx__echo")
        # wf's own peak so far: what the bomb may add to is measured from here.
        before = proc_status_kib(server.proc.pid, "VmHWM")
        pid = (await call(c, "bomb__pid"))["pid"]
        # The bomb is written through a pipe, so it is done only once wf has read it.
        with anyio.fail_after(600):
            while not (status := await call(c, "bomb__stderr_bomb_status"))["done"]:
                await anyio.sleep(0.2)
        assert status == {"written": BOMB, "total": BOMB, "done": True}
        assert (await call(c, "bomb__pid"))["pid"] == pid, "the bombing upstream kept its session"
        assert content_text((await c.call_tool("bomb__echo", {"message": "still here"})).content) == "still here"
        assert content_text((await c.call_tool("fx__echo", {"message": "other"})).content) == "other"
    peak = proc_status_kib(server.proc.pid, "VmHWM")
    print(f"wf VmHWM after {BOMB} bytes of stderr: {peak} KiB (before: {before} KiB)")
    # Bounded by the line cut, not by the bomb: a small fraction of its 512 MiB.
    assert peak - before < BOMB_GROWTH_LIMIT_KIB, (
        f"wf's peak RSS grew {peak - before} KiB (from {before}) after {BOMB} bytes of stderr"
    )
    warnings = await wait_log(server.log, r"stderr line over \d+ bytes truncated.*bomb|bomb.*stderr line over", "truncation warning")
    assert len(warnings) <= 5, f"rate-limited, not one per chunk: {len(warnings)} lines"
    assert not log_matches(server.log, r"(?i)panick"), "wf panicked"
    assert server.proc.poll() is None


def limited(fx_bin: Path, limit: int | None) -> dict[str, dict[str, Any]]:
    settings: dict[str, Any] = {"command": str(fx_bin), "args": ["--probes"]}
    if limit is not None:
        settings["max_message_bytes"] = limit
    return {"fx": settings, "other": {"command": str(fx_bin)}}


def pattern(n: int) -> str:
    return "".join(str(i % 10) for i in range(n))


LIMIT = 64 * 1024


async def test_a_reply_over_max_message_bytes_fails_its_call_and_wf_goes_on(
    wf: Wf, fixture_upstream_bin: Path
) -> None:
    token = secret("http")
    server = start(wf, toml_config(limited(fixture_upstream_bin, LIMIT)), {"WF_HTTP_TOKEN": token})
    async with client(server, token) as c:
        await wait_tools(c, "fx__big", "fx__garbage_line", "other__echo")
        pid = (await call(c, "fx__pid"))["pid"]
        # Just under: the whole JSON-RPC line (text + ~100 bytes of envelope) fits.
        under = LIMIT - 256
        assert await call(c, "fx__big", {"bytes": under}) == pattern(under)
        error = await call_error(c, "fx__big", {"bytes": LIMIT + 1})
        assert f"max_message_bytes ({LIMIT} bytes)" in error and '"fx"' in error, error
        # The session survived (same process) and so did everything else.
        assert (await call(c, "fx__pid"))["pid"] == pid
        assert content_text((await c.call_tool("other__echo", {"message": "ok"})).content) == "ok"
    lines = log_matches(server.log, r"over max_message_bytes")
    assert len(lines) == 1 and "fx" in lines[0], lines
    assert server.proc.poll() is None


async def test_an_unattributable_oversized_line_ends_the_session_clearly(
    wf: Wf, fixture_upstream_bin: Path
) -> None:
    """A line over the limit that is no JSON-RPC message: wf cannot tell whose reply it
    was, so it closes the session; the waiting call says why, the next call gets a new
    session (a new process), and wf stays up."""
    token = secret("http")
    server = start(wf, toml_config(limited(fixture_upstream_bin, LIMIT)), {"WF_HTTP_TOKEN": token})
    async with client(server, token) as c:
        await wait_tools(c, "fx__big", "fx__garbage_line", "other__echo")
        pid = (await call(c, "fx__pid"))["pid"]
        error = await call_error(c, "fx__garbage_line", {"bytes": 4 * LIMIT})
        assert f"max_message_bytes ({LIMIT} bytes)" in error and '"fx"' in error, error
        assert "session was closed" in error, error
        new_pid = (await call(c, "fx__pid"))["pid"]
        assert new_pid != pid, "the next call runs on a new session"
        # Garbage under the limit is skipped without harm (the session stays).
        assert (await call(c, "fx__garbage_line", {"bytes": 100})) == {"written": 100}
        assert (await call(c, "fx__pid"))["pid"] == new_pid
        assert content_text((await c.call_tool("other__echo", {"message": "ok"})).content) == "ok"
    assert server.proc.poll() is None


async def test_a_10_mib_result_passes_under_the_default_limit(wf: Wf, fixture_upstream_bin: Path) -> None:
    token = secret("http")
    server = start(wf, toml_config(limited(fixture_upstream_bin, None)), {"WF_HTTP_TOKEN": token})
    async with client(server, token) as c:
        await wait_tools(c, "fx__big")
        text = await call(c, "fx__big", {"bytes": 10 * MIB})
    assert len(text) == 10 * MIB and text == pattern(10 * MIB)


async def test_an_http_upstream_reply_over_max_message_bytes_fails_clearly(
    wf: Wf, fixture_upstream_bin: Path
) -> None:
    port = free_port()
    url = wf.start_upstream_http("fixture-http", [str(fixture_upstream_bin), "--probes", "--http", f"127.0.0.1:{port}"], port)
    token = secret("http")
    sources = {"fx": {"url": url, "max_message_bytes": LIMIT}, "other": {"command": str(fixture_upstream_bin)}}
    server = start(wf, toml_config(sources), {"WF_HTTP_TOKEN": token})
    async with client(server, token) as c:
        await wait_tools(c, "fx__big", "other__echo")
        under = LIMIT - 512
        assert await call(c, "fx__big", {"bytes": under}) == pattern(under)
        error = await call_error(c, "fx__big", {"bytes": LIMIT + 1})
        assert f"max_message_bytes ({LIMIT} bytes)" in error and '"fx"' in error, error
        assert content_text((await c.call_tool("fx__echo", {"message": "after"})).content) == "after"
        assert content_text((await c.call_tool("other__echo", {"message": "ok"})).content) == "ok"
    assert server.proc.poll() is None
