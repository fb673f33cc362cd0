"""Tasks in the generation matrix: an upstream on the official TypeScript SDK v2
(`ts_generations_upstream.mjs`, tool `task`) serves MCP Tasks (SEP-2663, the
`io.modelcontextprotocol/tasks` extension). The SDK 2.4.0 has no task runtime, so the
upstream writes them itself on the SDK's custom `tasks/get` and `tasks/cancel`
handlers. Behind wf with default settings (no `protocol` key: wf speaks 2026-07-28 to
it), a task-augmented `tools/call` from a 2025-11-25 client (`params.task`, the
official Python client in `legacy` mode) and from a 2026-07-28 client (the extension
declared in the request, by hand) gets a task handle of wf's; its status, result and
cancellation reach the upstream's task.

The upstream's `test_tool_with_task` asks for a name in an input-required round and
only then answers with a task whose result names it (the conformance suite's
`tasks-mrtr-composition`): wf carries that round to the client — a round of wf's for
a 2026-07-28 client, an `elicitation/create` request for a 2025-11-25 one — and the
answer to the upstream, which then starts its task. Over wf's stdio the official client
declares the extension itself, through its extension hook (`Tasks` below). The
upstream's `confirm_delete` task asks mid-task (`input_required`, answered with
`tasks/update`): a 2025-11-25 client gets an `elicitation/create` request while it waits
on `tasks/result`.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import anyio
import httpx2
import pytest
from mcp import types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Result

from conftest import Wf, content_text, free_port, toml_config, wait_listed
from test_generations import OP_TIMEOUT, UPSTREAM, node  # noqa: F401  (node: a fixture)
from test_tasks_2025 import call_as_task, cancel, get, legacy, result
from test_tasks_runs import Raw

pytestmark = pytest.mark.anyio

TASK = "ts__task"
# A round (asking `user_name`), then a task whose result names the answer.
ROUND_THEN_TASK = "ts__test_tool_with_task"


def start(wf: Wf, node: str, upstream: str) -> tuple[str, str]:
    """`wf serve --http` with a token, the TS-SDK upstream as source `ts` (wf's stdio
    child, or `http-auto` a `url` source), no `protocol` key. Its URL and token."""
    if upstream == "stdio":
        settings: dict[str, Any] = {"command": node, "args": [str(UPSTREAM)]}
    else:
        port = free_port()
        argv = [node, str(UPSTREAM), "--http", str(port), "auto"]
        settings = {"url": wf.start_upstream_http("ts-upstream", argv, port)}
    token = f"t-{uuid.uuid4().hex}"
    config = wf.write_config(toml_config({"ts": settings}, server={"http_token": "${E2E_TASKS_TOKEN}"}))
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env={"E2E_TASKS_TOKEN": token})
    return server.url, token


async def call_task(raw: Raw, arguments: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 `tools/call` of `task` that declared the extension (waiting until
    the source is discovered); its result."""
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            r = await raw.request("tools/call", {"name": TASK, "arguments": arguments}, TASK)
            if "result" in r:
                return r["result"]
            assert "unknown tool" in r["error"]["message"], r
            await anyio.sleep(0.1)


@pytest.mark.parametrize("upstream", ["stdio", "http-auto"])
async def test_a_2026_clients_task_through_wf(wf: Wf, node: str, upstream: str) -> None:
    """A 2026-07-28 client that declared the tasks extension gets wf's task handle;
    `tasks/get` follows the upstream's task to its result, and `tasks/cancel` ends
    a task that would work forever, as the upstream then says. A round the upstream
    asks before its task is wf's round to the client, and the answer brings the task."""
    url, token = start(wf, node, upstream)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        raw = Raw(http, url, token, caps={"elicitation": {}})
        created = await call_task(raw, {"text": "hello"})
        assert created["resultType"] == "task" and created["status"] == "working", created
        task_id = created["taskId"]
        assert task_id.startswith("wft-"), created  # wf's id, not the upstream's `ts-task-N`
        done = await raw.wait_status(task_id, "completed")
        assert content_text_of(done["result"]) == "task done: hello", done

        held = (await call_task(raw, {"text": "forever", "hold": True}))["taskId"]
        assert (await raw.get(held))["result"]["status"] == "working"
        ack = await raw.request("tasks/cancel", {"taskId": held}, held)
        assert "result" in ack, ack
        await raw.wait_status(held, "cancelled")

        # Without the extension the call is the plain one.
        plain = await Raw(http, url, token, tasks=False).request(
            "tools/call", {"name": TASK, "arguments": {"text": "plain"}}, TASK
        )
        assert content_text_of(plain["result"]) == "done: plain", plain

        # The upstream's round before its task: wf's round (no task yet), under the
        # upstream's key; the answer brings the task, whose result names it.
        asked = (await raw.request("tools/call", {"name": ROUND_THEN_TASK, "arguments": {}}, ROUND_THEN_TASK))["result"]
        assert asked["resultType"] == "input_required" and "taskId" not in asked, asked
        assert asked["inputRequests"]["user_name"]["method"] == "elicitation/create", asked
        answer = {"user_name": {"action": "accept", "content": {"name": "Alice"}}}
        retry = {"name": ROUND_THEN_TASK, "arguments": {}, "inputResponses": answer, "requestState": asked["requestState"]}
        created = (await raw.request("tools/call", retry, ROUND_THEN_TASK))["result"]
        assert created["resultType"] == "task" and created["taskId"].startswith("wft-"), created
        assert "requestState" not in created and "inputRequests" not in created, created
        done = await raw.wait_status(created["taskId"], "completed")
        assert content_text_of(done["result"]) == "Hello from the task, Alice!", done
        # Its requestState was for one retry only.
        again = await raw.request("tools/call", retry, ROUND_THEN_TASK)
        assert "unknown requestState" in again["error"]["message"], again
        # A client that cannot answer the round (it declared no elicitation) gets an
        # error for that call, and the source still serves tasks.
        mute = await Raw(http, url, token).request("tools/call", {"name": ROUND_THEN_TASK, "arguments": {}}, ROUND_THEN_TASK)
        assert "elicitation" in mute["error"]["message"], mute
        assert (await call_task(raw, {"text": "still"}))["resultType"] == "task"


