"""Principals, per-principal tool lists, a safe admin surface and restarts that are
never silent (issue #10: points 1, 4, 5), end to end against the real `wf serve`.

- `[[server.tokens]]`: each token is a named principal; `http_token` is `default`;
  stdio is `local`. A principal's `allow_tools` / `deny_tools` hide tools from its
  list and refuse calls to them. The principal shows in admin output, run records
  and wf's log; no token shows in wf's log or state directory. A token or name used
  twice stops wf at start.
- Admin: tools a client can never call are not listed to it; over stdio,
  `add_source` with a `command` (or credentials) is refused without
  `[admin] allow_process_sources = true`, and the file stays byte-identical.
- A proxied call that lands on a restarted upstream session carries the new epoch in
  `_meta` and the client gets a logging notification.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from admin_support import ADMIN_TOKEN_HEADER, admin, admin_outcome
from conftest import Wf, all_tools, call_outcome, free_port, tail, toml_config
from upstream_support import wait_log, wait_tools

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 30
SESSION_EPOCH_META = "wf/sessionEpoch"


def token(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex}"


@contextlib.asynccontextmanager
async def as_principal(url: str, bearer: str | None, mode: str = "legacy", **kw: Any) -> AsyncIterator[Client]:
    """An entered client of `url` that sends `bearer` (and any extra `headers=`)."""
    headers = dict(kw.pop("headers", {}))
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    kw.setdefault("read_timeout_seconds", OP_TIMEOUT)
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **kw) as c:
            yield c


async def names(c: Client) -> set[str]:
    with anyio.fail_after(OP_TIMEOUT):
        return {t.name for t in await all_tools(c)}


PRINCIPALS_CONFIG = """\
[server]
http_token = "${E2E_DEFAULT_TOKEN}"

[[server.tokens]]
name = "alice"
token = "${E2E_ALICE_TOKEN}"
allow_tools = ["wf_std__*", "wf_planner__*", "wf_admin__status"]
deny_tools = ["wf_std__sleep"]

[[server.tokens]]
name = "bob"
token = "${E2E_BOB_TOKEN}"
deny_tools = ["wf_std__const", "wf_admin__*"]

