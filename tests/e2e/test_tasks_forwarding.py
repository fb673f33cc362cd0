"""An upstream's MCP Tasks forwarded through wf (the `io.modelcontextprotocol/tasks`
extension, SEP-2663, on the wire as test_tasks_runs.py speaks it): wf-fixture-upstream
with `--tasks` serves `job` as a task to a client that declared the extension. Through
wf, a 2026-07-28 client that declared it gets a task handle whose id is wf's own (not
the upstream's), `tasks/get` follows the upstream's task and carries its result,
a task that asks for input reads `input_required` with the upstream's `inputRequests`
and `tasks/update` brings the answer to the upstream, `tasks/cancel` reaches the upstream, and the task is bound to its principal: another's
`tasks/get` or `tasks/cancel` on the id finds nothing. Every request is its own HTTP
connection, so a client that went away picks its task up later. When the upstream
restarts, or a reload recreates the source, its open tasks read `failed` with the
state-lost error.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from admin_support import write_atomic
from conftest import UpstreamEvents, Wf, toml_config
from test_tasks_runs import OP_TIMEOUT, Raw

pytestmark = pytest.mark.anyio

JOB = "fix__job"


def config_text(fixture_upstream_bin: Path, events: UpstreamEvents, *more: str) -> str:
    config = toml_config(
        {"fix": {"command": str(fixture_upstream_bin), "args": ["--tasks", *events.args(), *more]}},
        server={"http_token": "${E2E_DEFAULT_TOKEN}"},
    )
    return config + "".join(
        f'\n[[server.tokens]]\nname = "{k}"\ntoken = "${{E2E_{k.upper()}_TOKEN}}"\n' for k in ("alice", "bob")
    )


def start(wf: Wf, fixture_upstream_bin: Path, events: UpstreamEvents) -> tuple[str, dict[str, str]]:
    tokens = {k: f"{k}-{uuid.uuid4().hex}" for k in ("default", "alice", "bob")}
    env = {f"E2E_{k.upper()}_TOKEN": v for k, v in tokens.items()}
    config = wf.write_config(config_text(fixture_upstream_bin, events))
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=env)
    return server.url, tokens


async def job(raw: Raw, ms: int, text: str = "done") -> dict[str, Any]:
    """Calls `job` (waiting until the source is discovered); the call's result."""
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            r = await raw.request("tools/call", {"name": JOB, "arguments": {"ms": ms, "text": text}}, JOB)
            if "result" in r:
                return r["result"]
            assert "unknown tool" in r["error"]["message"], r
            await anyio.sleep(0.1)


