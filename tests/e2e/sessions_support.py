"""Helpers for the session-scope tests (test_sessions.py, test_playwright_sessions.py):
a `wf serve --http` with named principals, clients that present a principal's
token, and the fixture upstream's per-process state (its pid and counter)."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import HttpServer, Wf, content_text, toml_config, toml_value

OP_TIMEOUT = 60
SOURCE = "fx"

# One random token per principal for the whole run (tokens must be long and random).
TOKENS = {name: secrets.token_hex(24) for name in ("alice", "bob")}


def sessions_config(
    wf: Wf,
    sources: dict[str, dict[str, Any]],
    *,
    admin_open: bool = False,
    principals: bool = True,
    name: str = "wf.toml",
) -> Path:
    """A config with `[[server.tokens]]` for alice and bob (unless `principals` is
    false) and, with `admin_open`, the admin tools open to loopback HTTP clients."""
    text = toml_config(sources)
    if principals:
        tokens = [{"name": n, "token": t} for n, t in TOKENS.items()]
        text = f"[server]\ntokens = {toml_value(tokens)}\n\n" + text
    if admin_open:
        text += '\n[admin]\nover_http = "open"\n'
    return wf.write_config(text, name)


def fixture_source(upstream_bin: Path, **session: Any) -> dict[str, Any]:
    """The stateful Rust fixture upstream (a counter per process) as an mcp source."""
    return {"command": str(upstream_bin), "args": [], **session}


@contextlib.asynccontextmanager
async def client_as(
    server: HttpServer, principal: str | None, mode: str = "legacy", **kw: Any
) -> AsyncIterator[Client]:
    """An entered client of `server` that presents `principal`'s token (None: no token)."""
    kw.setdefault("read_timeout_seconds", OP_TIMEOUT)
    headers = {"Authorization": f"Bearer {TOKENS[principal]}"} if principal else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(server.url, http_client=http), mode=mode, cache=None, **kw) as c:
            yield c


async def tool_json(c: Client, name: str, args: dict[str, Any] | None = None, meta: Any = None) -> dict[str, Any]:
    """Calls a tool that must succeed; its structured result (or its text as JSON)."""
    result = await c.call_tool(name, args or {}, meta=meta)
    assert not result.is_error, f"{name} failed: {content_text(result.content)}"
    if result.structured_content is not None:
        return dict(result.structured_content)
    return json.loads(content_text(result.content))


async def pid(c: Client, meta: Any = None) -> int:
    return int((await tool_json(c, f"{SOURCE}__pid", meta=meta))["pid"])


async def increment(c: Client, meta: Any = None) -> int:
    return int((await tool_json(c, f"{SOURCE}__increment", meta=meta))["count"])


async def count(c: Client, meta: Any = None) -> int:
    return int((await tool_json(c, f"{SOURCE}__get_count", meta=meta))["count"])
