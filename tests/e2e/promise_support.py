"""Helpers of the promise tests (test_promise_*.py): the Python upstream of
promise_upstream.py, a client transport that keeps the raw JSON-RPC messages,
waiting for a tools/list_changed in either protocol generation (from
list_changed_support), and reading `wf` logs."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from conftest import Wf, tail
from list_changed_support import list_changed_waiter  # noqa: F401 (the promise tests import it from here)

E2E_DIR = Path(__file__).resolve().parent
UPSTREAM = E2E_DIR / "promise_upstream.py"

# One MCP request, or one event wf is expected to cause.
OP_TIMEOUT = 30.0
# A Python upstream imports the whole `mcp` package at each start, which takes
# seconds on a loaded 2-core machine: its sources get generous start bounds
# (wf's defaults are 30 s to connect and 15 s to discover).
PY_START_MS = 120_000
PY_START_TIMEOUT = PY_START_MS / 1000
PY_SERVER = {"discovery_timeout_ms": PY_START_MS}


def py_upstream(*args: str) -> dict[str, Any]:
    """An mcp source setting that runs promise_upstream.py over stdio."""
    return {"command": sys.executable, "args": [str(UPSTREAM), *args], "connect_timeout_ms": PY_START_MS}


def start_py_upstream_http(wf: Wf, port: int, *args: str) -> str:
    """Starts promise_upstream.py on streamable HTTP; returns its MCP endpoint."""
    argv = [sys.executable, str(UPSTREAM), "--http", str(port), *args]
    return wf.start_upstream_http("py-upstream", argv, port, timeout=PY_START_TIMEOUT)


async def wait_log_async(path: Path, needle: str, what: str, timeout: float = OP_TIMEOUT) -> str:
    """Waits (without blocking the event loop) until the log file contains `needle`; returns the log."""
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        if needle in text:
            return text
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: {needle!r} not in {path.name} within {timeout}s:\n{tail(path)}")
        await anyio.sleep(0.05)


@contextlib.asynccontextmanager
async def teed(transport: Any, seen: list[Any]) -> AsyncIterator[Any]:
    """A client transport that passes everything through and appends every message
    the server sent, as parsed JSON-RPC (before the client validates it), to `seen`."""
    async with transport as (read, write):
        send, recv = anyio.create_memory_object_stream[Any](100)

        async def pump() -> None:
            async with send:
                async for m in read:
                    seen.append(m)
                    await send.send(m)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                yield recv, write
            finally:
                tg.cancel_scope.cancel()


def raw_stdio_client(wf: Wf, seen: list[Any], mode: str, *extra: str, **kw: Any) -> Client:
    """Like `wf.stdio_client`, keeping the raw server messages in `seen`."""
    errlog = wf.new_log("stdio").open("w")
    wf._files.append(errlog)  # closed with the other logs at teardown
    kw.setdefault("read_timeout_seconds", 60)
    return Client(teed(stdio_client(wf.stdio_params(*extra), errlog=errlog), seen), mode=mode, cache=None, **kw)