[admin]
over_http = "open"
"""

WORKFLOW = {
    "name": "whoami",
    "nodes": [{"id": "n", "use": "wf.std.const", "args": {"value": 1}}],
    "outputs": {"v": {"$ref": "nodes.n.output.value"}},
}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_named_principals_with_tool_lists(wf: Wf, mode: str) -> None:
    tokens = {"default": token("dflt"), "alice": token("alice"), "bob": token("bob")}
    config = wf.write_config(PRINCIPALS_CONFIG)
    env = {"E2E_DEFAULT_TOKEN": tokens["default"], "E2E_ALICE_TOKEN": tokens["alice"], "E2E_BOB_TOKEN": tokens["bob"]}
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=env)

    async with as_principal(server.url, tokens["alice"], mode) as c:
        await wait_tools(c, "wf_std__const")
        listed = await names(c)
        assert "wf_std__const" in listed and "wf_planner__run_workflow" in listed, listed
        assert "wf_std__sleep" not in listed, "denied tool listed to alice"
        assert "wf_admin__status" in listed and "wf_admin__add_source" not in listed, listed
        # Refused if called anyway, with the reason; allowed ones work.
        with anyio.fail_after(OP_TIMEOUT):
            _, error = await call_outcome(c, "wf_std__sleep", {"ms": 1})
            assert error is not None and 'not available to principal "alice"' in error, error
            _, error = await call_outcome(c, "wf_admin__add_source", {"name": "x", "config": {"url": "http://127.0.0.1:1/mcp"}})
            assert error is not None and "alice" in error, error
            ok = await c.call_tool("wf_std__const", {"value": 5})
            assert not ok.is_error and ok.structured_content == {"value": 5}
            # Admin output names the caller, and the principals by name only.
            status = await admin(c, "status")
            assert status["principal"] == "alice", status
            assert [p["name"] for p in status["principals"]] == ["alice", "bob"], status
            # A run records who started it.
            run = (await c.call_tool("wf_planner__run_workflow", {"workflow": WORKFLOW})).structured_content
            assert run["status"] == "succeeded", run
            got = (await c.call_tool("wf_planner__get_run", {"run_id": run["run_id"]})).structured_content
            assert got["run"]["principal"] == "alice", got["run"]
            alice_run = run["run_id"]

    async with as_principal(server.url, tokens["bob"], mode) as c:
        listed = await names(c)
        assert "wf_std__sleep" in listed and "wf_std__const" not in listed, listed
        assert not {n for n in listed if n.startswith("wf_admin__")}, "admin tools listed to bob"
        with anyio.fail_after(OP_TIMEOUT):
            _, error = await call_outcome(c, "wf_std__const", {"value": 1})
            assert error is not None and 'not available to principal "bob"' in error, error
            _, error = await call_outcome(c, "wf_admin__status")
            assert error is not None and 'not available to principal "bob"' in error, error
            run = (await c.call_tool("wf_planner__run_workflow", {"workflow": WORKFLOW})).structured_content
            runs = (await c.call_tool("wf_planner__list_runs", {})).structured_content["runs"]
        assert {r["run_id"]: r["principal"] for r in runs} == {alice_run: "alice", run["run_id"]: "bob"}, runs

    # The single http_token still works: principal `default`, no lists.
    async with as_principal(server.url, tokens["default"], mode) as c:
        listed = await names(c)
        assert {"wf_std__const", "wf_std__sleep", "wf_admin__add_source"} <= listed, listed
        assert (await admin(c, "status"))["principal"] == "default"

    # wf's log names the refused principals; no token shows in the log or the state dir.
    await wait_log(server.log, r'tool call refused.*principal="?bob', "bob's refusal logged")
    await wait_log(server.log, r'tool call refused.*principal="?alice', "alice's refusal logged")
    server.stop()
    log = server.log.read_bytes()
    stored = b"".join(p.read_bytes() for p in wf.state_dir.rglob("*") if p.is_file())
    assert stored, "the state dir holds the runs"
    for name, t in tokens.items():
        assert t.encode() not in log, f"{name}'s token in wf's log"
        assert t.encode() not in stored, f"{name}'s token in the state dir"


def test_requests_without_a_known_token_get_401(wf: Wf) -> None:
    """No token, an unknown one, or a principal's token cut short: 401, as before."""
    config = wf.write_config(PRINCIPALS_CONFIG)
    env = {"E2E_DEFAULT_TOKEN": token("d"), "E2E_ALICE_TOKEN": token("a"), "E2E_BOB_TOKEN": token("b")}
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=env)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for auth in ({}, {"Authorization": "Bearer " + token("x")}, {"Authorization": f"Bearer {env['E2E_BOB_TOKEN'][:-1]}"}):
        r = httpx2.post(server.url, json=body, headers={"Accept": "application/json, text/event-stream", **auth})
        assert r.status_code == 401, (auth, r.status_code, r.text)
    r = httpx2.post(
        server.url,
        json=body,
        headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {env['E2E_ALICE_TOKEN']}"},
    )
    assert r.status_code != 401, r.text


@pytest.mark.parametrize(
    ("entries", "expect"),
    [
        (
            [("alice", "${E2E_T1}"), ("bob", "${E2E_T1}")],
            'principals "alice" and "bob" have the same token',
        ),
        ([("alice", "${E2E_T1}"), ("alice", "${E2E_T2}")], 'principal name "alice" is used twice'),
        ([("default", "${E2E_T1}")], 'principal name "default" is used twice'),
        ([("alice", "short")], 'the token of principal "alice"'),
        ([("local", "${E2E_T1}")], "reserved"),
    ],
    ids=["same-token", "same-name", "default-name", "weak-token", "reserved-name"],
)
def test_bad_tokens_are_refused_at_start(wf: Wf, entries: list[tuple[str, str]], expect: str) -> None:
    t1, t2, dflt = token("one"), token("two"), token("dflt")
    text = '[server]\nhttp_token = "${E2E_DFLT}"\n' + "".join(
        f'\n[[server.tokens]]\nname = "{n}"\ntoken = "{t}"\n' for n, t in entries
    )
    config = wf.write_config(text)
    proc = wf.run(
        "serve", *wf.plugin_args(), "--config", str(config), "--http", f"127.0.0.1:{free_port()}",
        env={"E2E_T1": t1, "E2E_T2": t2, "E2E_DFLT": dflt}, timeout=60,
    )
    assert proc.returncode != 0, proc.stderr
    assert expect in proc.stderr, proc.stderr
    for t in (t1, t2, dflt):
        assert t not in proc.stderr + proc.stdout, "a token in the start error"


