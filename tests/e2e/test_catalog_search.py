"""Large catalogs (issue #34): `search` catalog mode, the meta-tools and budgets,
end to end with the official Python client against the real `wf serve`.

- In `search` mode over 30 fixture upstreams plus server-everything, a
  principal is listed only wf_find / wf_describe / wf_call (and its pinned
  tools); wf_find("echo a message") ranks everything__echo first, and its
  source and tag filters narrow the matches; wf_call
  calls a plain tool, a tool that elicits (the client's callback answers) and
  a tool that reports progress (the client's progress callback sees it), like
  a direct call, and a cancelled wf_call is cancelled in the plugin; a denied tool is neither found, described nor callable.
- A `max_tools` budget lists the meta-tools and the most-used tools; the usage
  that decides it survives a restart (it is kept in the state directory).
- `keep_found`: a found tool joins the session's list, with `list_changed`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from caller_support import Answerer
from conftest import Wf, all_tools, call_outcome, content_text, toml_config
from list_changed_support import list_changed_waiter
from test_cancellation import cancel_once_started, wait_line

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
META = {"wf_find", "wf_describe", "wf_call"}
FIXTURES = 30


@contextlib.asynccontextmanager
async def as_principal(url: str, bearer: str, mode: str = "legacy", **kw: Any) -> AsyncIterator[Client]:
    kw.setdefault("read_timeout_seconds", OP_TIMEOUT)
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **kw) as c:
            yield c


async def find(c: Client, query: str, **extra: Any) -> list[dict[str, Any]]:
    r = await c.call_tool("wf_find", {"query": query, **extra})
    assert not r.is_error, content_text(r.content)
    return r.structured_content["tools"]


async def wait_found(c: Client, query: str, name: str) -> list[dict[str, Any]]:
    """wf_find(query) once `name`'s source is discovered (a node upstream can be slow)."""
    with anyio.move_on_after(OP_TIMEOUT):
        while True:
            hits = await find(c, query)
            if any(h["name"] == name for h in hits):
                return hits
            await anyio.sleep(0.2)
    pytest.fail(f"{name} was not found within {OP_TIMEOUT}s")


