"""SEP-2663 task status notifications (`notifications/tasks`) on a 2026-07-28
client's `subscriptions/listen` stream through wf. The tasks extension adds `taskIds`
to the listen filter; the official Python client's `listen` has no such argument, so
the stream is opened by hand, as test_tasks_runs.py speaks the extension. Alice hears,
for the tasks she named, the task as `tasks/get` would answer it: at once, then at
each status change (a forwarded upstream task and a workflow run that complete, a run
she cancels), each tagged with her subscription. A task id of Bob's that she names is
never heard of on her stream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from conftest import UpstreamEvents, Wf
from test_tasks_forwarding import job, start
from test_tasks_runs import OP_TIMEOUT, QUICK, SLOW, TASKS, Raw

pytestmark = pytest.mark.anyio


async def test_task_status_reaches_the_listen_stream_of_its_principal_only(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    url, tokens = start(wf, fixture_upstream_bin, upstream_events)
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        alice, bob = Raw(http, url, tokens["alice"]), Raw(http, url, tokens["bob"])
        upstream = (await job(alice, 1500, "later"))["taskId"]
        slow = (await alice.run_workflow(SLOW))["result"]["taskId"]
        bobs = (await bob.run_workflow(QUICK))["result"]["taskId"]
        await bob.wait_status(bobs, "completed")
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        }
        body = {
            "jsonrpc": "2.0",
            "id": "listen-1",
            "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [upstream, slow, bobs]}, "_meta": meta},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "subscriptions/listen",
            "authorization": f"Bearer {tokens['alice']}",
        }
        heard: list[dict[str, Any]] = []

        async def hear(status: str, task_id: str) -> dict[str, Any]:
            with anyio.fail_after(OP_TIMEOUT):
                while True:
                    for n in heard:
                        if n["params"]["taskId"] == task_id and n["params"]["status"] == status:
                            return n["params"]
                    await anyio.sleep(0.05)

        async with http.stream("POST", url, json=body, headers=headers) as r, anyio.create_task_group() as tg:
            assert r.status_code == 200, await r.aread()

            async def read() -> None:
                async for line in r.aiter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        frame = json.loads(line[5:])
                        if frame.get("method") == "notifications/tasks":
                            heard.append(frame)

            tg.start_soon(read)
            # At once: where each of her tasks stands.
            await hear("working", slow)
            # Then each change: the upstream's task completes, with its result.
            done = await hear("completed", upstream)
            assert done["result"]["structuredContent"] == {"text": "later"}, done
            assert done["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1", done
            ack = await alice.request("tasks/cancel", {"taskId": slow}, slow)
            assert "result" in ack, ack
            await hear("cancelled", slow)
            tg.cancel_scope.cancel()
        # Bob's task, though named and long completed, was never Alice's to hear of.
        assert all(n["params"]["taskId"] != bobs for n in heard), heard
