"""The audit trail (`[audit]`, `wf audit`, the admin `query_audit` tool), end to end.

wf in front of the real @modelcontextprotocol/server-everything, driven by the official
Python client over `wf serve --http` with two principals:

- every call is one record with its principal, capability, decision and outcome; a
  refused call is recorded as denied, with the refusal;
- values never appear unless `[[audit.values]]` asks for them, and then a configured
  pattern and a `${VAR}` secret are blanked;
- `wf audit` (table, JSON lines, CSV) and `query_audit` filter alike;
- with a small `max_rows`, old records go and new ones stay;
- with the SQLite store locked by another process, calls go on meanwhile, and the
  records arrive once the lock is gone (`status.audit.dropped` says what was lost).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from admin_support import admin, http_client_with_headers
from conftest import Wf, content_text

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 30
SECRET_ENV = "E2E_AUDIT_SECRET"
SECRET = "cfg-secret-7f3a9c1e"


def tokens() -> dict[str, str]:
    return {"alice": f"alice-{os.urandom(12).hex()}", "bob": f"bob-{os.urandom(12).hex()}"}


def config(everything_bin: Path, toks: dict[str, str], audit: str = "") -> str:
    return (
        f'[sources.everything]\ncommand = "{everything_bin}"\n'
        f'env = {{ AUDIT_PROBE = "${{{SECRET_ENV}}}" }}\n\n'
        '[[server.tokens]]\nname = "alice"\n'
        f'token = "{toks["alice"]}"\ngroups = ["support"]\n'
        '[[server.tokens]]\nname = "bob"\n'
        f'token = "{toks["bob"]}"\ndeny_tools = ["everything__get-sum"]\n\n'
        '[admin]\nover_http = "open"\n\n'
        f"{audit}"
    )


def audit_cli(wf: Wf, cfg: Path, *args: str) -> list[dict[str, Any]]:
    proc = wf.run("audit", "--config", str(cfg), "--state-dir", str(wf.state_dir), "--format", "jsonl", *args)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def wait_records(wf: Wf, cfg: Path, count: int, *args: str, timeout: float = 20.0) -> list[dict[str, Any]]:
    """`wf audit` until it shows at least `count` records (they are written off the call path)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = audit_cli(wf, cfg, *args)
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


async def call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """(failed, text): a tool error or a JSON-RPC error (a refusal) both fail."""
    from mcp.shared.exceptions import MCPError

    async with http_client_with_headers(url, {"Authorization": f"Bearer {token}"}) as c:
        with anyio.fail_after(OP_TIMEOUT):
            try:
                r = await c.call_tool(tool, arguments)
            except MCPError as e:
                return True, str(e)
        return bool(r.is_error), content_text(r.content)