# --------------------------------------------------------------------------- admin


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_admin_tools_are_listed_only_to_clients_that_may_call_them(wf: Wf, mode: str) -> None:
    admin_token = token("adm")
    # Default: admin over HTTP is off, so an HTTP client sees no admin tool.
    server = wf.start_http()
    async with wf.http_client(server, mode) as c:
        listed = await names(c)
        assert "wf_std__const" in listed
        assert not {n for n in listed if n.startswith("wf_admin__")}, listed
    server.stop()
    # Token mode: listed only to a client that sends the admin token.
    config = wf.write_config('[admin]\ntoken = "${E2E_ADMIN}"\n')
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env={"E2E_ADMIN": admin_token})
    async with as_principal(server.url, None, mode) as c:
        assert not {n for n in await names(c) if n.startswith("wf_admin__")}
    async with as_principal(server.url, None, mode, headers={ADMIN_TOKEN_HEADER: "wrong"}) as c:
        assert not {n for n in await names(c) if n.startswith("wf_admin__")}
    async with as_principal(server.url, None, mode, headers={ADMIN_TOKEN_HEADER: admin_token}) as c:
        assert "wf_admin__status" in await names(c)
        assert (await admin(c, "status"))["principal"] == "local"


async def test_admin_add_source_that_starts_a_program_needs_the_operators_switch(
    wf: Wf, fixture_upstream_bin: Path
) -> None:
    fx = str(fixture_upstream_bin)
    marker = wf.root / "pwned"
    evil = {"command": "/bin/sh", "args": ["-c", f"touch {marker}"]}
    config = wf.write_config(toml_config({"fx": {"command": fx}}))
    before = config.read_bytes()
    async with wf.stdio_client("auto", "--config", str(config), env={"E2E_SECRET": token("s")}) as c:
        await wait_tools(c, "fx__echo")
        for tool, table, why in [
            ("add_source", evil, "`command` starts a program"),
            ("update_source", {"command": fx, "env": {"X": "1"}}, "`env` starts a program"),
            ("add_source", {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "x"}}, "`headers` carries credentials"),
            ("add_source", {"url": "http://127.0.0.1:1/mcp?k=${E2E_SECRET}"}, "uses ${VAR}"),
        ]:
            name = "fx" if tool == "update_source" else "pwn"
            failed, value = await admin_outcome(c, tool, {"name": name, "config": table})
            assert failed, (tool, table, value)
            assert why in value["error"] and "allow_process_sources" in value["error"], value
            assert "allow_process_sources = true" in value["hint"], value
            assert config.read_bytes() == before, f"a refused {tool} changed the file"
        # A reload has nothing new to start.
        assert (await admin(c, "reload"))["error"] is None
        assert (await admin(c, "list_sources"))["sources"] and not marker.exists()
        # A source without a process or credentials is fine.
        staged = await admin(c, "add_source", {"name": "web", "config": {"url": "http://127.0.0.1:1/mcp"}})
        assert staged["staged"] is True, staged
    assert not marker.exists()
    await wait_log(wf.logs[-1], r'admin change refused.*principal="?local', "the refusal logged with its principal")

    # With the operator's switch: works as before, and the reload runs it.
    config.write_text(toml_config({"fx": {"command": fx}}) + "\n[admin]\nallow_process_sources = true\n")
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        await wait_tools(c, "fx__echo")
        staged = await admin(c, "add_source", {"name": "pwn", "config": evil})
        assert staged["staged"] is True, staged
        assert "pwn" in config.read_text()
        assert (await admin(c, "reload"))["error"] is None
        with anyio.fail_after(OP_TIMEOUT):
            while not marker.exists():
                await anyio.sleep(0.05)


