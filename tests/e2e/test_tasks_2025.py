"""MCP Tasks in their 2025-11-25 flavour through wf, spoken by the official Python
client in `legacy` mode (it has no tasks API, so the requests are the typed ones of
`mcp_types`, sent with `session.send_request`; see `call_as_task` for the call itself): wf declares the `tasks` capability at
`initialize`; a task-augmented `tools/call` (`params.task`) gets a task handle at once,
for a task-capable upstream's tool (wf-fixture-upstream `--tasks`) as for a workflow
run; `tasks/get`, `tasks/result` (waits, then the tool's result), `tasks/list` (the
principal's own, a page at a time) and `tasks/cancel` follow it, and
`notifications/tasks/status` tells the session when it changes. A client that went
away reconnects (a new session) and fetches the result. Another principal can get,
fetch, cancel or list none of it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from conftest import UpstreamEvents, Wf, toml_config, wait_listed
from test_tasks_runs import QUICK, SLOW, Raw

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
JOB = "fix__job"
RUN = "wf_planner__run_workflow"


class StatusWatch(ClientExtension):
    """Collects `notifications/tasks/status` (a method the client's core tables do not
    dispatch at 2025-11-25, so it reaches a binding)."""

    identifier = "dev.wf.e2e/task-status"

    def __init__(self) -> None:
        self.seen: list[types.TaskStatusNotificationParams] = []

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def seen(p: types.TaskStatusNotificationParams) -> None:
            self.seen.append(p)

        return [NotificationBinding(method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=seen)]

    async def wait(self, task_id: str, status: str) -> types.TaskStatusNotificationParams:
        with anyio.fail_after(OP_TIMEOUT):
            while True:
                for p in self.seen:
                    if p.task_id == task_id and p.status == status:
                        return p
                await anyio.sleep(0.05)


@asynccontextmanager
async def legacy(url: str, token: str, watch: StatusWatch | None = None, **callbacks: Any) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=OP_TIMEOUT) as http:
        kw: dict[str, Any] = {"extensions": [watch]} if watch else {}
        kw.update(callbacks)
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", cache=None, read_timeout_seconds=OP_TIMEOUT, **kw
        ) as c:
            yield c


async def call_as_task(c: Client, name: str, arguments: dict[str, Any]) -> types.CreateTaskResult:
    """A task-augmented `tools/call`. The client's method table validates every
    `tools/call` result as a `CallToolResult` at 2025-11-25, so this one goes through
    its dispatcher's raw send (on the same session) and is validated here."""
    params = types.CallToolRequestParams(name=name, arguments=arguments, task=types.TaskMetadata(ttl=600_000))
    data = types.CallToolRequest(params=params).model_dump(by_alias=True, mode="json", exclude_none=True)
    raw = await c.session._dispatcher.send_raw_request("tools/call", data["params"], {"timeout": OP_TIMEOUT})
    return types.CreateTaskResult.model_validate(raw)


async def get(c: Client, task_id: str) -> types.GetTaskResult:
    req = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await c.session.send_request(req, types.GetTaskResult)


async def result(c: Client, task_id: str) -> types.CallToolResult:
    req = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await c.session.send_request(req, types.CallToolResult)


async def cancel(c: Client, task_id: str) -> types.CancelTaskResult:
    req = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    return await c.session.send_request(req, types.CancelTaskResult)


async def list_all(c: Client) -> list[list[str]]:
    """Every page of `tasks/list`, as task ids."""
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await c.session.send_request(types.ListTasksRequest(params=params), types.ListTasksResult)
        pages.append([t.task_id for t in page.tasks])
        if not (cursor := page.next_cursor):
            return pages


def tokens_config(extra: str = "") -> tuple[str, dict[str, str], dict[str, str]]:
    tokens = {k: f"{k}-{uuid.uuid4().hex}" for k in ("default", "alice", "bob")}
    env = {f"E2E_{k.upper()}_TOKEN": v for k, v in tokens.items()}
    text = "".join(f'\n[[server.tokens]]\nname = "{k}"\ntoken = "${{E2E_{k.upper()}_TOKEN}}"\n' for k in ("alice", "bob"))
    return text + extra, tokens, env


async def refused(what: Any) -> MCPError:
    with pytest.raises(MCPError) as e:
        await what
    return e.value


