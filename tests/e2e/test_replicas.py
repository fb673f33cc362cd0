"""Several `wf serve --http` replicas on one PostgreSQL database (issue #35),
driven by the official `mcp` client (and raw HTTP where it has no API): what
one replica saves the others see, a killed replica's run ends `interrupted`
once its lease expires, a cancel sent to one replica stops a run executing on
another, a deploy on one is announced to another's clients, an operator's
`reload` on one reloads the others, `wf_admin` config edits are refused, and a task id, MRTR `requestState`, session handle or
`Mcp-Session-Id` of one replica used on another gets an error naming its owner.

Needs a PostgreSQL server: `WF_TEST_PG_URL` (tests/run starts a throwaway
cluster with tests/pg/cluster.sh). Without it the tests skip, except under
CI=true, where they fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import json
import urllib.error

import httpx2
import urllib.request
import pytest

from admin_support import admin, admin_outcome
from conftest import HttpServer, Wf, tail
from list_changed_support import list_changed_waiter
from test_http_direct import HEADERS, META, post, wait_listed
from test_tasks_runs import Raw
from planner_support import get_run, planner, planner_error, wait_node, wait_run

pytestmark = pytest.mark.anyio

PG_URL = os.environ.get("WF_TEST_PG_URL", "")
if not PG_URL:
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI=true but WF_TEST_PG_URL is unset: the replica tests need PostgreSQL")
    pytest.skip("WF_TEST_PG_URL is unset: no PostgreSQL to run replicas on", allow_module_level=True)

# Short leases so a dead replica is noticed within seconds.
LEASE_TTL_MS = 2000
HEARTBEAT_MS = 300
SECRET = "pg-secret-never-logged"
HANDLE_SECRET = "handle-key-" + uuid.uuid4().hex
SLOW = {"name": "slow", "nodes": [{"id": "nap", "use": "wf.std.sleep", "args": {"ms": 120000}}]}


def replica_config(wf: Wf, drain_timeout_ms: int | None = None, extra: str = "") -> Path:
    """One database schema per test; the password comes from `${WF_E2E_PG_PASSWORD}`
    (the test cluster trusts loopback, so any password works, and none may be logged)."""
    assert PG_URL.startswith("postgres://wf@"), PG_URL
    url = PG_URL.replace("postgres://wf@", "postgres://wf:${WF_E2E_PG_PASSWORD}@", 1)
    schema = "e2e_" + uuid.uuid4().hex[:12]
    return wf.write_config(
        "[store]\n"
        f'url = "{url}"\n'
        f'schema = "{schema}"\n'
        f"lease_ttl_ms = {LEASE_TTL_MS}\n"
        f"heartbeat_ms = {HEARTBEAT_MS}\n"
        'handle_secret = "${WF_E2E_HANDLE_SECRET}"\n'
        + (f"drain_timeout_ms = {drain_timeout_ms}\n" if drain_timeout_ms is not None else "")
        + extra
    )


def start_replicas(wf: Wf, config: Path, names: list[str]) -> dict[str, HttpServer]:
    env = {"WF_E2E_PG_PASSWORD": SECRET, "WF_E2E_HANDLE_SECRET": HANDLE_SECRET}
    return {
        n: wf.start_http("127.0.0.1", None, "--config", str(config), "--replica-id", n, env=env)
        for n in names
    }


async def test_a_draft_saved_on_one_replica_is_published_on_another_and_run_on_a_third(wf: Wf) -> None:
    config = replica_config(wf)
    r = start_replicas(wf, config, ["a", "b", "c"])
    hello = {
        "name": "hello",
        "inputs": {"type": "object", "properties": {"who": {"type": "string"}}},
        "nodes": [{"id": "greet", "use": "wf.std.template", "args": {"template": "hi {{w}}", "values": {"w": {"$ref": "inputs.who"}}}}],
        "outputs": {"text": {"$ref": "nodes.greet.output"}},
    }
    async with wf.http_client(r["a"]) as a:
        draft = await planner(a, "save_draft", {"workflow": hello})
        assert draft["valid"], draft
    async with wf.http_client(r["b"]) as b:
        got = await planner(b, "get_draft", {"draft_id": draft["draft_id"]})
        assert got["name"] == "hello"
        artifact = await planner(b, "publish_artifact", {"draft_id": draft["draft_id"]})
        assert artifact["artifact"] == "hello@1"
        await planner(b, "deploy", {"name": "greeter", "artifact": artifact["artifact"]})
    async with wf.http_client(r["c"]) as c:
        run = await planner(c, "run_deployment", {"name": "greeter", "inputs": {"who": "Ada"}})
        assert run["status"] == "succeeded", run
        assert "Ada" in str(run["outputs"]), run
    # Every replica sees the run C executed.
    async with wf.http_client(r["a"]) as a:
        seen, _ = await get_run(a, run["run_id"])
        assert seen["status"] == "succeeded"
        assert seen["origin"]["kind"] == "deployment"
    for server in r.values():
        assert SECRET not in server.log.read_text(errors="replace"), tail(server.log)


async def test_a_killed_replicas_run_ends_interrupted_once_its_lease_expires(wf: Wf) -> None:
    config = replica_config(wf)
    r = start_replicas(wf, config, ["a", "b"])
    async with wf.http_client(r["a"]) as a:
        started = await planner(a, "run_workflow", {"workflow": SLOW, "wait": False})
        run_id = started["run_id"]
        await wait_node(a, run_id, "nap", "running")
    r["a"].proc.send_signal(signal.SIGKILL)
    r["a"].proc.wait(timeout=10)
    killed_at = time.monotonic()
    async with wf.http_client(r["b"]) as b:
        seen, _ = await get_run(b, run_id)
        assert seen["status"] == "running", "B sees A's run while A's lease may still be live"
        run, nodes = await wait_run(b, run_id, timeout=60)
        waited = time.monotonic() - killed_at
    assert run["status"] == "interrupted", run
    assert "lease" in (run["error"] or ""), run
    assert nodes["nap"]["status"] == "interrupted", nodes
    # Not before the lease could have lapsed (B ends only expired leases);
    # how soon after is a figure for the benchmarks, not a test.
    assert waited >= LEASE_TTL_MS / 1000 - 0.5, waited


async def test_a_cancel_sent_to_one_replica_stops_a_run_on_another(wf: Wf) -> None:
    config = replica_config(wf)
    r = start_replicas(wf, config, ["a", "b"])
    async with wf.http_client(r["a"]) as a:
        started = await planner(a, "run_workflow", {"workflow": SLOW, "wait": False})
        run_id = started["run_id"]
        await wait_node(a, run_id, "nap", "running")
        async with wf.http_client(r["b"]) as b:
            cancelled = await planner(b, "cancel_run", {"run_id": run_id})
            assert cancelled["cancelled"] is True, cancelled
            assert cancelled["status"] == "cancelled", cancelled
        run, nodes = await wait_run(a, run_id, timeout=30)
    assert run["status"] == "cancelled", run
    assert nodes["nap"]["status"] in ("cancelled", "failed"), nodes
    assert r["a"].proc.poll() is None, "A still serves"
    assert "cancel received from another replica" in r["a"].log.read_text(errors="replace")


def readyz(server: HttpServer) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{server.base_url}/readyz", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


async def test_sigterm_drains_runs_in_progress_and_readyz_says_so(wf: Wf) -> None:
    config = replica_config(wf, drain_timeout_ms=60000)
    r = start_replicas(wf, config, ["a", "b"])
    deadline = time.monotonic() + 30
    while readyz(r["a"])[0] != 200:
        assert time.monotonic() < deadline, readyz(r["a"])
        time.sleep(0.05)
    assert readyz(r["a"])[1] == {"ready": True, "replica": "a"}
    short = {"name": "short", "nodes": [{"id": "nap", "use": "wf.std.sleep", "args": {"ms": 3000}}]}
    async with wf.http_client(r["a"]) as a:
        started = await planner(a, "run_workflow", {"workflow": short, "wait": False})
        run_id = started["run_id"]
        await wait_node(a, run_id, "nap", "running")
        r["a"].proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while (got := readyz(r["a"]))[0] != 503:
            assert time.monotonic() < deadline, got
            time.sleep(0.05)
        assert "draining" in got[1]["reason"], got
        # No new run starts on a draining replica; the one in progress goes on.
        refused = await planner_error(a, "run_workflow", {"workflow": short, "wait": False})
        assert "draining" in str(refused), refused
    async with wf.http_client(r["b"]) as b:
        run, _ = await wait_run(b, run_id, timeout=30)
    assert run["status"] == "succeeded", run
    assert r["a"].proc.wait(timeout=30) == 0, tail(r["a"].log)
    # B never drained.
    assert readyz(r["b"])[0] == 200


async def test_admin_config_edits_are_refused_with_several_replicas(wf: Wf) -> None:
    config = replica_config(wf, extra='\n[admin]\nover_http = "open"\n')
    before = config.read_text()
    r = start_replicas(wf, config, ["a"])
    async with wf.http_client(r["a"]) as a:
        failed, why = await admin_outcome(a, "add_source", {"name": "extra", "config": {"url": "http://127.0.0.1:9/mcp"}})
        assert failed, why
        assert "several replicas" in str(why) and "source of truth" in str(why), why
        failed, why = await admin_outcome(a, "disable_source", {"name": "anything"})
        assert failed and "several replicas" in str(why), why
        # Reading and reloading the file still work.
        status = await admin(a, "status")
        assert status is not None
        reloaded = await admin(a, "reload")
        assert reloaded["sources"]["added"] == [] and reloaded["sources"]["removed"] == [], reloaded
    assert config.read_text() == before, "nothing was written"


async def test_a_deploy_on_one_replica_refreshes_the_others_tools_and_tells_their_clients(wf: Wf) -> None:
    config = replica_config(wf)
    r = start_replicas(wf, config, ["a", "b"])
    doc = {"name": "greet", "nodes": [{"id": "hi", "use": "wf.std.template", "args": {"template": "hi", "values": {}}}]}
    notes: list = []

    async def handler(message: object) -> None:
        notes.append(message)

    async with wf.http_client(r["b"], "legacy", message_handler=handler) as b:
        async with list_changed_waiter(b, notes) as announced:
            before = {t.name for t in (await b.list_tools()).tools}
            async with wf.http_client(r["a"]) as a:
                draft = await planner(a, "save_draft", {"workflow": doc})
                artifact = await planner(a, "publish_artifact", {"draft_id": draft["draft_id"]})
                deployed = await planner(a, "deploy", {"name": "greeter", "artifact": artifact["artifact"]})
            tool = deployed["tool"]
            assert tool and tool not in before, (tool, before)
            # B never saw the deploy call: PostgreSQL's NOTIFY told it.
            await announced(30)
            after = {t.name for t in (await b.list_tools()).tools}
            assert tool in after, after
            result = await b.call_tool(tool, {})
            assert not result.is_error, result
    assert "deployments changed" in r["b"].log.read_text(errors="replace")


async def test_a_reload_on_one_replica_reloads_the_others(wf: Wf, fixture_upstream_bin: Path) -> None:
    """With the file watcher off, an operator's `reload` on A is announced through
    PostgreSQL and B reloads its own copy of the file: B serves the new source
    without anyone calling B."""
    extra = '\n[admin]\nover_http = "open"\n'
    config = replica_config(wf, extra=extra).read_text()
    config = config.replace("[store]", "[server]\nwatch_config = false\n\n[store]", 1)
    files = {n: wf.write_config(config, f"wf-{n}.toml") for n in ("a", "b")}
    env = {"WF_E2E_PG_PASSWORD": SECRET, "WF_E2E_HANDLE_SECRET": HANDLE_SECRET}
    r = {n: wf.start_http("127.0.0.1", None, "--config", str(files[n]), "--replica-id", n, env=env) for n in files}
    source = f'\n[sources.late]\ncommand = "{fixture_upstream_bin}"\n'
    for f in files.values():
        f.write_text(f.read_text() + source)
    time.sleep(1.0)  # a watcher, had it been on, would have reloaded by now
    async with wf.http_client(r["b"]) as b:
        assert "late__echo" not in {t.name for t in (await b.list_tools()).tools}, "B's watcher is off"
    async with wf.http_client(r["a"]) as a:
        outcome = await admin(a, "reload")
        assert outcome["sources"]["added"] == ["late"], outcome
        assert outcome.get("replicas_told") is True, outcome
    await wait_listed(r["b"].url, "late__echo")
    log_b = r["b"].log.read_text(errors="replace")
    assert "replica a reloaded its own" in log_b, tail(r["b"].log)
    # A does not reload again on hearing its own announcement.
    assert "reloaded its own" not in r["a"].log.read_text(errors="replace")


def test_the_replicas_example_runs(wf: Wf) -> None:
    """examples/replicas/run.sh --check, as an operator runs it: its own throwaway
    cluster from Debian's postgresql, `wf store migrate`, three replicas, a draft
    saved on the first, deployed on the second and run on the third, then SIGTERM."""
    script = Path(__file__).resolve().parents[2] / "examples" / "replicas" / "run.sh"
    base = free_ports_from(3)
    env = {**wf.env(), "WF_BIN": str(wf.bin), "WF_PLUGINS": str(wf.plugin_dir), "FIRST_PORT": str(base)}
    env.pop("WF_STORE_URL", None)
    done = subprocess.run(["bash", str(script), "--check"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ran it on wf-3: succeeded" in done.stdout, done.stdout
    assert "drained and stopped: ok" in done.stdout, done.stdout


def free_ports_from(n: int) -> int:
    """A first port such that it and the next n-1 are free on loopback now,
    below the kernel's ephemeral range: the script binds them only after
    setting up PostgreSQL, and meanwhile another test's outgoing connection
    could take one from that range (seen: "cannot bind … Address already in use")."""
    import random
    import socket

    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        base = random.randrange(20000, max(low - n, 20001))
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


WRONG_REPLICA = -32050


async def test_a_task_id_or_session_id_of_one_replica_used_on_another_names_its_owner(wf: Wf) -> None:
    config = replica_config(wf)
    r = start_replicas(wf, config, ["a", "b"])
    async with httpx2.AsyncClient(timeout=60) as http:
        # A task (a 2026-07-28 client) started on A, polled on B.
        on_a, on_b = Raw(http, r["a"].url, "none"), Raw(http, r["b"].url, "none")
        created = (await on_a.run_workflow(SLOW))["result"]
        assert created["resultType"] == "task", created
        task_id = created["taskId"]
        assert task_id.startswith("wft-") and "a".encode().hex() in task_id, task_id
        for method in ("tasks/get", "tasks/cancel"):
            refused = await on_b.request(method, {"taskId": task_id}, task_id)
            error = refused.get("error", {})
            assert error.get("code") == WRONG_REPLICA, (method, refused)
            assert error["data"]["replica"] == "a" and error["data"]["retryable"] is True, refused
            assert '"a"' in error["message"], refused
        # On its own replica the same id works; a forged one is just unknown.
        assert (await on_a.get(task_id))["result"]["status"] == "working"
        forged = task_id[:-4] + ("0000" if not task_id.endswith("0000") else "1111")
        refused = await on_b.request("tasks/get", {"taskId": forged}, forged)
        assert refused["error"]["code"] == -32602, refused
        await on_a.request("tasks/cancel", {"taskId": task_id}, task_id)

        # A session handle (wf_session__open, for 2026-07-28 clients) opened on A, used on B.
        tool = "wf_session__open"
        opened = (await on_a.request("tools/call", {"name": tool, "arguments": {}}, tool))["result"]
        handle = opened["structuredContent"]["handle"]
        assert "a".encode().hex() in handle, opened

        async def const_with(url: str, presented: str) -> dict:
            params = {"name": "wf_std__const", "arguments": {"value": 7}, "_meta": {**META, "wf/session": presented}}
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
            got = await http.post(url, json=body, headers={**HEADERS, "mcp-name": "wf_std__const"})
            assert got.status_code == 200, got.text
            return got.json()

        refused = await const_with(r["b"].url, handle)
        assert refused["error"]["code"] == WRONG_REPLICA and refused["error"]["data"]["replica"] == "a", refused
        assert handle not in json.dumps(refused), "a session handle is a credential: never echoed"
        served = await const_with(r["a"].url, handle)
        assert "result" in served and not served["result"].get("isError"), served

        # A 2025-11-25 session opened on A, used on B.
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        }
        head = {"accept": "application/json, text/event-stream"}
        opened = await http.post(r["a"].url, json=init, headers=head)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        head = {**head, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        elsewhere = await http.post(r["b"].url, json=listing, headers=head)
        assert elsewhere.status_code == 421, (elsewhere.status_code, elsewhere.text)
        assert elsewhere.headers["wf-replica"] == "a", elsewhere.headers
        error = elsewhere.json()["error"]
        assert error["code"] == WRONG_REPLICA and error["data"] == {"replica": "a", "retryable": True}, error
        # The same request on A is served.
        await http.post(r["a"].url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=head)
        served = await http.post(r["a"].url, json=listing, headers=head)
        assert served.status_code == 200, served.text
        assert "wf_planner__run_workflow" in served.text
        # Altered (moved to B without the key): B does not know it at all.
        moved = session.replace("a".encode().hex() + ".", "b".encode().hex() + ".")
        lost = await http.post(r["b"].url, json=listing, headers={**head, "mcp-session-id": moved})
        assert lost.status_code == 404, (lost.status_code, lost.text)


async def test_an_mrtr_retry_on_the_wrong_replica_names_the_replica_that_waits(wf: Wf, fixture_upstream_bin: Path) -> None:
    source = f'\n[sources.fix]\ncommand = "{fixture_upstream_bin}"\nargs = ["--asks"]\nsession = "shared"\n'
    config = replica_config(wf, extra=source)
    r = start_replicas(wf, config, ["a", "b"])
    await wait_listed(r["a"].url, "fix__echo")
    await wait_listed(r["b"].url, "fix__echo")
    caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    asked = post(r["a"].url, "fix__ask", {"kind": "elicit"}, meta=caps)
    assert asked.status_code == 200, asked.text
    result = asked.json()["result"]
    assert result["resultType"] == "input_required", result
    state = result["requestState"]
    assert "a".encode().hex() in state, state
    key = next(iter(result["inputRequests"]))
    params = {
        "name": "fix__ask",
        "arguments": {"kind": "elicit"},
        "requestState": state,
        "inputResponses": {key: {"action": "decline"}},
        "_meta": {**META, **caps},
    }
    retry = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
    head = {**HEADERS, "mcp-name": "fix__ask"}
    async with httpx2.AsyncClient(timeout=60) as http:
        elsewhere = await http.post(r["b"].url, json=retry, headers=head)
        assert elsewhere.status_code == 200, elsewhere.text
        error = elsewhere.json()["error"]
        assert error["code"] == WRONG_REPLICA and error["data"]["replica"] == "a", error
        assert error["data"]["retryable"] is True, error
        # The retry on A, the replica that waits, completes the call.
        served = await http.post(r["a"].url, json=retry, headers=head)
        assert served.status_code == 200, served.text
        assert "result" in served.json(), served.text


def terminate_listeners() -> int:
    """Ends every replica's listening connection (as a network drop would); how many."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"), key=lambda p: int(p.parts[-3]))
    assert bins, "psql from Debian's postgresql package"
    sql = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN wf_cancel%'"
    out = subprocess.run([str(bins[-1]), PG_URL, "-Atc", sql], capture_output=True, text=True, check=True, timeout=30)
    return int(out.stdout.strip())


async def test_a_replica_whose_listener_dropped_catches_up_on_deployments(wf: Wf) -> None:
    config = replica_config(wf)
    r = start_replicas(wf, config, ["a", "b"])
    doc = {"name": "late", "nodes": [{"id": "hi", "use": "wf.std.template", "args": {"template": "hi", "values": {}}}]}
    notes: list = []

    async def handler(message: object) -> None:
        notes.append(message)

    async with wf.http_client(r["b"], "legacy", message_handler=handler) as b:
        async with list_changed_waiter(b, notes) as announced:
            async with wf.http_client(r["a"]) as a:
                draft = await planner(a, "save_draft", {"workflow": doc})
                artifact = await planner(a, "publish_artifact", {"draft_id": draft["draft_id"]})
                assert terminate_listeners() >= 2
                # B is not listening now: this NOTIFY does not reach it.
                deployed = await planner(a, "deploy", {"name": "later", "artifact": artifact["artifact"]})
            await announced(30)
            assert deployed["tool"] in {t.name for t in (await b.list_tools()).tools}
    assert "replica event listener reconnected" in r["b"].log.read_text(errors="replace")