async def test_every_call_is_one_record_with_who_what_decision_and_outcome(wf: Wf, everything_bin: Path) -> None:
    toks = tokens()
    cfg = wf.write_config(
        config(
            everything_bin,
            toks,
            '[audit]\nredact = ["sk-[a-z0-9]{8,}"]\n'
            '[[audit.values]]\ncapabilities = "everything.echo"\narguments = true\nresults = true\n',
        )
    )
    server = wf.start_http("127.0.0.1", None, "--config", str(cfg), env={SECRET_ENV: SECRET})
    failed, text = await call(server.url, toks["alice"], "everything__echo", {"message": f"key sk-abcdefgh42 and {SECRET}"})
    assert not failed, text
    failed, text = await call(server.url, toks["alice"], "everything__get-sum", {"a": 2, "b": 40})
    assert not failed and "42" in text, text
    failed, text = await call(server.url, toks["bob"], "everything__get-sum", {"a": 1, "b": 1})
    assert failed, f"bob's get-sum was not refused: {text}"

    rows = wait_records(wf, cfg, 3, "--source", "everything")
    assert len(rows) == 3, rows
    by = {(r["principal"], r["capability"]): r for r in rows}
    assert set(by) == {
        ("alice", "everything__echo"),
        ("alice", "everything__get-sum"),
        ("bob", "everything__get-sum"),
    }, rows

    echo = by[("alice", "everything__echo")]
    assert echo["decision"] == "allow" and echo["outcome"] == "ok", echo
    assert echo["groups"] == ["support"] and echo["transport"] == "http" and echo["kind"] == "tool", echo
    assert by[("bob", "everything__get-sum")]["groups"] == [], rows
    assert echo["duration_us"] > 0 and echo["bytes_in"] > 0 and echo["bytes_out"] > 0, echo
    # Values kept where asked, with the pattern and the ${VAR} secret blanked.
    assert echo["arguments"] == {"message": "key [redacted] and [redacted]"}, echo["arguments"]
    assert SECRET not in json.dumps(echo) and "sk-abcdefgh42" not in json.dumps(echo), echo

    total = by[("alice", "everything__get-sum")]
    assert total["outcome"] == "ok", total
    # Shapes only elsewhere: keys and types, never values.
    assert total["arguments"] == {"a": "integer", "b": "integer"}, total["arguments"]
    assert "42" not in json.dumps(total.get("result")), total["result"]
    assert total["result"]["content"] == ["text"], total["result"]

    denied = by[("bob", "everything__get-sum")]
    assert denied["decision"] == "deny" and denied["outcome"] == "denied", denied
    assert "get-sum" in denied.get("error", ""), denied

    # The same filters through `wf audit` and through the admin tool.
    assert [r["principal"] for r in audit_cli(wf, cfg, "--outcome", "denied")] == ["bob"]
    assert {r["capability"] for r in audit_cli(wf, cfg, "--capability", "everything__get-*")} == {"everything__get-sum"}
    assert [r["principal"] for r in audit_cli(wf, cfg, "--principal", "alice", "--capability", "*echo")] == ["alice"]
    assert audit_cli(wf, cfg, "--since", "1h", "--until", "1970-01-02") == []
    assert {r["principal"] for r in audit_cli(wf, cfg, "--group", "support")} == {"alice"}
    table = wf.run("audit", "--config", str(cfg), "--state-dir", str(wf.state_dir), "--principal", "bob")
    assert table.returncode == 0 and table.stdout.splitlines()[0].split()[:4] == ["time", "principal", "kind", "capability"]
    assert "bob" in table.stdout.splitlines()[1] and "denied" in table.stdout, table.stdout
    as_csv = wf.run("audit", "--config", str(cfg), "--state-dir", str(wf.state_dir), "--format", "csv")
    parsed = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert {r["principal"] for r in parsed} >= {"alice", "bob"}, as_csv.stdout

    async with http_client_with_headers(server.url, {"Authorization": f"Bearer {toks['alice']}"}) as c:
        found = await admin(c, "query_audit", {"principal": "bob", "since": "10m"})
        assert [r["capability"] for r in found["records"]] == ["everything__get-sum"], found
        none = await admin(c, "query_audit", {"outcome": "timed_out"})
        assert none["count"] == 0, none


async def test_a_small_row_bound_keeps_the_newest_records(wf: Wf, everything_bin: Path) -> None:
    toks = tokens()
    cfg = wf.write_config(config(everything_bin, toks, "[audit]\nmax_rows = 5\n"))
    server = wf.start_http("127.0.0.1", None, "--config", str(cfg), env={SECRET_ENV: SECRET})
    async with http_client_with_headers(server.url, {"Authorization": f"Bearer {toks['alice']}"}) as c:
        for i in range(12):
            with anyio.fail_after(OP_TIMEOUT):
                r = await c.call_tool("everything__echo", {"message": f"m{i}"})
            assert not r.is_error
        # Pruning follows the writes, which are batched: wait until the twelve
        # calls are written (in order, before any status call's own record)
        # and the trail is down to its bound.
        deadline = time.monotonic() + 20
        while True:
            status = await admin(c, "status")
            rows = audit_cli(wf, cfg)
            if (status["audit"]["written"] >= 12 and len(rows) <= 5) or time.monotonic() > deadline:
                break
            await anyio.sleep(0.2)
        assert len(rows) == 5, rows
        # The newest stay, newest first.
        assert rows == sorted(rows, key=lambda r: r["at"], reverse=True)
        assert status["audit"]["pruned"] >= 7 and status["audit"]["dropped"] == 0, status["audit"]