async def test_an_upstream_task_through_wf_in_the_2025_11_25_flavour(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    more, tokens, env = tokens_config()
    config = toml_config(
        {"fix": {"command": str(fixture_upstream_bin), "args": ["--tasks", *upstream_events.args()]}},
        server={"http_token": "${E2E_DEFAULT_TOKEN}"},
    )
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(config + more)), env=env)
    watch = StatusWatch()
    async with legacy(server.url, tokens["alice"], watch) as alice, legacy(server.url, tokens["bob"]) as bob:
        caps = alice.server_capabilities.tasks
        assert caps is not None and caps.requests and caps.requests.tools and caps.requests.tools.call is not None, caps
        assert caps.list is not None and caps.cancel is not None, caps
        await wait_listed(alice, JOB)
        created = await call_as_task(alice, JOB, {"ms": 500, "text": "hello"})
        task_id = created.task.task_id
        assert created.task.status == "working" and created.task.ttl and created.task.poll_interval, created
        upstream = await upstream_events.wait_for(event="task_created")
        assert upstream["task_id"] not in task_id, (task_id, upstream)
        assert (await get(alice, task_id)).task_id == task_id
        # tasks/result waits for the end, then gives the tool's result, tied to the task.
        done = await result(alice, task_id)
        assert done.structured_content == {"text": "hello"}, done
        assert done.meta and done.meta["io.modelcontextprotocol/related-task"] == {"taskId": task_id}, done.meta
        assert (await get(alice, task_id)).status == "completed"
        # The session heard the task end.
        await watch.wait(task_id, "completed")

        # A long one, cancelled: the upstream's task is cancelled too.
        long_id = (await call_as_task(alice, JOB, {"ms": 600_000})).task.task_id
        with anyio.fail_after(OP_TIMEOUT):
            while not (theirs := [e["task_id"] for e in upstream_events.read() if e.get("event") == "task_created"][1:]):
                await anyio.sleep(0.05)
        theirs = theirs[0]
        assert [task_id, long_id] == sum(await list_all(alice), [])
        # Bob sees none of Alice's tasks, though he names their ids.
        assert sum(await list_all(bob), []) == []
        for what in (get(bob, long_id), result(bob, long_id), cancel(bob, long_id)):
            assert (await refused(what)).error.code == -32602
        assert (await get(alice, long_id)).status == "working"
        ack = await cancel(alice, long_id)
        assert ack.task_id == long_id and ack.status == "cancelled", ack
        await upstream_events.wait_for(event="task_cancelled", task_id=theirs)
        await watch.wait(long_id, "cancelled")
        with anyio.fail_after(OP_TIMEOUT):
            while (await get(alice, long_id)).status != "cancelled":
                await anyio.sleep(0.1)
        # An ended task cannot be cancelled; its result is the cancellation.
        assert (await refused(cancel(alice, long_id))).error.code == -32602
        assert "cancelled" in (await refused(result(alice, long_id))).error.message
        # A call without `task` is the plain call, as before.
        plain = await alice.call_tool(JOB, {"ms": 10, "text": "plain"})
        assert plain.structured_content == {"text": "plain"}, plain