async def test_an_upstream_task_is_created_polled_and_its_result_fetched_by_its_principal_only(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    url, tokens = start(wf, fixture_upstream_bin, upstream_events)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice = Raw(http, url, tokens["alice"])
        created = await job(alice, 500, "hello")
        assert created["resultType"] == "task" and created["status"] == "working", created
        task_id = created["taskId"]
        upstream = await upstream_events.wait_for(event="task_created")
        # wf's id is its own: the upstream's id appears nowhere in it.
        assert upstream["task_id"] not in task_id and task_id != upstream["task_id"], (task_id, upstream)
        assert 0 < created["ttlMs"] <= 3_600_000, created
    # The client went away; a new connection picks the task up.
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice, bob = Raw(http, url, tokens["alice"]), Raw(http, url, tokens["bob"])
        done = await alice.wait_status(task_id, "completed")
        assert done["taskId"] == task_id, done
        assert done["result"]["structuredContent"] == {"text": "hello"}, done
        # Bob cannot see or cancel Alice's task, though he names its id.
        for method in ("tasks/get", "tasks/cancel"):
            refused = await bob.request(method, {"taskId": task_id}, task_id)
            assert refused.get("error", {}).get("code") == -32602, (method, refused)
        # Nor is the upstream's own id a task of wf's.
        guessed = await alice.request("tasks/get", {"taskId": upstream["task_id"]}, upstream["task_id"])
        assert guessed.get("error", {}).get("code") == -32602, guessed
        # A tool the upstream answers at once reaches a task-declaring client as a plain result.
        echo = await alice.request("tools/call", {"name": "fix__echo", "arguments": {"message": "hi"}}, "fix__echo")
        assert echo["result"].get("resultType", "complete") == "complete", echo
        assert echo["result"]["content"][0]["text"] == "hi", echo
        # A client that declares no tasks gets the plain call, which waits.
        plain = await job(Raw(http, url, tokens["alice"], tasks=False), 10, "plain")
        assert plain.get("resultType", "complete") == "complete", plain
        assert plain["structuredContent"] == {"text": "plain"}, plain


async def test_an_upstream_task_that_asks_for_input_gets_it_through_tasks_update(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """The 2026-07-28 client sees the upstream's task as it would directly: `input_required`
    with the upstream's `inputRequests`, answered with `tasks/update` (through wf, to the
    upstream), then `completed` with a result that holds the answer. Only the task's
    principal may answer it; a run of wf's asks for nothing."""
    url, tokens = start(wf, fixture_upstream_bin, upstream_events)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice, bob = Raw(http, url, tokens["alice"]), Raw(http, url, tokens["bob"])
        with anyio.fail_after(OP_TIMEOUT):
            while "result" not in (r := await alice.request("tools/call", {"name": JOB, "arguments": {"ms": 1, "text": "hi", "ask": True}}, JOB)):
                await anyio.sleep(0.1)
        created = r["result"]
        assert created["resultType"] == "task", created
        task_id = created["taskId"]
        waiting = await alice.wait_status(task_id, "input_required")
        request = waiting["inputRequests"]["name"]
        assert request["method"] == "elicitation/create", waiting
        assert request["params"]["message"] == "fixture asks your name", waiting
        answer = {"action": "accept", "content": {"name": "Ada"}}
        refused = await bob.request("tasks/update", {"taskId": task_id, "inputResponses": {"name": answer}}, task_id)
        assert refused.get("error", {}).get("code") == -32602, refused
        ack = await alice.request("tasks/update", {"taskId": task_id, "inputResponses": {"name": answer}}, task_id)
        assert "result" in ack, ack
        heard = await upstream_events.wait_for(event="task_input")
        assert heard["answer"] == answer, heard
        done = await alice.wait_status(task_id, "completed")
        assert done["result"]["structuredContent"] == {"text": "hi", "answer": answer}, done
        # wf's own run takes no input: a clear error, and the run goes on.
        run = (await alice.run_workflow({"name": "q", "nodes": [{"id": "n", "use": "wf.std.sleep", "args": {"ms": 60000}}]}))["result"]
        no = await alice.request("tasks/update", {"taskId": run["taskId"], "inputResponses": {"x": {}}}, run["taskId"])
        assert no["error"]["code"] == -32602 and "takes no input" in no["error"]["message"], no
        assert (await alice.get(run["taskId"]))["result"]["status"] == "working"
        await alice.request("tasks/cancel", {"taskId": run["taskId"]}, run["taskId"])


async def test_an_upstream_task_cancelled_through_wf_is_cancelled_upstream(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    url, tokens = start(wf, fixture_upstream_bin, upstream_events)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice, bob = Raw(http, url, tokens["alice"]), Raw(http, url, tokens["bob"])
        task_id = (await job(alice, 600_000))["taskId"]
        upstream = await upstream_events.wait_for(event="task_created")
        assert (await alice.get(task_id))["result"]["status"] == "working"
        refused = await bob.request("tasks/cancel", {"taskId": task_id}, task_id)
        assert "error" in refused, refused
        assert (await alice.get(task_id))["result"]["status"] == "working"
        ack = await alice.request("tasks/cancel", {"taskId": task_id}, task_id)
        assert "result" in ack, ack
        await upstream_events.wait_for(event="task_cancelled", task_id=upstream["task_id"])
        await alice.wait_status(task_id, "cancelled")


async def test_an_upstream_restart_fails_its_open_tasks_with_state_lost(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    url, tokens = start(wf, fixture_upstream_bin, upstream_events)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice = Raw(http, url, tokens["alice"])
        task_id = (await job(alice, 600_000))["taskId"]
        assert (await alice.get(task_id))["result"]["status"] == "working"
        # The upstream dies; the next call starts it afresh, without the task.
        crash = await Raw(http, url, tokens["alice"], tasks=False).request(
            "tools/call", {"name": "fix__crash", "arguments": {}}, "fix__crash"
        )
        assert "error" in crash or crash["result"].get("isError"), crash
        plain = await job(Raw(http, url, tokens["alice"], tasks=False), 10, "again")
        assert plain["structuredContent"] == {"text": "again"}, plain
        failed = await alice.wait_status(task_id, "failed")
        assert failed["error"]["data"]["code"] == "state_lost", failed
        assert "state lost" in failed["error"]["message"], failed


async def test_a_source_recreated_by_a_reload_fails_its_open_tasks_with_state_lost(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    url, tokens = start(wf, fixture_upstream_bin, upstream_events)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice = Raw(http, url, tokens["alice"])
        task_id = (await job(alice, 600_000))["taskId"]
        assert (await alice.get(task_id))["result"]["status"] == "working"
        # The operator changes the source's config: wf's watcher recreates the source.
        write_atomic(wf.root / "wf.toml", config_text(fixture_upstream_bin, upstream_events, "--probes"))
        plain = Raw(http, url, tokens["alice"], tasks=False)
        with anyio.fail_after(OP_TIMEOUT):
            while "result" not in await plain.request("tools/call", {"name": "fix__env", "arguments": {}}, "fix__env"):
                await anyio.sleep(0.1)
        failed = await alice.wait_status(task_id, "failed")
        assert failed["error"]["data"]["code"] == "state_lost", failed
