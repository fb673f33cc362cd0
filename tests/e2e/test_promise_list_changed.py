"""An upstream's `notifications/tools/list_changed` makes wf rediscover that
source and tell its own clients: a 2025-11-25 client by a pushed
`notifications/tools/list_changed`, a 2026-07-28 client on its
`subscriptions/listen` stream. The new tool is then listed and callable.

The upstream (promise_upstream.py) adds a tool when its `add_tool` tool is
called, on wf's persistent session, and announces it on that session only; the
only way the tool can reach wf's listing is a rediscovery that wf starts
because of that announcement.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from admin_support import tool_names, wait_tools
from conftest import Wf, content_text, toml_config
from promise_support import OP_TIMEOUT, PY_SERVER, PY_START_TIMEOUT, list_changed_waiter, py_upstream

pytestmark = pytest.mark.anyio

FRONTS = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]


@pytest.mark.parametrize(("transport", "mode"), FRONTS, ids=[f"{t}-{m}" for t, m in FRONTS])
async def test_upstream_list_changed_is_rediscovered_and_announced(wf: Wf, transport: str, mode: str) -> None:
    tools_file = wf.root / "added-tools.txt"
    config = wf.write_config(toml_config({"up": py_upstream("--tools-file", str(tools_file))}, server=PY_SERVER))
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        notes.append(message)

    if transport == "stdio":
        client = wf.stdio_client(mode, "--config", str(config), message_handler=handler)
    else:
        server = wf.start_http("127.0.0.1", None, "--config", str(config))
        client = wf.http_client(server, mode, message_handler=handler)

    async with client as c:
        # The Python upstream may start after wf's startup grace.
        before = await wait_tools(c, lambda n: "up__echo" in n, "the upstream discovered", PY_START_TIMEOUT)
        assert {"up__echo", "up__add_tool"} <= before and "up__zeta" not in before, sorted(before)
        async with list_changed_waiter(c, notes) as announced:
            with anyio.fail_after(OP_TIMEOUT):
                added = await c.call_tool("up__add_tool", {"name": "zeta"})
            assert not added.is_error and content_text(added.content) == "added zeta", added
            # Every listing follows an announcement: the client lists only when told to.
            # The rediscovery lists on the session that announced the change.
            names = before
            with anyio.fail_after(PY_START_TIMEOUT):
                while "up__zeta" not in names:
                    await announced(PY_START_TIMEOUT)
                    names = await tool_names(c)
        assert names == before | {"up__zeta"}, sorted(names)
        with anyio.fail_after(OP_TIMEOUT):
            called = await c.call_tool("up__zeta", {})
        assert not called.is_error and content_text(called.content) == "I am zeta", called