def search_config(everything_bin: Path, fixture_upstream_bin: Path) -> str:
    sources: dict[str, dict[str, Any]] = {f"fx{i:02d}": {"command": str(fixture_upstream_bin)} for i in range(FIXTURES)}
    sources["everything"] = {"command": str(everything_bin)}
    return toml_config(sources) + """
[server]
http_token = "${E2E_DEFAULT_TOKEN}"

[[server.tokens]]
name = "searcher"
token = "${E2E_SEARCHER_TOKEN}"
deny_tools = ["everything__get-env"]
catalog = { mode = "search", pinned = ["wf_std__const"] }
"""


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_search_mode_finds_and_calls_like_a_direct_call(
    wf: Wf, everything_bin: Path, fixture_upstream_bin: Path, mode: str
) -> None:
    tokens = {"default": f"d-{uuid.uuid4().hex}", "searcher": f"s-{uuid.uuid4().hex}"}
    config = wf.write_config(search_config(everything_bin, fixture_upstream_bin))
    env = {"E2E_DEFAULT_TOKEN": tokens["default"], "E2E_SEARCHER_TOKEN": tokens["searcher"]}
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=env)
    answers = Answerer()
    async with as_principal(server.url, tokens["searcher"], mode, **answers.callbacks()) as c:
        with anyio.fail_after(OP_TIMEOUT * 3):
            hits = await wait_found(c, "echo a message", "everything__echo")
            assert hits[0]["name"] == "everything__echo", hits
            assert hits[0]["source"] == "everything" and hits[0]["signature"].startswith("everything__echo(message: string"), hits[0]
            # Every fixture is indexed too.
            fx = await find(c, "increment the counter", limit=50)
            assert {h["source"] for h in fx if h["name"].endswith("__increment")} == {f"fx{i:02d}" for i in range(FIXTURES)}, fx

            # Source and tag filters (tags are the tools' annotation hints).
            gz = await find(c, "gzip a file", source="everything", tags=["open_world"])
            assert gz[0]["name"] == "everything__gzip-file-as-resource" and "open_world" in gz[0]["tags"], gz
            read_only = await find(c, "gzip a file", source="everything", tags=["read_only"])
            assert "everything__gzip-file-as-resource" not in {h["name"] for h in read_only}, read_only

            listed = {t.name for t in await all_tools(c)}
            assert listed == META | {"wf_std__const"}, listed

            described = (await c.call_tool("wf_describe", {"names": ["everything__echo"]})).structured_content
            assert described["tools"][0]["inputSchema"]["properties"]["message"], described

            # A plain tool.
            r, err = await call_outcome(c, "wf_call", {"name": "everything__echo", "arguments": {"message": "hi"}})
            assert err is None and "hi" in content_text(r.content), err
            # A tool that elicits: the calling client answers.
            r, err = await call_outcome(c, "wf_call", {"name": "everything__trigger-elicitation-request"})
            assert err is None, err
            assert answers.elicitations, "the client was not asked"
            # A denied tool: not found, not described, not callable (directly or via wf_call).
            env_hits = await find(c, "get environment variables", limit=50)
            assert "everything__get-env" not in {h["name"] for h in env_hits}, env_hits
            described = (await c.call_tool("wf_describe", {"names": ["everything__get-env"]})).structured_content
            assert described == {"tools": [], "unknown": ["everything__get-env"]}, described
            for name, args in (("wf_call", {"name": "everything__get-env"}), ("everything__get-env", {})):
                _, err = await call_outcome(c, name, args)
                assert err is not None and 'not available to principal "searcher"' in err, err

    # Progress reaches the client's callback, all of it, for a client that
    # declares the input capabilities too (progress across input rounds:
    # test_http_progress.py).
    async with as_principal(server.url, tokens["searcher"], mode, **Answerer().callbacks()) as c:
        with anyio.fail_after(OP_TIMEOUT):
            steps: list[float] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                steps.append(progress)

            r = await c.call_tool(
                "wf_call",
                {"name": "everything__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3}},
                progress_callback=on_progress,
            )
            assert not r.is_error, content_text(r.content)
            assert steps == [1.0, 2.0, 3.0], steps

    # The default principal keeps the full catalog.
    async with as_principal(server.url, tokens["default"], mode) as c:
        with anyio.fail_after(OP_TIMEOUT):
            listed = {t.name for t in await all_tools(c)}
    assert {"everything__echo", "everything__get-env", "fx00__increment"} <= listed and not META & listed, len(listed)


BUDGET_CONFIG = """
[server.catalog]
max_tools = 5
"""


async def test_a_budget_lists_the_most_used_tools_and_remembers_them(wf: Wf) -> None:
    config = wf.write_config(BUDGET_CONFIG)
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            first = [t.name for t in await all_tools(c)]
            assert len(first) == 5 and set(first[:3]) == META, first
            for _ in range(3):
                assert not (await c.call_tool("wf_call", {"name": "wf_std__const", "arguments": {"value": 1}})).is_error
            assert not (await c.call_tool("wf_std__template", {"template": "x", "values": {}})).is_error
            listed = [t.name for t in await all_tools(c)]
            assert listed == [*first[:3], "wf_std__const", "wf_std__template"], listed
            assert "wf_find" in (c.instructions or ""), c.instructions
        # Usage is written within a second.
        await anyio.sleep(2)
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            listed = [t.name for t in await all_tools(c)]
    assert listed[3:] == ["wf_std__const", "wf_std__template"], listed


KEEP_FOUND_CONFIG = """
[server.catalog]
mode = "search"
keep_found = true
"""


async def test_found_tools_join_the_session_list(wf: Wf) -> None:
    config = wf.write_config(KEEP_FOUND_CONFIG)
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    async with wf.stdio_client("legacy", "--config", str(config), message_handler=on_message) as c:
        async with list_changed_waiter(c, notes) as announced:
            with anyio.fail_after(OP_TIMEOUT):
                assert {t.name for t in await all_tools(c)} == META
                hits = await find(c, "fill in a template", limit=1)
                assert hits[0]["name"] == "wf_std__template", hits
                await announced(OP_TIMEOUT)
                assert {t.name for t in await all_tools(c)} == META | {"wf_std__template"}


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "legacy"), ("http", "auto")])
async def test_wf_call_is_cancelled_like_a_direct_call(wf: Wf, transport: str, mode: str) -> None:
    """A client cancelling its wf_call: the plugin's `ctx.cancelled()` branch
    runs, then the call's future is dropped (tests/fixtures/cancel)."""
    wf.install("cancel")
    # The fixture writes its markers into the test's folder, which a child's
    # strict sandbox closes (test_sandbox.py covers the sandbox).
    config = wf.write_config('[server.catalog]\nmode = "search"\n\n[plugins.fixture-cancel]\nsandbox = "off"\n')
    async with wf.client(transport, mode, "--config", str(config)) as c:
        marker = wf.root / "wait.log"
        args = {"name": "cancel__wait", "arguments": {"marker": str(marker)}}
        await cancel_once_started(c, "wf_call", args, marker)
        assert await wait_line(marker, "dropped") == ["started", "cancelled", "dropped"]
