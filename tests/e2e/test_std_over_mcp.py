"""wf.std served over MCP, seen by the official Python c.

Every test runs over both transports (stdio, streamable HTTP) and both protocol
generations (`auto`: 2026-07-28 via server/discover; `legacy`: initialize).
"""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from conftest import HttpServer, Wf, all_prompts, all_resources, all_tools, content_text

pytestmark = pytest.mark.anyio

STD_NODES = (
    "runtime_error",
    "passthrough",
    "const",
    "template",
    "json_get",
    "merge",
    "assert",
    "sleep",
)
STD_TOOLS = {f"wf_std__{n}" for n in STD_NODES}
CLIENT_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# Generous per-operation bound: a hung server fails the test instead of the run.
OP_TIMEOUT = 30


@pytest.fixture(scope="module")
def std_http(wf_module: Wf) -> HttpServer:
    """One `wf serve --http` on loopback for the whole module (only the real plugins)."""
    return wf_module.start_http()


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def client(transport: str, mode: str, wf: Wf, request: pytest.FixtureRequest) -> Client:
    """A client (enter it with `async with`) of `wf serve` over the parametrized transport and mode.

    Not an async fixture on purpose: the client's task groups must be entered
    and left by the test's own task.
    """
    if transport == "stdio":
        return wf.stdio_client(mode)
    server: HttpServer = request.getfixturevalue("std_http")
    return wf.http_client(server, mode)


async def test_negotiated_protocol(client: Client, mode: str) -> None:
    """auto must land on the 2026-07-28 revision (server/discover), legacy on initialize."""
    async with client as c:
        if mode == "auto":
            assert c.protocol_version in MODERN_PROTOCOL_VERSIONS
        else:
            assert c.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS


# Host-local surfaces served beside the sources (docs/operator-manual.md).
# wf_session__: session handles for stateless HTTP clients (host-local, HTTP only).
HOST_PREFIXES = ("wf_planner__", "wf_admin__", "wf_deploy__", "wf_session__")


async def test_list_tools_is_exactly_wf_std(client: Client) -> None:
    async with client as c:
        with anyio.fail_after(OP_TIMEOUT):
            tools = await all_tools(c)
        names = [t.name for t in tools]
        assert len(names) == len(set(names)), f"duplicate tool names: {names}"
        # The only source is wf.std; everything else is the host's own planner/admin.
        assert {n for n in names if not n.startswith(HOST_PREFIXES)} == STD_TOOLS
        assert any(n.startswith("wf_planner__") for n in names)
        for t in tools:
            assert CLIENT_NAME.match(t.name), t.name
            assert isinstance(t.input_schema, dict), t.name
            assert t.input_schema.get("type") == "object", (t.name, t.input_schema)


STRUCTURED_CALLS = [
    ("passthrough", {"value": {"a": [1, 2]}}, {"value": {"a": [1, 2]}}),
    ("const", {"value": 42}, {"value": 42}),
    (
        "template",
        {"template": "hi {{user.name}}", "values": {"user": {"name": "Ada"}}},
        {"text": "hi Ada"},
    ),
    ("json_get", {"value": {"a": [10, 20]}, "pointer": "/a/1"}, {"value": 20, "found": True}),
    ("merge", {"objects": [{"a": 1}, {"b": 2}]}, {"value": {"a": 1, "b": 2}}),
    ("assert", {"condition": True}, {"ok": True}),
    ("sleep", {"ms": 10}, {"slept_ms": 10}),
]


@pytest.mark.parametrize(("node", "arguments", "expected"), STRUCTURED_CALLS, ids=[c[0] for c in STRUCTURED_CALLS])
async def test_call_std_tool(client: Client, node: str, arguments: dict[str, Any], expected: Any) -> None:
    async with client as c:
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool(f"wf_std__{node}", arguments)
        assert not result.is_error, content_text(result.content)
        assert result.structured_content == expected


ERROR_CALLS = [
    ("runtime_error", {"code": "E42", "message": "nope"}, ["E42", "nope"]),
    ("assert", {"condition": False, "message": "must hold"}, ["must hold"]),
]


@pytest.mark.parametrize(("node", "arguments", "needles"), ERROR_CALLS, ids=[c[0] for c in ERROR_CALLS])
async def test_call_std_tool_error(client: Client, node: str, arguments: dict[str, Any], needles: list[str]) -> None:
    async with client as c:
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool(f"wf_std__{node}", arguments)
        assert result.is_error is True
        text = content_text(result.content)
        for needle in needles:
            assert needle in text, f"{needle!r} not in {text!r}"


async def test_author_workflow_prompt(client: Client) -> None:
    async with client as c:
        with anyio.fail_after(OP_TIMEOUT):
            prompts = await all_prompts(c)
            names = [p.name for p in prompts]
            assert "wf_std__author_workflow" in names
            for n in names:
                assert CLIENT_NAME.match(n), n
            result = await c.get_prompt("wf_std__author_workflow", {"goal": "summarise a page"})
        assert result.messages, "prompt has no messages"
        texts = [content_text(m.content) for m in result.messages]
        assert any("wf.std" in t for t in texts), texts


async def test_reference_resource(client: Client) -> None:
    async with client as c:
        with anyio.fail_after(OP_TIMEOUT):
            resources = await all_resources(c)
            uris = [str(r.uri) for r in resources]
            assert "wf://std/reference" in uris
            result = await c.read_resource("wf://std/reference")
        text = "\n".join(x.text for x in result.contents if isinstance(getattr(x, "text", None), str))
        assert text, "reference resource has no text contents"
        missing = [n for n in STD_NODES if n not in text]
        assert not missing, f"reference does not mention {missing}"