async def test_calls_go_on_while_the_store_is_locked_and_records_arrive_after(wf: Wf, everything_bin: Path) -> None:
    toks = tokens()
    cfg = wf.write_config(config(everything_bin, toks))
    # One worker (the default on two CPUs): a store call that waits must not
    # hold it, or every call waits with it.
    server = wf.start_http("127.0.0.1", None, "--config", str(cfg), "--workers", "1", env={SECRET_ENV: SECRET})
    async with http_client_with_headers(server.url, {"Authorization": f"Bearer {toks['alice']}"}) as c:
        with anyio.fail_after(OP_TIMEOUT):
            assert not (await c.call_tool("everything__echo", {"message": "warm"})).is_error
        db = sqlite3.connect(wf.state_dir / "wf.db", timeout=30, isolation_level=None)
        db.execute("BEGIN EXCLUSIVE")
        try:
            # Twenty calls, all answered while another process holds the write lock.
            for i in range(20):
                with anyio.fail_after(OP_TIMEOUT):
                    r = await c.call_tool("everything__echo", {"message": f"locked {i}"})
                assert not r.is_error, content_text(r.content)
            held = db.execute("SELECT COUNT(*) FROM audit_records").fetchone()[0]
        finally:
            db.execute("ROLLBACK")
            db.close()
        assert held <= 1, f"{held} records were written while the store was locked"
        rows = wait_records(wf, cfg, 21, "--capability", "everything__echo")
        status = await admin(c, "status")
        lost = status["audit"]["dropped"]
        assert len(rows) + lost == 21, (len(rows), status["audit"])
        assert lost == 0, status["audit"]


