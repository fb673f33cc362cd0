"""wf's own runs as MCP Tasks outlive a restart of wf: the task (its id, its principal,
its run) is kept in the state dir beside the run, so a client that comes back after wf
restarted still gets the task and its result. A run that had ended answers its reply;
one cut short by the restart ends `interrupted` in `wf runs`, and its task reads
`completed` with the run's error result (`isError`), as a waiting call would have. A
2025-11-25 client's `tasks/result` answers after the restart too. Another principal
still finds none of it. A task a source served (forwarded) is kept too: its source
restarted with wf and lost it, so after the restart it reads `failed` with the
state-lost error, as after any restart of its source, rather than "no task".
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx2
import pytest

from conftest import UpstreamEvents, Wf
from test_tasks_2025 import legacy, result
from test_tasks_runs import CONFIG, QUICK, SLOW, Raw

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60


async def test_a_run_task_outlives_a_restart_of_wf(wf: Wf) -> None:
    tokens = {k: f"{k}-{uuid.uuid4().hex}" for k in ("default", "alice", "bob")}
    env = {f"E2E_{k.upper()}_TOKEN": v for k, v in tokens.items()}
    config = str(wf.write_config(CONFIG))
    server = wf.start_http("127.0.0.1", None, "--config", config, env=env)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice = Raw(http, server.url, tokens["alice"])
        quick = (await alice.run_workflow(QUICK))["result"]
        done_before = await alice.wait_status(quick["taskId"], "completed")
        slow = (await alice.run_workflow(SLOW))["result"]
        assert (await alice.get(slow["taskId"]))["result"]["status"] == "working"
    server.stop()
    server = wf.start_http("127.0.0.1", None, "--config", config, env=env)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice, bob = Raw(http, server.url, tokens["alice"]), Raw(http, server.url, tokens["bob"])
        done = await alice.wait_status(quick["taskId"], "completed")
        assert done["result"] == done_before["result"], (done, done_before)
        assert done["_meta"]["wf/runId"] == quick["_meta"]["wf/runId"], done
        cut = await alice.wait_status(slow["taskId"], "completed")
        assert cut["result"]["isError"] is True, cut
        assert cut["result"]["structuredContent"]["status"] == "interrupted", cut
        for task in (quick, slow):
            refused = await bob.request("tasks/get", {"taskId": task["taskId"]}, task["taskId"])
            assert refused.get("error", {}).get("code") == -32602, refused
    async with legacy(server.url, tokens["alice"]) as c:
        reply = (await result(c, quick["taskId"])).structured_content
        assert reply and reply["outputs"] == {"v": 42}, reply
    proc = wf.run("runs", "--state-dir", str(wf.state_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    runs = {r["id"]: r["status"] for r in json.loads(proc.stdout)}
    assert runs[slow["_meta"]["wf/runId"]] == "interrupted", runs


async def test_a_forwarded_task_reads_state_lost_after_a_restart_of_wf(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    from test_tasks_forwarding import config_text, job

    tokens = {k: f"{k}-{uuid.uuid4().hex}" for k in ("default", "alice", "bob")}
    env = {f"E2E_{k.upper()}_TOKEN": v for k, v in tokens.items()}
    config = str(wf.write_config(config_text(fixture_upstream_bin, upstream_events)))
    server = wf.start_http("127.0.0.1", None, "--config", config, env=env)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice = Raw(http, server.url, tokens["alice"])
        task_id = (await job(alice, 600_000))["taskId"]
        assert (await alice.get(task_id))["result"]["status"] == "working"
    server.stop()
    server = wf.start_http("127.0.0.1", None, "--config", config, env=env)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice, bob = Raw(http, server.url, tokens["alice"]), Raw(http, server.url, tokens["bob"])
        failed = (await alice.get(task_id))["result"]
        assert failed["status"] == "failed", failed
        assert failed["error"]["data"] == {"source": "fix", "code": "state_lost"}, failed
        assert "state lost" in failed["error"]["message"], failed
        refused = await bob.request("tasks/get", {"taskId": task_id}, task_id)
        assert refused.get("error", {}).get("code") == -32602, refused
        # Cancelling what is lost is acknowledged and does nothing.
        assert "result" in await alice.request("tasks/cancel", {"taskId": task_id}, task_id)
