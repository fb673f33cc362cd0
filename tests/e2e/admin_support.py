"""Helpers of the admin-surface and reload tests (test_admin_reload.py,
test_admin_surface.py): calling `wf_admin__*` tools, polling with deadlines,
writing config files atomically, and HTTP clients that send extra headers."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import all_tools, content_text

T = TypeVar("T")

# One MCP request (a reload or refresh included).
OP_TIMEOUT = 30
# A config file edit applied by `wf serve`'s watcher (200 ms polling + 300 ms
# debounce) and the discovery of what it added: generous for slow CI machines.
WATCH_TIMEOUT = 15.0

# The tools of the Rust upstream fixture (tests/upstream-fixture).
FX_TOOLS = {"echo", "increment", "get_count", "slow", "progress", "crash", "pid"}
ADMIN_TOOLS = {
    "list_plugins",
    "list_sources",
    "query_audit",
    "refresh_catalog",
    "add_source",
    "update_source",
    "remove_source",
    "enable_source",
    "disable_source",
    "reload",
    "status",
    "pin_tools",
    "diff_tools",
    "approve_tools",
}
ADMIN_TOKEN_HEADER = "X-Wf-Admin-Token"


def write_atomic(path: Path, text: str) -> None:
    """Replaces `path`'s contents in one step (as editors do), so neither the
    watcher nor an explicit reload ever reads a half-written file."""
    tmp = path.with_name(path.name + ".tmp-e2e")
    tmp.write_text(text)
    os.replace(tmp, path)


def result_value(result: Any) -> Any:
    """A tool result's structured content, else its text (parsed as JSON when it is JSON)."""
    if result.structured_content is not None:
        return result.structured_content
    text = content_text(result.content)
    try:
        return json.loads(text)
    except ValueError:
        return text


def result_text(result: Any) -> str:
    """Everything a client can read of a tool result: its text blocks and structured content."""
    return content_text(result.content) + "\n" + json.dumps(result.structured_content)


async def admin_outcome(c: Client, tool: str, arguments: dict[str, Any] | None = None) -> tuple[bool, Any]:
    """Calls `wf_admin__<tool>`; returns (is_error, structured content or text)."""
    with anyio.fail_after(OP_TIMEOUT):
        result = await c.call_tool(f"wf_admin__{tool}", arguments or {})
    return bool(result.is_error), result_value(result)


async def admin(c: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """Calls `wf_admin__<tool>`, which must succeed; returns its structured content."""
    failed, value = await admin_outcome(c, tool, arguments)
    assert not failed, f"wf_admin__{tool}({arguments}) failed: {value}"
    return value


async def sources_by_name(c: Client) -> dict[str, dict[str, Any]]:
    """list_sources' rows by source name."""
    return {row["name"]: row for row in (await admin(c, "list_sources"))["sources"]}


async def structured(c: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """Calls a (non-admin) tool, which must succeed with structured content."""
    with anyio.fail_after(OP_TIMEOUT):
        result = await c.call_tool(tool, arguments or {})
    assert not result.is_error, f"{tool}: {content_text(result.content)}"
    assert result.structured_content is not None, f"{tool}: no structured content: {result.content}"
    return result.structured_content


async def tool_names(c: Client) -> set[str]:
    with anyio.fail_after(OP_TIMEOUT):
        return {t.name for t in await all_tools(c)}


def source_tools(names: set[str], source: str) -> set[str]:
    """The tools of one source (without its `<source>__` prefix)."""
    prefix = f"{source}__"
    return {n[len(prefix) :] for n in names if n.startswith(prefix)}


async def wait_for(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    what: str,
    timeout: float = WATCH_TIMEOUT,
    interval: float = 0.05,
) -> T:
    """Polls `probe()` until `done(value)`; fails with the last value after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout}s; last seen: {value!r}")
        await anyio.sleep(interval)


async def wait_tools(
    c: Client, done: Callable[[set[str]], bool], what: str, timeout: float = WATCH_TIMEOUT
) -> set[str]:
    return await wait_for(lambda: tool_names(c), done, what, timeout)


async def wait_reload(c: Client, previous: Any, what: str, timeout: float = WATCH_TIMEOUT) -> dict[str, Any]:
    """Waits until `status.last_reload` differs from `previous` (a new reload happened); returns it."""
    status = await wait_for(
        lambda: admin(c, "status"), lambda s: s["last_reload"] not in (None, previous), what, timeout
    )
    return status["last_reload"]


@contextlib.asynccontextmanager
async def http_client_with_headers(
    url: str, headers: dict[str, str], mode: str = "auto", **kw: Any
) -> AsyncIterator[Client]:
    """An entered `mcp.Client` of `url` whose every HTTP request carries `headers`
    (mcp 2.3.0: a pre-configured httpx2 client handed to streamable_http_client)."""
    kw.setdefault("read_timeout_seconds", OP_TIMEOUT)
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **kw) as c:
            yield c
