"""Waiting for a tools/list_changed, in either protocol generation: the one
home of this helper (the promise tests and the reload tests use it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import ToolsListChanged


@contextlib.asynccontextmanager
async def list_changed_waiter(c: Client, notes: list[Any]) -> AsyncIterator[Callable[[float], Awaitable[None]]]:
    """`announced(timeout)`: waits for the next tools/list_changed — seen by the
    message handler that appends to `notes` (a 2025-11-25 client), or on a
    `subscriptions/listen` stream (a 2026-07-28 client, which has no session)."""
    if c.protocol_version == "2025-11-25":
        seen = len(notes)

        async def announced(timeout: float) -> None:
            nonlocal seen
            with anyio.fail_after(timeout):
                while True:
                    for i in range(seen, len(notes)):
                        if isinstance(notes[i], types.ToolListChangedNotification):
                            seen = i + 1
                            return
                    seen = len(notes)
                    await anyio.sleep(0.02)

        yield announced
        return
    assert c.protocol_version == "2026-07-28", c.protocol_version
    async with c.listen(tools_list_changed=True) as sub:
        assert sub.honored.tools_list_changed is True, sub.honored

        async def announced(timeout: float) -> None:
            with anyio.fail_after(timeout):
                async for event in sub:
                    if isinstance(event, ToolsListChanged):
                        return
                pytest.fail("the subscriptions/listen stream ended")

        yield announced
