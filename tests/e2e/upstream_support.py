"""Helpers of the upstream-hardening tests (test_upstream_hardening.py): reading a
process's environment and peak memory from /proc, waiting on log lines, and
secrets that are random per test."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import all_tools, tail

# Large enough for the biggest reply a test asks wf for (the client's own default is 1 MiB).
CLIENT_MAX_SSE_EVENT = 64 * 1024 * 1024


@contextlib.asynccontextmanager
async def big_reply_client(url: str, headers: dict[str, str], **kw: Any) -> AsyncIterator[Client]:
    """An entered `mcp.Client` of `url` sending `headers`, that accepts SSE events of
    up to CLIENT_MAX_SSE_EVENT bytes (a 10 MiB tool result travels as one event)."""
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http, max_sse_event_size=CLIENT_MAX_SSE_EVENT)
        async with Client(transport, mode="auto", cache=None, **kw) as c:
            yield c


def secret(tag: str) -> str:
    """A random value no process could have by chance."""
    return f"{tag}-{secrets.token_hex(16)}"


def proc_environ(pid: int) -> dict[str, str]:
    """/proc/<pid>/environ: the environment the process was started with."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if item:
            k, _, v = item.decode("utf-8", "replace").partition("=")
            env[k] = v
    return env


def proc_status_kib(pid: int, field: str) -> int:
    """A `kB` field of /proc/<pid>/status (VmHWM: peak resident set size)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no {field}")


def log_matches(log: Path, pattern: str) -> list[str]:
    """The lines of `log` that match the regular expression `pattern`."""
    rx = re.compile(pattern)
    return [line for line in log.read_text(errors="replace").splitlines() if rx.search(line)]


async def wait_log(log: Path, pattern: str, what: str, timeout: float = 60.0) -> list[str]:
    """Waits until `log` has a line matching `pattern`; returns the matching lines."""
    deadline = time.monotonic() + timeout
    while True:
        found = log_matches(log, pattern)
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: no log line /{pattern}/ within {timeout}s:\n{tail(log)}")
        await anyio.sleep(0.05)


async def wait_tools(c: Client, *names: str, timeout: float = 120.0) -> None:
    """Waits until wf lists every tool in `names` (its sources' discovery finished;
    a loaded machine can take longer than wf's startup grace)."""
    deadline = time.monotonic() + timeout
    while True:
        listed = {t.name for t in await all_tools(c)}
        missing = set(names) - listed
        if not missing:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"tools {sorted(missing)} not listed within {timeout}s; listed: {sorted(listed)}")
        await anyio.sleep(0.1)