async def test_a_run_as_a_2025_11_25_task_survives_the_client_and_is_listed_a_page_at_a_time(wf: Wf) -> None:
    more, tokens, env = tokens_config()
    config = '[server]\nhttp_token = "${E2E_DEFAULT_TOKEN}"\npage_size = 2\n' + more
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(config)), env=env)
    async with legacy(server.url, tokens["alice"]) as alice:
        created = await call_as_task(alice, RUN, {"workflow": QUICK})
        quick, run_id = created.task.task_id, (created.meta or {}).get("wf/runId")
        assert run_id and run_id not in quick, created
        slow = (await call_as_task(alice, RUN, {"workflow": SLOW})).task.task_id
        third = (await call_as_task(alice, RUN, {"workflow": QUICK})).task.task_id
    # The client went away; a new session (another connection) fetches the result.
    async with legacy(server.url, tokens["alice"]) as alice, legacy(server.url, tokens["bob"]) as bob:
        reply = (await result(alice, quick)).structured_content
        assert reply and reply["run_id"] == run_id and reply["outputs"] == {"v": 42}, reply
        # The principal's tasks, oldest first, two a page.
        assert await list_all(alice) == [[quick, slow], [third]]
        assert await list_all(bob) == [[]]
        for what in (get(bob, slow), cancel(bob, slow), result(bob, quick)):
            assert (await refused(what)).error.code == -32602
        assert (await cancel(alice, slow)).status == "cancelled"
        with anyio.fail_after(OP_TIMEOUT):
            while (await get(alice, slow)).status != "cancelled":
                await anyio.sleep(0.1)
    proc = wf.run("runs", "--state-dir", str(wf.state_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    statuses = sorted(r["status"] for r in json.loads(proc.stdout))
    assert statuses == ["cancelled", "succeeded", "succeeded"], statuses


async def test_a_tokenless_clients_tasks_are_its_sessions_own(wf: Wf) -> None:
    """Without credentials every HTTP client is the one `local` principal, so a task is
    bound to its 2025-11-25 session as well: another session gets, fetches, cancels and
    lists none of it (an authenticated principal's tasks follow it across sessions,
    above)."""
    server = wf.start_http()
    async with wf.http_client(server, "legacy") as one, wf.http_client(server, "legacy") as two:
        slow = (await call_as_task(one, RUN, {"workflow": SLOW})).task.task_id
        assert await list_all(one) == [[slow]]
        assert await list_all(two) == [[]]
        for what in (get(two, slow), cancel(two, slow), result(two, slow)):
            assert (await refused(what)).error.code == -32602
        assert (await get(one, slow)).status == "working"
        assert (await cancel(one, slow)).status == "cancelled"


async def test_the_2025_11_25_flavour_over_stdio(wf: Wf) -> None:
    """The same requests over stdio (each line checked and renamed by wf's own stdio
    transport), with the status notification on the connection."""
    watch = StatusWatch()
    async with wf.stdio_client("legacy", extensions=[watch]) as c:
        caps = c.server_capabilities.tasks
        assert caps is not None and caps.list is not None, caps
        created = await call_as_task(c, RUN, {"workflow": QUICK})
        task_id = created.task.task_id
        reply = (await result(c, task_id)).structured_content
        assert reply and reply["outputs"] == {"v": 42}, reply
        await watch.wait(task_id, "completed")
        assert await list_all(c) == [[task_id]]
        assert (await get(c, task_id)).status == "completed"


async def test_a_2025_11_25_upstreams_task_is_forwarded(wf: Wf, everything_bin: Path) -> None:
    """Real server-everything speaks 2025-11-25 and serves `simulate-research-query`
    only as a task (`taskSupport: "required"`). Through wf it is a task as well: wf asks
    the upstream with `params.task` and follows it with that revision's `tasks/get` and
    `tasks/result`, for a 2025-11-25 client as for a 2026-07-28 one."""
    more, tokens, env = tokens_config()
    config = toml_config({"everything": {"command": str(everything_bin)}}, server={"http_token": "${E2E_DEFAULT_TOKEN}"})
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(config + more)), env=env)
    tool = "everything__simulate-research-query"
    watch = StatusWatch()
    async with legacy(server.url, tokens["alice"], watch) as alice, legacy(server.url, tokens["bob"]) as bob:
        await wait_listed(alice, tool)
        created = await call_as_task(alice, tool, {"topic": "tides"})
        task_id = created.task.task_id
        assert task_id.startswith("wft-") and created.task.status == "working", created
        done = await result(alice, task_id)
        assert not done.is_error and "tides" in str(done.content), done
        await watch.wait(task_id, "completed")
        assert (await refused(get(bob, task_id))).error.code == -32602
        # Cancelled through wf, the upstream's task is cancelled.
        other = (await call_as_task(alice, tool, {"topic": "moons"})).task.task_id
        assert (await cancel(alice, other)).status == "cancelled"
        with anyio.fail_after(OP_TIMEOUT):
            while (await get(alice, other)).status != "cancelled":
                await anyio.sleep(0.1)
    # A 2026-07-28 client that declares the extension gets the same task, SEP-2663's way.
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        modern = Raw(http, server.url, tokens["alice"])
        started = (await modern.request("tools/call", {"name": tool, "arguments": {"topic": "comets"}}, tool))["result"]
        assert started["resultType"] == "task", started
        finished = await modern.wait_status(started["taskId"], "completed")
        assert "comets" in json.dumps(finished["result"]["content"]), finished


