"""wf's own runs as MCP Tasks (the `io.modelcontextprotocol/tasks` extension,
SEP-2663), spoken on the wire as the revision defines it (the official Python
client has no tasks API): a 2026-07-28 client that declares the extension and
calls `wf_planner__run_workflow` gets a task handle at once (`resultType: "task"`,
the run id in `_meta` `wf/runId`); `tasks/get` follows the run and carries its
reply once it ended; `tasks/cancel` cancels the run, which ends `cancelled` in
`wf runs`. Tasks are bound to their principal: another's `tasks/get` or
`tasks/cancel` on the id finds nothing. A client that declares no tasks gets the
plain (waiting) call, as before. The console's run list marks a task's run.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
import httpx2
import pytest

from conftest import Wf

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
TASKS = "io.modelcontextprotocol/tasks"

CONFIG = """\
[server]
http_token = "${E2E_DEFAULT_TOKEN}"

[[server.tokens]]
name = "alice"
token = "${E2E_ALICE_TOKEN}"

[[server.tokens]]
name = "bob"
token = "${E2E_BOB_TOKEN}"
"""

QUICK = {
    "name": "quick",
    "nodes": [{"id": "n", "use": "wf.std.const", "args": {"value": 42}}],
    "outputs": {"v": {"$ref": "nodes.n.output.value"}},
}
SLOW = {"name": "slow", "nodes": [{"id": "z", "use": "wf.std.sleep", "args": {"ms": 600000}}]}


class Raw:
    """2026-07-28 requests of one principal, by hand."""

    def __init__(
        self, http: httpx2.AsyncClient, url: str, token: str, tasks: bool = True, caps: dict[str, Any] | None = None
    ) -> None:
        self.http, self.url, self.token, self.tasks, self.next_id = http, url, token, tasks, 0
        # Capabilities declared besides the tasks extension (e.g. `elicitation`).
        self.caps = caps or {}

    async def request(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        caps: dict[str, Any] = {**self.caps, **({"extensions": {TASKS: {}}} if self.tasks else {})}
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": method,
            "authorization": f"Bearer {self.token}",
        }
        if name is not None:
            headers["mcp-name"] = name
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": {**params, "_meta": meta}}
        r = await self.http.post(self.url, json=body, headers=headers)
        assert r.status_code == 200, (method, r.status_code, r.text)
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            frames = [json.loads(ln[5:]) for ln in r.text.splitlines() if ln.startswith("data:") and ln[5:].strip()]
            return next(f for f in frames if f.get("id") == self.next_id)
        return r.json()

    async def run_workflow(self, workflow: dict[str, Any]) -> dict[str, Any]:
        tool = "wf_planner__run_workflow"
        return await self.request("tools/call", {"name": tool, "arguments": {"workflow": workflow}}, tool)

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/get", {"taskId": task_id}, task_id)

    async def wait_status(self, task_id: str, status: str) -> dict[str, Any]:
        with anyio.fail_after(OP_TIMEOUT):
            while True:
                r = await self.get(task_id)
                assert "result" in r, r
                if r["result"]["status"] == status:
                    return r["result"]
                await anyio.sleep(0.1)


def start(wf: Wf) -> tuple[str, dict[str, str]]:
    tokens = {k: f"{k}-{uuid.uuid4().hex}" for k in ("default", "alice", "bob")}
    env = {f"E2E_{k.upper()}_TOKEN": v for k, v in tokens.items()}
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(CONFIG)), env=env)
    return server.url, tokens


async def test_a_run_started_as_a_task_completes_with_its_result_and_only_its_principal_sees_it(wf: Wf) -> None:
    url, tokens = start(wf)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice, bob = Raw(http, url, tokens["alice"]), Raw(http, url, tokens["bob"])
        created = (await alice.run_workflow(QUICK))["result"]
        assert created["resultType"] == "task", created
        task_id, run_id = created["taskId"], created["_meta"]["wf/runId"]
        assert created["status"] == "working" and run_id not in task_id, created
        done = await alice.wait_status(task_id, "completed")
        assert done["_meta"]["wf/runId"] == run_id, done
        reply = done["result"]["structuredContent"]
        assert reply["run_id"] == run_id and reply["status"] == "succeeded", reply
        assert reply["outputs"] == {"v": 42}, reply
        # Bob cannot see or cancel Alice's task, though he names its id.
        for method in ("tasks/get", "tasks/cancel"):
            refused = await bob.request(method, {"taskId": task_id}, task_id)
            assert refused.get("error", {}).get("code") == -32602, (method, refused)
        # A client that declares no tasks gets the plain call, which waits for the run.
        plain = (await Raw(http, url, tokens["alice"], tasks=False).run_workflow(QUICK))["result"]
        assert plain.get("resultType", "complete") == "complete", plain
        assert plain["structuredContent"]["status"] == "succeeded", plain


async def test_a_run_started_as_a_task_and_cancelled_ends_cancelled_in_wf_runs(wf: Wf) -> None:
    url, tokens = start(wf)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice = Raw(http, url, tokens["alice"])
        created = (await alice.run_workflow(SLOW))["result"]
        task_id, run_id = created["taskId"], created["_meta"]["wf/runId"]
        assert (await alice.get(task_id))["result"]["status"] == "working"
        # The console's run list shows it as a task's run, beside the others.
        console = url.removesuffix("/mcp") + "/console/api/runs"
        listed = await http.post(console, json={}, headers={"authorization": f"Bearer {tokens['alice']}"})
        assert listed.status_code == 200, listed.text
        rows = {r["run_id"]: r for r in listed.json()["runs"]}
        assert rows[run_id]["task"] is True and rows[run_id]["status"] == "running", rows[run_id]
    # The client went away (every request above was its own connection); a new one
    # picks the task up and cancels it.
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice = Raw(http, url, tokens["alice"])
        ack = await alice.request("tasks/cancel", {"taskId": task_id}, task_id)
        assert "result" in ack, ack
        await alice.wait_status(task_id, "cancelled")
    proc = wf.run("runs", "--state-dir", str(wf.state_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    runs = {r["id"]: r for r in json.loads(proc.stdout)}
    assert runs[run_id]["status"] == "cancelled", runs[run_id]


async def test_a_deployments_tool_runs_as_a_task(wf: Wf) -> None:
    url, tokens = start(wf)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        plain, alice = Raw(http, url, tokens["alice"], tasks=False), Raw(http, url, tokens["alice"])

        async def planner(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            name = f"wf_planner__{tool}"
            r = (await plain.request("tools/call", {"name": name, "arguments": arguments}, name))["result"]
            assert not r.get("isError"), r
            return r["structuredContent"]

        draft = await planner("save_draft", {"workflow": QUICK})
        published = await planner("publish_artifact", {"draft_id": draft["draft_id"]})
        await planner("deploy", {"name": "quick", "artifact": published["artifact"]})
        tool = "wf_deploy__quick"
        created = (await alice.request("tools/call", {"name": tool, "arguments": {}}, tool))["result"]
        assert created["resultType"] == "task", created
        done = await alice.wait_status(created["taskId"], "completed")
        reply = done["result"]["structuredContent"]
        assert reply["run_id"] == created["_meta"]["wf/runId"] and reply["outputs"] == {"v": 42}, reply