@pytest.mark.parametrize("upstream", ["stdio", "http-auto"])
async def test_a_2025_clients_task_through_wf(wf: Wf, node: str, upstream: str) -> None:
    """A 2025-11-25 client's task-augmented call (`params.task`) gets wf's task handle;
    `tasks/result` waits for the upstream's task and answers its result, `tasks/get`
    reads it completed, and `tasks/cancel` of a task that would work forever ends it
    (`tasks/get` reads it cancelled). A round the upstream asks before its task is an
    `elicitation/create` request to the client, and the answer brings the task."""
    url, token = start(wf, node, upstream)
    asked: list[types.ElicitRequestParams] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        if params.message == "Delete it?":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    async with legacy(url, token, elicitation_callback=elicit) as c:
        await wait_listed(c, TASK)
        with anyio.fail_after(OP_TIMEOUT):
            created = await call_as_task(c, TASK, {"text": "hello"})
            task_id = created.task.task_id
            assert created.task.status == "working" and task_id.startswith("wft-"), created
            done = await result(c, task_id)
            assert content_text(done.content) == "task done: hello", done
            assert (await get(c, task_id)).status == "completed"

            held = (await call_as_task(c, TASK, {"text": "forever", "hold": True})).task.task_id
            assert (await get(c, held)).status == "working"
            ack = await cancel(c, held)
            assert ack.status == "cancelled", ack
            while (await get(c, held)).status != "cancelled":
                await anyio.sleep(0.1)

            plain = await c.call_tool(TASK, {"text": "plain"})
            assert content_text(plain.content) == "done: plain", plain
            assert asked == []

            # The upstream's round before its task: an `elicitation/create` request
            # during the call, whose answer brings the task.
            created = await call_as_task(c, ROUND_THEN_TASK, {})
            [params] = asked
            assert params.message == "What is your name?", params
            done = await result(c, created.task.task_id)
            assert content_text(done.content) == "Hello from the task, Alice!", done

            # The upstream's task asks mid-task (`input_required`, answered upstream with
            # `tasks/update`): an `elicitation/create` request while the client waits on
            # `tasks/result`, whose answer completes the task.
            created = await call_as_task(c, "ts__confirm_delete", {"filename": "notes.txt"})
            done = await result(c, created.task.task_id)
            assert [p.message for p in asked[1:]] == ["Delete it?"], asked
            assert content_text(done.content) == "notes.txt: deleted", done


class CreatedTask(Result):
    """SEP-2663's answer to a `tools/call`: a task handle."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class Tasks(ClientExtension):
    """The tasks extension for the official client (which has none of its own, but
    takes an extension's result shapes): declares it, and resolves a `task` answer to
    `tools/call` by polling `tasks/get` until the task completes."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self) -> None:
        self.created: list[CreatedTask] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created)
        with anyio.fail_after(OP_TIMEOUT):
            while True:
                # The session's own 2026-07-28 envelope (its stamp), on a method its
                # tables do not know.
                data: dict[str, Any] = {"method": "tasks/get", "params": {"taskId": created.task_id}}
                opts: dict[str, Any] = {}
                ctx.session._stamp(data, opts)
                got = await ctx.session._dispatcher.send_raw_request("tasks/get", data["params"], opts)
                if got["status"] == "completed":
                    return CallToolResult.model_validate(got["result"])
                assert got["status"] == "working", got
                await anyio.sleep(0.1)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_round_before_a_task_over_wfs_stdio(wf: Wf, node: str, mode: str) -> None:
    """wf served over stdio to the official Python client: the upstream's round before
    its task reaches a 2025-11-25 client's task-augmented call as an
    `elicitation/create` request, and a 2026-07-28 client (the tasks extension
    declared through the client's extension hook) as a round, which the client
    answers and retries by itself; either way the answer brings wf's task, whose
    result names it."""
    config = wf.write_config(toml_config({"ts": {"command": node, "args": [str(UPSTREAM)]}}))
    asked: list[types.ElicitRequestParams] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    tasks = Tasks()
    kw: dict[str, Any] = {"extensions": [tasks]} if mode == "auto" else {}
    async with wf.stdio_client(mode, "--config", str(config), elicitation_callback=elicit, **kw) as c:
        await wait_listed(c, ROUND_THEN_TASK)
        with anyio.fail_after(OP_TIMEOUT):
            if mode == "legacy":
                created = await call_as_task(c, ROUND_THEN_TASK, {})
                assert created.task.task_id.startswith("wft-"), created
                done = await result(c, created.task.task_id)
            else:
                done = await c.call_tool(ROUND_THEN_TASK, {})
                [created_task] = tasks.created
                assert created_task.task_id.startswith("wft-"), created_task
    assert content_text(done.content) == "Hello from the task, Alice!", done
    assert [p.message for p in asked] == ["What is your name?"], asked


def content_text_of(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result.get("content", []))