async def test_calls_on_two_replicas_appear_in_one_query(wf: Wf, everything_bin: Path) -> None:
    if not os.environ.get("WF_TEST_PG_URL"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but WF_TEST_PG_URL is unset: the replica test needs PostgreSQL")
        pytest.skip("WF_TEST_PG_URL is unset: no PostgreSQL to run replicas on")
    # Imported here: test_replicas skips its whole module without PostgreSQL.
    from test_replicas import HANDLE_SECRET, SECRET, replica_config, start_replicas

    cfg = replica_config(wf, extra=f'\n[sources.everything]\ncommand = "{everything_bin}"\n')
    replicas = start_replicas(wf, cfg, ["ra", "rb"])
    for name, server in replicas.items():
        async with http_client_with_headers(server.url, {}) as c:
            with anyio.fail_after(OP_TIMEOUT):
                r = await c.call_tool("everything__echo", {"message": f"from {name}"})
            assert not r.is_error, content_text(r.content)
    env = {"WF_E2E_PG_PASSWORD": SECRET, "WF_E2E_HANDLE_SECRET": HANDLE_SECRET}
    deadline = time.monotonic() + 20
    while True:
        proc = wf.run("audit", "--config", str(cfg), "--format", "jsonl", "--capability", "everything__echo", env=env)
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        if len(rows) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sorted(r["replica"] for r in rows) == ["ra", "rb"], rows


async def test_the_consoles_calls_view_shows_a_new_call_live(wf: Wf, everything_bin: Path) -> None:
    from console_support import browser, new_page, screenshot, start_console

    console = start_console(wf, f'[sources.everything]\ncommand = "{everything_bin}"\n')
    async with browser() as b:
        page = await new_page(b, 1280, tokens=console)
        await page.goto(f"{console.url}#/calls")
        await page.locator("#call-outcome").wait_for()
        await page.evaluate("window.wfSameDocument = true")
        async with console.mcp() as c:
            with anyio.fail_after(OP_TIMEOUT):
                r = await c.call_tool("everything__echo", {"message": "seen live"})
            assert not r.is_error
        # No reload: the open view picks the new record up (it looks every 500 ms).
        row = page.locator('tr:has(code:text-is("everything__echo"))')
        await row.first.wait_for()
        text = await row.first.inner_text()
        assert "allow" in text and "ok" in text, text
        assert await page.evaluate("window.wfSameDocument === true"), "the page was reloaded"
        # Filters: a denied-only view has no such row.
        await page.select_option("#call-outcome", "denied")
        await page.locator("text=No calls match.").wait_for()
        await page.select_option("#call-outcome", "ok")
        await row.first.wait_for()
        await screenshot(page, "calls", 1280)
        await page.context.close()


class LogsReceiver:
    """OTLP/HTTP on 127.0.0.1 keeping every log record of `POST /v1/logs` (decoded
    with `opentelemetry-proto`); traces and metrics are taken and ignored."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

        from conftest import free_port

        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.path == "/v1/logs":
                    req = logs_service_pb2.ExportLogsServiceRequest()
                    req.ParseFromString(body)
                    for rl in req.resource_logs:
                        for sl in rl.scope_logs:
                            for rec in sl.log_records:
                                attrs = {a.key: a.value.string_value for a in rec.attributes}
                                with receiver.lock:
                                    receiver.records.append(
                                        {"event": rec.event_name, "body": rec.body.string_value, "attrs": attrs}
                                    )
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()


async def test_records_go_to_the_otlp_collector_as_logs(wf: Wf, everything_bin: Path) -> None:
    receiver = LogsReceiver()
    try:
        toks = tokens()
        cfg = wf.write_config(
            config(everything_bin, toks, f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\n')
        )
        server = wf.start_http("127.0.0.1", None, "--config", str(cfg), env={SECRET_ENV: SECRET})
        failed, text = await call(server.url, toks["alice"], "everything__echo", {"message": "to the collector"})
        assert not failed, text
        deadline = time.monotonic() + 30
        found: list[dict[str, Any]] = []
        while not found and time.monotonic() < deadline:
            await anyio.sleep(0.2)
            with receiver.lock:
                found = [r for r in receiver.records if r["attrs"].get("wf.capability") == "everything__echo"]
        assert found, f"no audit log record reached the collector: {receiver.records}"
        rec = found[0]
        assert rec["event"] == "wf.audit", rec
        assert rec["attrs"]["wf.principal"] == "alice" and rec["attrs"]["wf.outcome"] == "ok", rec
        body = json.loads(rec["body"])
        assert body["capability"] == "everything__echo" and body["arguments"] == {"message": "string(16)"}, body
    finally:
        receiver.close()


async def test_every_path_into_a_capability_leaves_one_record(wf: Wf, everything_bin: Path) -> None:
    """Over stdio (principal `local`): a proxied call, `wf_call`, a prompt, a resource
    read, a completion, the planner's `call_capability`, a workflow node and an admin
    tool each leave one record of their own kind."""
    from conftest import all_resources, wait_listed

    # One Cedar policy permits everything: each allowed record names it.
    wf.write_config('@id("everyone-may")\npermit(principal, action, resource);\n', "policy.cedar")
    cfg = wf.write_config(f'[policy]\nfiles = ["policy.cedar"]\n\n[sources.everything]\ncommand = "{everything_bin}"\n')
    async with wf.stdio_client("legacy", "--config", str(cfg)) as c:
        with anyio.fail_after(OP_TIMEOUT * 2):
            await wait_listed(c, "everything__echo")
            assert not (await c.call_tool("everything__echo", {"message": "proxied"})).is_error
            assert not (await c.call_tool("wf_call", {"name": "everything__get-sum", "arguments": {"a": 1, "b": 2}})).is_error
            await c.get_prompt("everything__simple-prompt", {})
            uri = next(str(r.uri) for r in await all_resources(c) if not str(r.uri).startswith("wf://"))
            await c.read_resource(uri)
            called = await c.call_tool("wf_planner__call_capability", {"ref": "everything.echo", "arguments": {"message": "via planner"}})
            assert not called.is_error, content_text(called.content)
            run = await c.call_tool(
                "wf_planner__run_workflow",
                {"workflow": {"name": "w", "nodes": [{"id": "say", "use": "everything.echo", "args": {"message": "node"}}]}},
            )
            assert not run.is_error, content_text(run.content)
            run_id = run.structured_content["run_id"]
            assert not (await c.call_tool("wf_admin__status", {})).is_error

    rows = wait_records(wf, cfg, 9)
    seen = {(r["kind"], r["capability"]) for r in rows}
    assert all(r["principal"] == "local" and r["decision"] == "allow" and r["outcome"] == "ok" for r in rows), rows
    for want in [
        ("tool", "everything__echo"),
        ("tool", "everything__get-sum"),
        ("prompt", "everything__simple-prompt"),
        ("resource", uri),
        ("tool", "wf_planner__call_capability"),
        ("tool", "wf_planner__run_workflow"),
        ("node", "everything__echo"),
        ("tool", "wf_admin__status"),
    ]:
        assert want in seen, f"no record of {want}: {sorted(seen)}"
    node = next(r for r in rows if r["kind"] == "node")
    assert (node["run_id"], node["node_id"], node["transport"]) == (run_id, "say", "internal"), node
    by_run = audit_cli(wf, cfg, "--run", run_id)
    assert [r["node_id"] for r in by_run] == ["say"], by_run
    # The planner's inner call is one record, its tools/call another.
    echoes = [r for r in rows if r["kind"] == "tool" and r["capability"] == "everything__echo"]
    assert len(echoes) == 2, echoes
    assert {r["transport"] for r in echoes} == {"stdio", "internal"}, echoes
    # The permitting policy, on every path the policy set governs.
    assert all(r["policies"] == ["everyone-may"] for r in rows if r["kind"] in ("tool", "node", "prompt")), rows
    # The client as name/version (what it said in initialize).
    proxied = next(r for r in echoes if r["transport"] == "stdio")
    name, _, version = (proxied.get("client") or "").partition("/")
    assert name and version, proxied
