"""An HTTP mcp source's `headers`, `auth.headers` (merged over `headers`, auth
wins) and `auth.bearer_token` (as `Authorization: Bearer …`) reach a live
upstream on every request: discovery's one-shot session and the persistent
session of a proxied call alike. The upstream (promise_upstream.py --http)
records each request's headers; the secrets come from `${VAR}`s, so they are
also proven expanded.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from admin_support import wait_tools
from conftest import Wf, content_text, free_port, toml_config
from promise_support import OP_TIMEOUT, start_py_upstream_http

pytestmark = pytest.mark.anyio

TOKEN = "tok-0123456789abcdef-bearer"  # >= 16 characters
AUTH_TEAM = "auth-team-0123456789abcdef"


async def test_headers_auth_headers_and_bearer_token_reach_the_upstream(wf: Wf) -> None:
    record = wf.root / "headers.jsonl"
    url = start_py_upstream_http(wf, free_port(), "--record", str(record))
    source = {
        "url": url,
        "headers": {"X-Team": "from-headers", "X-Only-Headers": "plain"},
        "auth": {
            "bearer_token": "${PROMISE_TOKEN}",
            "headers": {"X-Team": "${PROMISE_TEAM}", "X-Only-Auth": "auth-only"},
        },
    }
    config = wf.write_config(toml_config({"up": source}))
    env = {"PROMISE_TOKEN": TOKEN, "PROMISE_TEAM": AUTH_TEAM}
    async with wf.stdio_client("auto", "--config", str(config), env=env) as c:
        await wait_tools(c, lambda n: "up__echo" in n, "the upstream discovered")
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool("up__echo", {"text": "through wf"})
        assert not result.is_error and content_text(result.content) == "through wf", result

    requests: list[dict[str, Any]] = [json.loads(line) for line in record.read_text().splitlines()]
    # Sessions of discovery and of the call: initialize, lists, the call...
    assert len([r for r in requests if r["method"] == "POST"]) >= 3, requests
    for r in requests:
        h = r["headers"]
        assert h.get("authorization") == f"Bearer {TOKEN}", r
        assert h.get("x-team") == AUTH_TEAM, r
        assert h.get("x-only-headers") == "plain", r
        assert h.get("x-only-auth") == "auth-only", r