# --------------------------------------------------------------------------- restarts


FRONTS = [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto"), ("http", "legacy")]
MODERN = [f for f in FRONTS if f[1] == "auto"]


def restart_client(wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str], on_log: Any, **kw: Any) -> Any:
    config = wf.write_config(toml_config({"fx": {"command": str(fixture_upstream_bin)}}))
    transport, mode = front
    if transport == "stdio":
        return wf.stdio_client(mode, "--config", str(config), logging_callback=on_log, **kw)
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    return wf.http_client(server, mode, logging_callback=on_log, **kw)


@pytest.mark.parametrize("front", FRONTS, ids=[f"{t}-{m}" for t, m in FRONTS])
async def test_a_restarted_upstream_is_never_silent(wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]) -> None:
    """A 2026-07-28 client (`auto`) hears log messages only when it opts in
    (`log_level`, the request's `io.modelcontextprotocol/logLevel`): it does here."""
    notices: list[Any] = []

    async def on_log(params: Any) -> None:
        notices.append(params)

    opt_in = {"log_level": "warning"} if front[1] == "auto" else {}
    client = restart_client(wf, fixture_upstream_bin, front, on_log, **opt_in)
    async with client as c:
        await wait_tools(c, "fx__increment", "fx__crash")
        with anyio.fail_after(OP_TIMEOUT):
            first = await c.call_tool("fx__increment", {})
            again = await c.call_tool("fx__increment", {})
            assert again.structured_content == {"count": 2}
            # No restart, no notice: the epoch stays inside wf.
            for r in (first, again):
                assert SESSION_EPOCH_META not in ((r.meta or {})), r.meta
            _, error = await call_outcome(c, "fx__crash")
            assert error is not None
            after = await c.call_tool("fx__increment", {})
        assert after.structured_content == {"count": 1}, "a new upstream session"
        assert (after.meta or {}).get(SESSION_EPOCH_META) == 2, after.meta
        with anyio.fail_after(OP_TIMEOUT):
            while not notices:
                await anyio.sleep(0.05)
        data = notices[0].data
        text = data["message"] if isinstance(data, dict) else str(data)
        assert text == "source fx restarted; its session state was lost", notices
        assert str(notices[0].level) in ("warning", "LoggingLevel.warning") or "warn" in str(notices[0].level)
        # Told once: the next call on the same session is quiet.
        with anyio.fail_after(OP_TIMEOUT):
            quiet = await c.call_tool("fx__increment", {})
        assert SESSION_EPOCH_META not in (quiet.meta or {}), quiet.meta
        assert quiet.structured_content == {"count": 2}
    assert len(notices) == 1, notices
    log = wf.logs[-1]
    assert "source fx restarted; its session state was lost" in log.read_text(), tail(log)
    json.dumps(data)  # the notice's data is plain JSON


@pytest.mark.parametrize("front", MODERN, ids=[f"{t}-{m}" for t, m in MODERN])
async def test_a_2026_client_that_asked_for_no_log_messages_gets_none_of_a_restart(
    wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]
) -> None:
    """Without the opt-in, the restart is told in the result's `_meta` only: no log
    message reaches the client (it would arrive before the result), and over HTTP
    the answer stays one JSON body."""
    notices: list[Any] = []

    async def on_log(params: Any) -> None:
        notices.append(params)

    async with restart_client(wf, fixture_upstream_bin, front, on_log) as c:
        assert c.protocol_version == "2026-07-28", c.protocol_version
        await wait_tools(c, "fx__increment", "fx__crash")
        with anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("fx__increment", {})
            _, error = await call_outcome(c, "fx__crash")
            assert error is not None
            after = await c.call_tool("fx__increment", {})
        assert after.structured_content == {"count": 1}, "a new upstream session"
        assert (after.meta or {}).get(SESSION_EPOCH_META) == 2, after.meta
    assert notices == [], notices
    log = wf.logs[-1]
    assert "source fx restarted; its session state was lost" in log.read_text(), tail(log)