async def test_a_2025_11_25_upstreams_task_that_asks_for_input_gets_it_through_tasks_update(
    wf: Wf, everything_bin: Path
) -> None:
    """server-everything's `simulate-research-query` with `ambiguous: true` goes
    `input_required` and sends its `elicitation/create` tagged with its task, to be
    delivered while the client waits on `tasks/result` (2025-11-25's way). Through wf a
    2026-07-28 client sees what SEP-2663 promises it: `input_required` with the
    upstream's request in `inputRequests` (without the upstream's task id), answered
    with `tasks/update`; the upstream's report then holds the answer. Another principal
    can neither see nor answer it, and a key nobody asked under is refused."""
    more, tokens, env = tokens_config()
    config = toml_config({"everything": {"command": str(everything_bin)}}, server={"http_token": "${E2E_DEFAULT_TOKEN}"})
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(config + more)), env=env)
    tool = "everything__simulate-research-query"
    async with legacy(server.url, tokens["alice"]) as c:
        await wait_listed(c, tool)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice, bob = Raw(http, server.url, tokens["alice"]), Raw(http, server.url, tokens["bob"])
        args = {"topic": "python", "ambiguous": True}
        started = (await alice.request("tools/call", {"name": tool, "arguments": args}, tool))["result"]
        assert started["resultType"] == "task", started
        task_id = started["taskId"]
        waiting = await alice.wait_status(task_id, "input_required")
        [(key, request)] = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create", waiting
        assert "multiple interpretations" in request["params"]["message"], request
        assert "related-task" not in json.dumps(waiting), waiting
        answer = {"action": "accept", "content": {"interpretation": "snake"}}
        bobs = await bob.request("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}}, task_id)
        assert bobs.get("error", {}).get("code") == -32602, bobs
        wrong = await alice.request("tasks/update", {"taskId": task_id, "inputResponses": {"nope": answer}}, task_id)
        assert wrong.get("error", {}).get("code") == -32602 and "nope" in wrong["error"]["message"], wrong
        ack = await alice.request("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}}, task_id)
        assert "result" in ack, ack
        done = await alice.wait_status(task_id, "completed")
        report = json.dumps(done["result"]["content"])
        assert "Clarification**: snake" in report, report
    # A 2025-11-25 client is asked the 2025-11-25 way: the task reads `input_required`,
    # and the elicitation comes while the client waits on `tasks/result`, tied to wf's
    # task id; its answer reaches the upstream. A client that cannot be asked gets an error.
    asked: list[types.ElicitRequestParams] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"interpretation": "comedy"})

    async with legacy(server.url, tokens["alice"], elicitation_callback=elicit) as c:
        task_id = (await call_as_task(c, tool, args)).task.task_id
        with anyio.fail_after(OP_TIMEOUT):
            while (await get(c, task_id)).status != "input_required":
                await anyio.sleep(0.1)
        done = await result(c, task_id)
        assert "Clarification**: comedy" in str(done.content), done
        [params] = asked
        assert "multiple interpretations" in params.message, params
        assert (params.meta or {})["io.modelcontextprotocol/related-task"] == {"taskId": task_id}, params
    async with legacy(server.url, tokens["alice"]) as c:
        task_id = (await call_as_task(c, tool, args)).task.task_id
        error = (await refused(result(c, task_id))).error
        assert "elicitation" in error.message and task_id in error.message, error
        assert (await cancel(c, task_id)).status == "cancelled"


async def test_tools_that_may_run_as_tasks_say_so_to_2025_11_25_clients(wf: Wf, fixture_upstream_bin: Path) -> None:
    """A 2025-11-25 client may task-augment only a tool whose `execution.taskSupport`
    allows it, so wf's runs say `optional` (run_workflow, run_deployment and each
    deployment's tool), over an HTTP session and over stdio; a tool that says nothing
    is listed without it; a 2026-07-28 client gets no trace of the carrier."""
    from planner_support import fx_config, planner

    config = fx_config(wf, fixture_upstream_bin)
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    doc = {"name": "greet", "nodes": [{"id": "hi", "use": "wf.std.template", "args": {"template": "hi", "values": {}}}]}

    def check(tools: dict[str, types.Tool], deployed: str | None) -> None:
        for name in [RUN, "wf_planner__run_deployment", *([deployed] if deployed else [])]:
            execution = tools[name].execution
            assert execution is not None and execution.task_support == "optional", (name, tools[name])
        for name in ("fx__echo", "wf_planner__get_run"):
            assert tools[name].execution is None, tools[name]
        assert not any("wf/execution" in (t.meta or {}) for t in tools.values())

    async with wf.http_client(server, "legacy") as c:
        await wait_listed(c, "fx__echo")
        draft = await planner(c, "save_draft", {"workflow": doc})
        artifact = await planner(c, "publish_artifact", {"draft_id": draft["draft_id"]})
        deployed = (await planner(c, "deploy", {"name": "greeter", "artifact": artifact["artifact"]}))["tool"]
        check({t.name: t for t in (await c.list_tools()).tools}, deployed)
        # Augmented as the declaration allows, the deployment's tool is a task.
        created = await call_as_task(c, deployed, {})
        assert (await result(c, created.task.task_id)).is_error is False
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        await wait_listed(c, "fx__echo")
        check({t.name: t for t in (await c.list_tools()).tools}, None)
    async with wf.http_client(server, "auto") as modern:
        tools = (await modern.list_tools()).tools
        assert not any("wf/execution" in (t.meta or {}) for t in tools), tools
