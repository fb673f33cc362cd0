"""Replicas under the faults a team's deployment meets, on real PostgreSQL with
real `wf serve --http` replicas and the official `mcp` client:

- replicas started together on an empty database, and on one an older wf left
  at schema version 3, all start, and each migration is applied once;
- a replica paused (SIGSTOP) past its lease, whose run another replica ended,
  writes nothing more for that run when it wakes, and serves new runs;
- PostgreSQL stopped and started under a run that ends meanwhile: the run
  reaches its true end once the database is back (no peer takes the outage's
  lapsed leases for deaths), and draining does not wait for it;
- `/readyz` and `list_sources` answer while a catalog snapshot write waits on
  a table lock held on purpose (no lock held across a store call);
- every request that needs its handle's replica gets the retryable -32050 (or
  421) answer naming that replica, `wf_session__close` included.

Needs a PostgreSQL server (`WF_TEST_PG_URL`, as test_replicas.py); the outage
test starts a throwaway cluster of its own with tests/pg/cluster.sh.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import httpx2
import pytest

from admin_support import admin
from conftest import HttpServer, Wf, port_accepts, tail
from planner_support import get_run, planner, wait_node, wait_run
from test_http_direct import HEADERS, META
from test_replicas import HANDLE_SECRET, PG_URL, SECRET, WRONG_REPLICA, readyz
from test_tasks_runs import Raw

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "tests" / "pg" / "cluster.sh"
LEASE_TTL_MS = 2000
HEARTBEAT_MS = 300
ENV = {"WF_E2E_PG_PASSWORD": SECRET, "WF_E2E_HANDLE_SECRET": HANDLE_SECRET}


def psql(url: str, sql: str) -> str:
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"), key=lambda p: int(p.parts[-3]))
    assert bins, "psql from Debian's postgresql package"
    out = subprocess.run([str(bins[-1]), url, "-Atc", sql], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def config_text(url: str, schema: str, extra: str = "", drain_timeout_ms: int | None = None) -> str:
    assert url.startswith("postgres://wf@"), url
    url = url.replace("postgres://wf@", "postgres://wf:${WF_E2E_PG_PASSWORD}@", 1)
    return (
        "[store]\n"
        f'url = "{url}"\n'
        f'schema = "{schema}"\n'
        f"lease_ttl_ms = {LEASE_TTL_MS}\n"
        f"heartbeat_ms = {HEARTBEAT_MS}\n"
        'handle_secret = "${WF_E2E_HANDLE_SECRET}"\n'
        + (f"drain_timeout_ms = {drain_timeout_ms}\n" if drain_timeout_ms is not None else "")
        + extra
    )


def new_schema() -> str:
    return "e2e_" + uuid.uuid4().hex[:12]


def start_together(wf: Wf, config: Path, names: list[str]) -> dict[str, HttpServer]:
    """Starts every replica before waiting for any: their migrations race."""
    servers = {
        n: wf.start_http("127.0.0.1", None, "--config", str(config), "--replica-id", n, env=ENV, wait=False)
        for n in names
    }
    deadline = time.monotonic() + 60
    for n, s in servers.items():
        while not (port_accepts("127.0.0.1", s.port) and readyz(s)[0] == 200):
            assert s.proc.poll() is None, f"replica {n} exited {s.proc.returncode}:\n{tail(s.log)}"
            assert time.monotonic() < deadline, f"replica {n} not ready:\n{tail(s.log)}"
            time.sleep(0.05)
    return servers


def versions(schema: str) -> list[tuple[int, int]]:
    out = psql(PG_URL, f"SELECT version, count(*) FROM {schema}.schema_migrations GROUP BY version ORDER BY version")
    return [tuple(int(x) for x in line.split("|")) for line in out.splitlines()]  # type: ignore[misc]


def test_replicas_started_together_on_an_empty_and_on_a_version_3_database_all_start(wf: Wf) -> None:
    schema = new_schema()
    config = wf.write_config(config_text(PG_URL, schema))
    r = start_together(wf, config, ["a", "b", "c"])
    applied = versions(schema)
    assert applied and all(n == 1 for _, n in applied), applied
    latest = applied[-1][0]
    assert [v for v, _ in applied] == list(range(1, latest + 1)), applied
    for s in r.values():
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=30) == 0, tail(s.log)

    # As an older wf (schema version 3) left it; then a rolling upgrade starts three at once.
    psql(
        PG_URL,
        f"DELETE FROM {schema}.schema_migrations WHERE version >= 4; "
        f"ALTER TABLE {schema}.run_tasks DROP COLUMN source, DROP COLUMN source_task",
    )
    assert versions(schema)[-1][0] == 3
    r = start_together(wf, config, ["d", "e", "f"])
    assert versions(schema) == applied, "each version once, the schema complete"
    psql(PG_URL, f"SELECT source, source_task FROM {schema}.run_tasks")
    for n, s in r.items():
        log = s.log.read_text(errors="replace")
        assert "already exists" not in log, (n, tail(s.log))


async def test_a_paused_replica_writes_nothing_for_the_run_it_lost_and_serves_new_runs(wf: Wf) -> None:
    config = wf.write_config(config_text(PG_URL, new_schema()))
    r = {n: wf.start_http("127.0.0.1", None, "--config", str(config), "--replica-id", n, env=ENV) for n in ("a", "b")}
    nap_ms = 4000
    slow = {"name": "nap", "nodes": [{"id": "nap", "use": "wf.std.sleep", "args": {"ms": nap_ms}}]}
    async with wf.http_client(r["a"]) as a:
        started = await planner(a, "run_workflow", {"workflow": slow, "wait": False})
        run_id = started["run_id"]
        await wait_node(a, run_id, "nap", "running")
    paused_at = time.monotonic()
    r["a"].proc.send_signal(signal.SIGSTOP)
    try:
        async with wf.http_client(r["b"]) as b:
            ended, nodes_then = await wait_run(b, run_id, timeout=60)
            assert ended["status"] == "interrupted", ended
            assert nodes_then["nap"]["status"] == "interrupted", nodes_then
            # Past the moment A's sleep ends: A's timer is due when it wakes.
            await anyio.sleep(max(0.0, nap_ms / 1000 + 1 - (time.monotonic() - paused_at)))
    finally:
        r["a"].proc.send_signal(signal.SIGCONT)
    log = r["a"].log
    deadline = time.monotonic() + 30
    while "no longer holds run" not in log.read_text(errors="replace") and "lost the run's lease" not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, tail(log)
        await anyio.sleep(0.1)
    await anyio.sleep(1.0)  # anything A still meant to write has had its chance
    async with wf.http_client(r["b"]) as b:
        run_now, nodes_now = await get_run(b, run_id)
    assert run_now == ended, (ended, run_now)
    assert nodes_now == nodes_then, "A wrote nothing more for the run it lost"
    # A serves new runs.
    short = {"name": "short", "nodes": [{"id": "hi", "use": "wf.std.const", "args": {"value": 1}}]}
    async with wf.http_client(r["a"]) as a:
        done = await planner(a, "run_workflow", {"workflow": short})
        assert done["status"] == "succeeded", done


@pytest.fixture
def own_cluster():
    """A PostgreSQL cluster this test may stop and start."""
    parent = tempfile.mkdtemp(prefix="wf-pg-outage.")
    os.chmod(parent, 0o755)
    where = str(Path(parent) / "cluster")
    url = subprocess.run(["bash", str(CLUSTER), "start", where], capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    try:
        yield where, url
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", where], capture_output=True, timeout=120)


async def test_a_run_that_ends_while_the_database_is_down_gets_its_true_end_once_it_is_back(wf: Wf, own_cluster) -> None:
    where, url = own_cluster
    config = wf.write_config(config_text(url, new_schema(), drain_timeout_ms=60000))
    r = {n: wf.start_http("127.0.0.1", None, "--config", str(config), "--replica-id", n, env=ENV) for n in ("a", "b")}
    doc = {
        "name": "through",
        "nodes": [
            {"id": "nap", "use": "wf.std.sleep", "args": {"ms": 2500}},
            {"id": "after", "use": "wf.std.const", "args": {"value": "done"}, "after": ["nap"]},
        ],
        "outputs": {"v": {"$ref": "nodes.after.output"}},
    }
    async with wf.http_client(r["a"]) as a:
        started = await planner(a, "run_workflow", {"workflow": doc, "wait": False})
        run_id = started["run_id"]
        await wait_node(a, run_id, "nap", "running")
    subprocess.run(["bash", str(CLUSTER), "down", where], check=True, timeout=120)
    down_at = time.monotonic()
    # While the database is down, /readyz says so (a load balancer stops routing here).
    status, body = readyz(r["a"])
    assert status == 503, (status, body)
    # The run ends meanwhile; the outage outlasts the lease (2 s) twice over.
    time.sleep(max(0.0, 5.5 - (time.monotonic() - down_at)))
    subprocess.run(["bash", str(CLUSTER), "up", where], check=True, timeout=120)
    back = time.monotonic()
    async with wf.http_client(r["b"]) as b:
        run, nodes = await wait_run(b, run_id, timeout=60, poll=0.1)
    took = time.monotonic() - back
    assert run["status"] == "succeeded", (run, tail(r["a"].log), tail(r["b"].log))
    assert nodes["after"]["status"] == "succeeded", nodes
    assert "done" in str(run["outputs"]), run
    # Generous on a loaded 2-core machine; the figure is for the log.
    assert took < 30, took
    print(f"the run's end was recorded {took:.2f} s after PostgreSQL came back")
    log_a = r["a"].log.read_text(errors="replace")
    assert "retrying until the store answers" in log_a, tail(r["a"].log)
    # Nothing of A's is left running: its drain does not wait out the 60 s.
    stopping = time.monotonic()
    r["a"].proc.send_signal(signal.SIGTERM)
    assert r["a"].proc.wait(timeout=30) == 0, tail(r["a"].log)
    assert time.monotonic() - stopping < 20
    # B did not take A's lapsed lease for a death.
    assert "run interrupted" not in r["b"].log.read_text(errors="replace"), tail(r["b"].log)


async def test_the_drain_timeout_ends_unfinished_runs_interrupted(wf: Wf) -> None:
    config = wf.write_config(config_text(PG_URL, new_schema(), drain_timeout_ms=1000))
    r = {n: wf.start_http("127.0.0.1", None, "--config", str(config), "--replica-id", n, env=ENV) for n in ("a", "b")}
    slow = {"name": "slow", "nodes": [{"id": "nap", "use": "wf.std.sleep", "args": {"ms": 120000}}]}
    async with wf.http_client(r["a"]) as a:
        run_id = (await planner(a, "run_workflow", {"workflow": slow, "wait": False}))["run_id"]
        await wait_node(a, run_id, "nap", "running")
    r["a"].proc.send_signal(signal.SIGTERM)
    assert r["a"].proc.wait(timeout=60) == 0, tail(r["a"].log)
    async with wf.http_client(r["b"]) as b:
        run, nodes = await get_run(b, run_id)
    assert run["status"] == "interrupted", run
    assert "shut down" in (run["error"] or ""), run
    assert nodes["nap"]["status"] == "interrupted", nodes


async def test_readyz_and_list_sources_answer_while_a_snapshot_write_waits_on_the_store(wf: Wf, fixture_upstream_bin: Path) -> None:
    schema = new_schema()
    extra = f'\n[admin]\nover_http = "open"\n\n[sources.fx]\ncommand = "{fixture_upstream_bin}"\n'
    config = wf.write_config(config_text(PG_URL, schema, extra))
    r = wf.start_http("127.0.0.1", None, "--config", str(config), "--replica-id", "a", env=ENV)
    async with wf.http_client(r) as c:
        deadline = time.monotonic() + 60
        while "fx__echo" not in {t.name for t in (await c.list_tools()).tools}:
            assert time.monotonic() < deadline
            await anyio.sleep(0.1)
        # A writer holds the snapshot table for 8 s: the next snapshot write waits on it.
        held_for = 8
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"), key=lambda p: int(p.parts[-3]))
        holder = subprocess.Popen(
            [str(bins[-1]), PG_URL, "-Atc", f"BEGIN; LOCK TABLE {schema}.catalog_snapshots IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep({held_for}); COMMIT;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            await anyio.sleep(0.5)
            refresh_done = anyio.Event()

            async def refresh() -> None:
                async with wf.http_client(r) as other:
                    await admin(other, "refresh_catalog", {"source": "fx"})
                refresh_done.set()

            slowest = 0.0
            answered = 0
            async with anyio.create_task_group() as tg:
                tg.start_soon(refresh)
                await anyio.sleep(0.5)  # the rediscovery is done; its snapshot write waits
                until = time.monotonic() + 4
                async with httpx2.AsyncClient(timeout=30) as http:
                    while time.monotonic() < until:
                        t0 = time.monotonic()
                        got = await http.get(f"{r.base_url}/readyz")
                        assert got.status_code == 200, got.text
                        listed = await admin(c, "list_sources")
                        assert any(s["name"] == "fx" for s in listed["sources"]), listed
                        slowest = max(slowest, time.monotonic() - t0)
                        answered += 1
                still_held = holder.poll() is None
            assert still_held, "the lock was held throughout the hammering"
            assert answered >= 10, answered
            # Against an 8 s lock: anything waiting behind it would take seconds.
            assert slowest < 2.0, slowest
            print(f"{answered} readyz + list_sources pairs while the store was held; slowest {slowest * 1000:.0f} ms")
        finally:
            holder.wait(timeout=60)


async def test_every_request_that_needs_its_replica_names_it_on_the_wrong_one(wf: Wf) -> None:
    config = wf.write_config(config_text(PG_URL, new_schema()))
    r = {n: wf.start_http("127.0.0.1", None, "--config", str(config), "--replica-id", n, env=ENV) for n in ("a", "b")}
    slow = {"name": "slow", "nodes": [{"id": "nap", "use": "wf.std.sleep", "args": {"ms": 120000}}]}

    def names_a(reply: dict, what: str) -> None:
        error = reply.get("error", {})
        assert error.get("code") == WRONG_REPLICA, (what, reply)
        assert error["data"] == {"replica": "a", "retryable": True}, (what, reply)

    async with httpx2.AsyncClient(timeout=60) as http:
        on_a, on_b = Raw(http, r["a"].url, "none"), Raw(http, r["b"].url, "none")
        task_id = (await on_a.run_workflow(slow))["result"]["taskId"]
        for method, params in (
            ("tasks/get", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
            ("tasks/cancel", {"taskId": task_id}),
        ):
            names_a(await on_b.request(method, params, task_id), method)
        await on_a.request("tasks/cancel", {"taskId": task_id}, task_id)

        # A session handle: a call carrying it, and wf_session__close of it.
        opened = (await on_a.request("tools/call", {"name": "wf_session__open", "arguments": {}}, "wf_session__open"))["result"]
        handle = opened["structuredContent"]["handle"]
        params = {"name": "wf_std__const", "arguments": {"value": 7}, "_meta": {**META, "wf/session": handle}}
        body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
        got = await http.post(r["b"].url, json=body, headers={**HEADERS, "mcp-name": "wf_std__const"})
        names_a(got.json(), "a call with a wf/session handle")
        closing = await on_b.request("tools/call", {"name": "wf_session__close", "arguments": {"handle": handle}}, "wf_session__close")
        names_a(closing, "wf_session__close")
        assert handle not in str(closing), "a handle is a credential: never echoed"
        closed = await on_a.request("tools/call", {"name": "wf_session__close", "arguments": {"handle": handle}}, "wf_session__close")
        assert closed["result"]["structuredContent"]["closed"] is True, closed

        # A 2025-11-25 session: POST, its GET stream and DELETE.
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        }
        head = {"accept": "application/json, text/event-stream"}
        opened = await http.post(r["a"].url, json=init, headers=head)
        session = opened.headers["mcp-session-id"]
        head = {**head, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        for method, send in (
            ("POST", lambda: http.post(r["b"].url, json=listing, headers=head)),
            ("GET", lambda: http.get(r["b"].url, headers={**head, "accept": "text/event-stream"})),
            ("DELETE", lambda: http.delete(r["b"].url, headers=head)),
        ):
            got = await send()
            assert got.status_code == 421, (method, got.status_code, got.text)
            assert got.headers["wf-replica"] == "a", (method, got.headers)
            names_a(got.json(), method)
        deleted = await http.delete(r["a"].url, headers=head)
        assert deleted.status_code == 200, deleted.text
