"""wf's list results carry `ttlMs: 0` (and a private `cacheScope`) for
2026-07-28 clients, so a client that caches lists revalidates them; 2025-11-25
clients, whose protocol has no such fields, get neither. (rmcp's server
handler fills in these conservative hints when wf's handler sets none.)

The official client fills in defaults for missing fields when it parses a
result, so the test reads the raw JSON-RPC results the server sent.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp_types import JSONRPCResponse

from conftest import Wf
from promise_support import OP_TIMEOUT, raw_stdio_client

pytestmark = pytest.mark.anyio

LISTS = ("list_tools", "list_prompts", "list_resources", "list_resource_templates")


def raw_results(seen: list[Any]) -> list[dict[str, Any]]:
    out = []
    for m in seen:
        msg = getattr(m, "message", m)
        msg = getattr(msg, "root", msg)
        if isinstance(msg, JSONRPCResponse):
            out.append(msg.result)
    return out


@pytest.mark.parametrize(("mode", "hints"), [("auto", True), ("legacy", False)], ids=["2026-07-28", "2025-11-25"])
async def test_list_results_carry_ttl_ms_zero_for_2026_clients(wf: Wf, mode: str, hints: bool) -> None:
    seen: list[Any] = []
    async with raw_stdio_client(wf, seen, mode) as c:
        for method in LISTS:
            before = len(raw_results(seen))
            with anyio.fail_after(OP_TIMEOUT):
                await getattr(c, method)()
            result = raw_results(seen)[before:]
            assert len(result) == 1, (method, result)
            body = result[0]
            assert any(k in body for k in ("tools", "prompts", "resources", "resourceTemplates")), (method, body)
            if hints:
                assert (body.get("ttlMs"), body.get("cacheScope")) == (0, "private"), (method, body)
            else:
                assert "ttlMs" not in body and "cacheScope" not in body, (method, body)
