"""Endpoints (issue #53, docs/operator-manual.md "Endpoints"): virtual servers
at /mcp/NAME over one wf, against the real @modelcontextprotocol/server-everything
and a real FastAPI app's OpenAPI document, with the official `mcp` client.

One wf serves four endpoints beside /mcp: `support` (three everything tools,
`echo` renamed and reworded, a hidden fixed argument), `release` (one OpenAPI
operation with its path parameter fixed and an enum narrowed), `research`
(the API in search mode) and `api` (the API in full). Each shows its own
surface; a principal it does not allow gets 403; a principal's deny list
applies inside; an operation added to the document appears on `api` only.
Over stdio, `wf serve --endpoint` serves one endpoint to `local`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from admin_support import write_atomic
from conftest import HttpServer, Wf, all_tools, content_text
from console_support import WIDTHS, assert_no_error_or_spinner, browser, new_page, screenshot
from list_changed_support import list_changed_waiter
from test_openapi import App

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
LOOKUP = "api__lookup_items__item_id__get"
EXTRA = "api__extra_v2_extra_get"


def tokens() -> dict[str, str]:
    return {who: f"{who}-{os.urandom(12).hex()}" for who in ("alice", "bob", "carol", "dave")}


# Policies see the endpoint beside the original capability.
POLICIES = """\
@id("baseline")
permit(principal, action, resource);

@id("no-sums-for-support")
@reason("support does not do sums")
forbid(principal == wf::Principal::"bob", action == wf::Action::"everything__get-sum", resource)
when { context.endpoint == "support" };
"""


def config(everything_bin: Path, app: App, toks: dict[str, str]) -> str:
    return f"""
[policy]
files = ["policy.cedar"]

[sources.everything]
command = "{everything_bin}"

[sources.api]
kind = "openapi"
spec = "{app.base}/openapi.json"
refresh_interval_ms = 1000

[[server.tokens]]
name = "alice"
token = "{toks["alice"]}"
deny_tools = ["everything__get-sum"]

[[server.tokens]]
name = "bob"
token = "{toks["bob"]}"

[[server.tokens]]
name = "carol"
token = "{toks["carol"]}"

[[server.tokens]]
name = "dave"
token = "{toks["dave"]}"

# A quota on the original tool: it counts calls by the endpoint's name too.
[[quotas]]
name = "dave-echo"
principal = "dave"
tools = "everything__echo"
rate = "2/min"

[endpoints.support]
server_name = "support-desk"
instructions = "Tools for answering customers."
allow = ["alice", "bob", "dave"]
tools = ["everything__echo", "everything__get-sum", "everything__get-annotated-message"]

[endpoints.support.transform.everything__echo]
name = "say"
title = "Say"
description = "Says the message back to the customer."

[endpoints.support.transform.everything__get-annotated-message]
fixed = {{ messageType = "success" }}

[endpoints.release]
allow = ["bob", "local"]

[endpoints.release.transform.{LOOKUP}]
name = "release_item"
description = "Looks up item 7, the release."
fixed = {{ item_id = 7 }}
enums = {{ limit = [10, 20] }}
output_schema = {{ type = "object", properties = {{ item_id = {{ type = "integer" }} }}, required = ["item_id"] }}

[endpoints.research]
allow = ["bob", "carol"]
sources = ["api"]
catalog = {{ mode = "search" }}

[endpoints.research.transform.{LOOKUP}]
description = "Fetches a warehouse parcel by its barcode."

[endpoints.api]
sources = ["api"]

# The planner's tools, narrowed to three node specs; a node that mirrors a
# tool whose argument is fixed here is left out.
[endpoints.builder]
allow = ["bob"]
tools = ["wf_planner__list_capabilities", "wf_planner__describe_capability", "wf_planner__call_capability", "wf_planner__run_workflow"]
nodes = ["everything.echo", "everything.get-sum", "everything.get-annotated-message"]

[endpoints.builder.transform.everything__echo]
name = "shout"
description = "Shouts the message back."

[endpoints.builder.transform.everything__get-annotated-message]
fixed = {{ messageType = "success" }}

# A promise the API does not keep: its results must carry release notes.
[endpoints.api.transform.{LOOKUP}]
output_schema = {{ type = "object", required = ["release_notes"] }}
"""


@pytest.fixture(scope="module")
def toks() -> dict[str, str]:
    return tokens()


@pytest.fixture(scope="module")
def app(wf_module: Wf) -> Iterator[App]:
    a = App(wf_module.root)
    yield a
    a.stop()


@pytest.fixture(scope="module")
def cfg(wf_module: Wf, everything_bin: Path, app: App, toks: dict[str, str]) -> Path:
    wf_module.write_config(POLICIES, "policy.cedar")
    return wf_module.write_config(config(everything_bin, app, toks))


@pytest.fixture(scope="module")
def server(wf_module: Wf, cfg: Path) -> HttpServer:
    return wf_module.start_http("127.0.0.1", None, "--config", str(cfg))


@contextlib.asynccontextmanager
async def client(url: str, bearer: str, mode: str = "legacy", **kw: Any) -> AsyncIterator[Client]:
    kw.setdefault("read_timeout_seconds", OP_TIMEOUT)
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **kw) as c:
            yield c


async def names(c: Client) -> list[str]:
    with anyio.fail_after(OP_TIMEOUT):
        return [t.name for t in await all_tools(c)]


async def wait_names(c: Client, want: set[str]) -> list[str]:
    """The tools, once every one of `want` is listed (discovery may still run)."""
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            got = await names(c)
            if want <= set(got):
                return got
            await anyio.sleep(0.2)


async def refused(c: Client, tool: str, args: dict[str, Any]) -> str:
    """The error text of a call that must fail (a JSON-RPC error or an error result)."""
    try:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool(tool, args)
    except MCPError as e:
        return str(e)
    assert r.is_error, f"{tool} {args} was not refused: {r}"
    return content_text(r.content)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_endpoints_show_their_own_surfaces(server: HttpServer, toks: dict[str, str], mode: str) -> None:
    async with client(f"{server.url}/support", toks["bob"], mode) as c:
        got = await wait_names(c, {"say"})
        assert sorted(got) == ["everything__get-annotated-message", "everything__get-sum", "say"], got
        assert c.server_info.name == "support-desk", c.server_info
        assert c.instructions == "Tools for answering customers."
        say = next(t for t in await all_tools(c) if t.name == "say")
        assert say.description == "Says the message back to the customer." and say.title == "Say", say
        annotated = next(t for t in await all_tools(c) if t.name == "everything__get-annotated-message")
        assert "messageType" not in annotated.input_schema.get("properties", {}), annotated.input_schema
    async with client(f"{server.url}/release", toks["bob"], mode) as c:
        got = await wait_names(c, {"release_item"})
        assert got == ["release_item"], got
        item = (await all_tools(c))[0]
        assert "item_id" not in item.input_schema["properties"], item.input_schema
        assert item.input_schema["properties"]["limit"]["enum"] == [10, 20], item.input_schema
        assert c.server_info.name == "wf-release", c.server_info
    # /mcp itself is unchanged: the whole surface under the usual names.
    async with client(server.url, toks["bob"], mode) as c:
        got = set(await wait_names(c, {"everything__echo", LOOKUP}))
        assert "say" not in got and "release_item" not in got


async def test_a_renamed_tool_is_called_by_its_new_name_only(server: HttpServer, toks: dict[str, str]) -> None:
    async with client(f"{server.url}/support", toks["bob"]) as c:
        await wait_names(c, {"say"})
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("say", {"message": "hello from support"})
        assert not r.is_error and "hello from support" in content_text(r.content), r
        # Its /mcp name and tools the endpoint does not select are unknown here.
        assert "unknown tool" in await refused(c, "everything__echo", {"message": "x"})
        assert "unknown tool" in await refused(c, "everything__get-env", {})
        assert "unknown tool" in await refused(c, LOOKUP, {"item_id": 1})


async def test_hidden_fixed_arguments_are_enforced(server: HttpServer, toks: dict[str, str], app: App) -> None:
    async with client(f"{server.url}/release", toks["bob"]) as c:
        await wait_names(c, {"release_item"})
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("release_item", {"q": "notes"})
        assert not r.is_error, r
        # The call that reached the app is the original with the fixed value.
        assert r.structured_content["item_id"] == 7 and r.structured_content["q"] == "notes", r.structured_content
        assert "is fixed" in await refused(c, "release_item", {"item_id": 8})
        assert "must be one of" in await refused(c, "release_item", {"limit": 30})
        with anyio.fail_after(OP_TIMEOUT):
            ok = await c.call_tool("release_item", {"item_id": 7, "limit": 20})
        assert not ok.is_error and ok.structured_content["limit"] == 20, ok
    async with client(f"{server.url}/support", toks["bob"]) as c:
        await wait_names(c, {"say"})
        assert "is fixed" in await refused(c, "everything__get-annotated-message", {"messageType": "error"})
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("everything__get-annotated-message", {})
        assert not r.is_error, r


async def test_a_search_mode_endpoint_finds_only_its_own_tools(server: HttpServer, toks: dict[str, str]) -> None:
    async with client(f"{server.url}/research", toks["carol"]) as c:
        got = await names(c)
        assert sorted(got) == ["wf_call", "wf_describe", "wf_find"], got
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_find", {"query": "look an item up"})
        found = [t["name"] for t in r.structured_content["tools"]]
        assert LOOKUP in found and all(n.startswith("api__") for n in found), found
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_find", {"query": "echo the input string"})
        found = [t["name"] for t in r.structured_content["tools"]]
        assert not any(n.startswith("everything__") for n in found), found
        # wf_find ranks the endpoint's own wording: words only it has find the tool.
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_find", {"query": "warehouse parcel barcode"})
        hits = r.structured_content["tools"]
        assert hits and hits[0]["name"] == LOOKUP, r.structured_content
        assert hits[0]["description"] == "Fetches a warehouse parcel by its barcode.", hits
        assert r.structured_content.get("good_match", True), r.structured_content
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_describe", {"names": ["everything__echo", LOOKUP]})
        assert r.structured_content["unknown"] == ["everything__echo"], r.structured_content
        assert r.structured_content["tools"][0]["description"] == "Fetches a warehouse parcel by its barcode."
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_call", {"name": LOOKUP, "arguments": {"item_id": 3}})
        assert not r.is_error and r.structured_content["item_id"] == 3, r
        assert "unknown tool" in await refused(c, "wf_call", {"name": "everything__echo", "arguments": {"message": "x"}})
    # On the release endpoint, wf_find shows the endpoint's name and wording.
    async with client(f"{server.url}/release", toks["bob"]) as c:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_find", {"query": "look an item up"})
        hits = r.structured_content["tools"]
        assert [h["name"] for h in hits] == ["release_item"], hits
        assert hits[0]["description"] == "Looks up item 7, the release.", hits
    # On /mcp the same words find nothing: the wording is the endpoint's alone.
    async with client(server.url, toks["carol"]) as c:
        await wait_names(c, {LOOKUP})
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_find", {"query": "warehouse parcel barcode"})
        assert r.structured_content.get("good_match") is False, r.structured_content


async def planner_call(c: Client, tool: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(OP_TIMEOUT):
        return await c.call_tool(f"wf_planner__{tool}", args)


async def test_the_planner_on_an_endpoint_shows_and_reaches_only_its_own(
    server: HttpServer, toks: dict[str, str]
) -> None:
    async with client(f"{server.url}/builder", toks["bob"]) as c:
        await wait_names(c, {"shout"})
        nodes = (await planner_call(c, "list_capabilities", {"limit": 200})).structured_content
        assert sorted(i["ref"] for i in nodes["items"]) == ["everything.echo", "everything.get-sum"], nodes
        tools = (await planner_call(c, "list_capabilities", {"kind": "tool", "limit": 200})).structured_content
        by_name = {i["name"]: i for i in tools["items"]}
        assert by_name["shout"]["description"] == "Shouts the message back.", tools
        assert "everything__echo" not in by_name and "everything__get-env" not in by_name, sorted(by_name)
        found = (await planner_call(c, "list_capabilities", {"kind": "tool", "query": "shouts"})).structured_content
        assert [i["name"] for i in found["items"]] == ["shout"], found
        for ref in ("everything.get-env", "everything.get-annotated-message"):
            r = await planner_call(c, "describe_capability", {"ref": ref})
            assert r.is_error and "no capability" in content_text(r.content), r
        r = await planner_call(c, "call_capability", {"ref": "everything.get-sum", "arguments": {"a": 20, "b": 22}})
        assert not r.is_error and "42" in json.dumps(r.structured_content), r
        r = await planner_call(
            c, "call_capability", {"ref": "everything.get-annotated-message", "arguments": {"messageType": "error"}}
        )
        assert r.is_error and "no capability" in content_text(r.content), r
        workflow = {"name": "w", "nodes": [{"id": "env", "use": "everything.get-env", "args": {}}]}
        r = await planner_call(c, "run_workflow", {"workflow": workflow})
        assert r.is_error and "does not offer" in json.dumps(r.structured_content) + content_text(r.content), r
    # /mcp's planner lists every node spec.
    async with client(server.url, toks["bob"]) as c:
        await wait_names(c, {"wf_planner__list_capabilities"})
        nodes = (await planner_call(c, "list_capabilities", {"limit": 200})).structured_content
        refs = {i["ref"] for i in nodes["items"]}
        assert {"everything.get-env", "everything.get-annotated-message"} <= refs, refs


async def test_the_console_lists_the_endpoints_and_their_surfaces(server: HttpServer, toks: dict[str, str]) -> None:
    r = httpx2.get(
        f"{server.base_url}/console/api/endpoints", headers={"Authorization": f"Bearer {toks['carol']}"}, timeout=OP_TIMEOUT
    )
    assert r.status_code == 200, r.text
    by_name = {e["name"]: e for e in r.json()["endpoints"]}
    assert sorted(by_name) == ["api", "builder", "release", "research", "support"], sorted(by_name)
    support = by_name["support"]
    assert support["path"] == "/mcp/support" and support["server_name"] == "support-desk", support
    assert support["allowed"] is False and by_name["research"]["allowed"] is True, by_name
    assert by_name["research"]["mode"] == "search" and support["mode"] == "full", by_name
    say = next(t for t in support["tools"] if t["name"] == "say")
    assert say["original"] == "everything__echo" and say["transformed"], say
    assert say["description"] == "Says the message back to the customer.", say
    annotated = next(t for t in support["tools"] if t["name"] == "everything__get-annotated-message")
    assert annotated["fixed"] == ["messageType"], annotated
    # Without a token: 401, and nothing of the endpoints.
    r = httpx2.get(f"{server.base_url}/console/api/endpoints", timeout=OP_TIMEOUT)
    assert r.status_code == 401 and "support" not in r.text, r.text
    # The page renders them.
    async with browser() as b:
        for width in WIDTHS:
            page = await new_page(b, width)
            await page.context.add_init_script(f"sessionStorage.setItem('wf.bearer', {toks['carol']!r});")
            await page.goto(f"{server.base_url}/console/#/endpoints")
            row = page.locator('details[data-endpoint="support"]')
            await row.wait_for()
            await row.locator("summary").click()
            text = await row.inner_text()
            assert "/mcp/support" in text and "everything__echo" in text and "messageType" in text, text
            assert await page.locator('tr[data-tool="say"]').count() == 1
            await assert_no_error_or_spinner(page)
            await screenshot(page, "endpoints", width)


def initialize(url: str, bearer: str | None) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    return httpx2.post(url, json=body, headers=headers, timeout=OP_TIMEOUT)


async def test_a_principal_not_allowed_gets_403(server: HttpServer, toks: dict[str, str]) -> None:
    r = initialize(f"{server.url}/support", toks["carol"])
    assert r.status_code == 403, (r.status_code, r.text)
    assert "not allowed on endpoint" in r.json()["error"]["message"], r.text
    assert initialize(f"{server.url}/release", toks["alice"]).status_code == 403
    assert initialize(f"{server.url}/nowhere", toks["bob"]).status_code == 404
    # The guard still comes first: no token is 401 on an endpoint too.
    assert initialize(f"{server.url}/support", None).status_code == 401
    assert initialize(f"{server.url}/support", toks["alice"]).status_code == 200


async def test_a_deny_list_applies_inside_an_endpoint(server: HttpServer, toks: dict[str, str]) -> None:
    async with client(f"{server.url}/support", toks["alice"]) as c:
        got = await wait_names(c, {"say"})
        assert "everything__get-sum" not in got, got
        text = await refused(c, "everything__get-sum", {"a": 1, "b": 2})
        assert "get-sum" in text, text
    # Bob's own lists allow get-sum; a policy on the endpoint forbids it there only.
    async with client(f"{server.url}/support", toks["bob"]) as c:
        assert "everything__get-sum" in await wait_names(c, {"everything__get-sum"})
        assert "support does not do sums" in await refused(c, "everything__get-sum", {"a": 1, "b": 2})
    async with client(server.url, toks["bob"]) as c:
        await wait_names(c, {"everything__get-sum"})
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("everything__get-sum", {"a": 2, "b": 40})
        assert not r.is_error and "42" in content_text(r.content), r


def audit_rows(wf: Wf, cfg: Path, *args: str) -> list[dict[str, Any]]:
    r = wf.run("audit", "--config", str(cfg), "--state-dir", str(wf.state_dir), "--format", "jsonl", *args)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


async def test_audit_records_name_the_endpoint_and_the_original_tool(
    server: HttpServer, toks: dict[str, str], wf_module: Wf, cfg: Path
) -> None:
    async with client(f"{server.url}/support", toks["bob"]) as c:
        await wait_names(c, {"say"})
        with anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("say", {"message": "audited"})
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            rows = [r for r in audit_rows(wf_module, cfg, "--capability", "everything__echo") if r.get("endpoint")]
            if rows:
                break
            await anyio.sleep(0.2)
    assert {r["endpoint"] for r in rows} == {"support"}, rows
    assert all(r["principal"] == "bob" for r in rows), rows
    # A call on /mcp names no endpoint.
    sums = audit_rows(wf_module, cfg, "--capability", "everything__get-sum")
    assert any("endpoint" not in r for r in sums) and any(r.get("endpoint") == "support" for r in sums), sums


async def test_an_operation_added_upstream_appears_on_the_matching_endpoint_only(
    server: HttpServer, toks: dict[str, str], app: App
) -> None:
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        notes.append(message)

    async with client(f"{server.url}/api", toks["bob"], message_handler=handler) as c:
        before = await wait_names(c, {LOOKUP})
        assert EXTRA not in before
        async with list_changed_waiter(c, notes) as announced:
            app.flag.write_text("v2")
            await announced(OP_TIMEOUT)
        assert EXTRA in await names(c)
    async with client(f"{server.url}/support", toks["bob"]) as c:
        assert EXTRA not in await wait_names(c, {"say"})
    async with client(f"{server.url}/research", toks["bob"]) as c:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_describe", {"names": [EXTRA]})
        assert r.structured_content["unknown"] == [], r.structured_content


async def test_a_replaced_output_schema_is_enforced(server: HttpServer, toks: dict[str, str]) -> None:
    # release: the results match its schema (and the client, which checks them, accepts them).
    async with client(f"{server.url}/release", toks["bob"]) as c:
        await wait_names(c, {"release_item"})
        item = (await all_tools(c))[0]
        assert item.output_schema == {
            "type": "object", "properties": {"item_id": {"type": "integer"}}, "required": ["item_id"]}, item
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("release_item", {"q": "schema"})
        assert not r.is_error and r.structured_content["item_id"] == 7, r
    # api: a schema the API's results do not match is a tool error that says where.
    async with client(f"{server.url}/api", toks["bob"]) as c:
        await wait_names(c, {LOOKUP})
        text = await refused(c, LOOKUP, {"item_id": 5})
        assert "does not match its output schema" in text and "release_notes" in text, text
        assert f"{LOOKUP} (on this endpoint)" in text, text
    # /mcp keeps the tool's own schema: the same call succeeds.
    async with client(server.url, toks["bob"]) as c:
        await wait_names(c, {LOOKUP})
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool(LOOKUP, {"item_id": 5})
        assert not r.is_error and r.structured_content["item_id"] == 5, r


async def test_a_quota_on_the_original_tool_counts_calls_by_the_new_name(
    server: HttpServer, toks: dict[str, str]
) -> None:
    async with client(f"{server.url}/support", toks["dave"]) as c:
        await wait_names(c, {"say"})
        for i in range(2):
            with anyio.fail_after(OP_TIMEOUT):
                r = await c.call_tool("say", {"message": f"call {i}"})
            assert not r.is_error, r
        with pytest.raises(MCPError) as e, anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("say", {"message": "one too many"})
        assert e.value.data["stage"] == "limit" and "dave-echo" in str(e.value), (e.value, e.value.data)
    # One budget, the original tool's: /mcp's name for it is past the limit too.
    async with client(server.url, toks["dave"]) as c:
        await wait_names(c, {"everything__echo"})
        with pytest.raises(MCPError) as e, anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("everything__echo", {"message": "x"})
        assert e.value.data["stage"] == "limit", e.value.data


async def test_a_reload_that_changes_one_endpoint_tells_its_clients_only(
    server: HttpServer, toks: dict[str, str], wf_module: Wf, cfg: Path, app: App, everything_bin: Path
) -> None:
    """Last of the module's tests on `server`: it edits the config."""
    release_notes: list[Any] = []
    support_notes: list[Any] = []

    async def on_release(m: Any) -> None:
        release_notes.append(m)

    async def on_support(m: Any) -> None:
        support_notes.append(m)

    def tool_changes(notes: list[Any]) -> int:
        return sum(isinstance(n, types.ToolListChangedNotification) for n in notes)

    base = config(everything_bin, app, toks)
    async with (
        client(f"{server.url}/release", toks["bob"], message_handler=on_release) as rel,
        client(f"{server.url}/support", toks["bob"], message_handler=on_support) as sup,
    ):
        await wait_names(rel, {"release_item"})
        await wait_names(sup, {"say"})
        # Only release's selection changes: its clients hear it.
        async with list_changed_waiter(rel, release_notes) as announced:
            write_atomic(cfg, base.replace("[endpoints.release]\n", '[endpoints.release]\ntools = ["everything__echo"]\n'))
            await announced(OP_TIMEOUT)
        assert sorted(await names(rel)) == ["everything__echo", "release_item"]
        # Then support's: its clients hear that one, and never heard the first.
        async with list_changed_waiter(sup, support_notes) as announced:
            write_atomic(
                cfg,
                base.replace("[endpoints.release]\n", '[endpoints.release]\ntools = ["everything__echo"]\n').replace(
                    '"everything__get-annotated-message"]', '"everything__get-annotated-message", "everything__get-env"]'
                ),
            )
            await announced(OP_TIMEOUT)
        assert "everything__get-env" in await names(sup)
        assert tool_changes(support_notes) == 1, support_notes
        assert "everything__get-env" not in await names(rel)


async def test_an_endpoint_pins_a_session_scope_per_source(wf: Wf, fixture_upstream_bin: Path) -> None:
    """The fixture is `shared` (one process for everyone); `isolated` pins it per
    client, so each of its clients gets an upstream of its own (told apart by pid)."""
    bearer = f"bob-{os.urandom(12).hex()}"
    cfg = wf.write_config(f"""
[[server.tokens]]
name = "bob"
token = "{bearer}"

[sources.fx]
command = "{fixture_upstream_bin}"

[endpoints.isolated]
tools = ["fx__*"]
sessions = {{ fx = "client" }}

[endpoints.plain]
tools = ["fx__*"]
""")
    http = wf.start_http("127.0.0.1", None, "--config", str(cfg))

    async def pid(c: Client) -> int:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("fx__pid", {})
        assert not r.is_error, r
        return int(json.loads(content_text(r.content))["pid"]) if r.structured_content is None else int(
            r.structured_content["pid"]
        )

    async with (
        client(http.url, bearer) as whole,
        client(f"{http.url}/plain", bearer) as plain,
        client(f"{http.url}/isolated", bearer) as one,
        client(f"{http.url}/isolated", bearer) as two,
    ):
        await wait_names(whole, {"fx__pid"})
        shared = await pid(whole)
        assert await pid(plain) == shared
        first, second = await pid(one), await pid(two)
        assert len({shared, first, second}) == 3, (shared, first, second)
        # Each client keeps its own.
        assert await pid(one) == first and await pid(two) == second


async def test_stdio_serves_one_endpoint(wf: Wf, everything_bin: Path) -> None:
    app = App(wf.root)
    try:
        wf.write_config(POLICIES, "policy.cedar")
        cfg = wf.write_config(config(everything_bin, app, tokens()))
        async with wf.stdio_client("legacy", "--config", str(cfg), "--endpoint", "release") as c:
            got = await wait_names(c, {"release_item"})
            assert got == ["release_item"], got
            with anyio.fail_after(OP_TIMEOUT):
                r = await c.call_tool("release_item", {})
            assert not r.is_error and r.structured_content["item_id"] == 7, r
            assert "is fixed" in await refused(c, "release_item", {"item_id": 1})
        # `local` is not allowed on support: every request is a JSON-RPC error.
        with pytest.raises(Exception) as e:  # noqa: PT011 - the client wraps it in a group
            async with wf.stdio_client("legacy", "--config", str(cfg), "--endpoint", "support") as c:
                await c.list_tools()
        assert "not allowed on endpoint" in repr(e.value) or "not allowed" in str(e.value), repr(e.value)
        missing = wf.run("serve", "--config", str(cfg), "--endpoint", "nope", *wf.plugin_args())
        assert missing.returncode != 0 and "no [endpoints.nope]" in missing.stderr, missing.stderr
    finally:
        app.stop()


def test_wf_check_reports_missing_targets_and_alias_collisions(wf: Wf, everything_bin: Path) -> None:
    cfg = wf.write_config(f"""
[sources.everything]
command = "{everything_bin}"

[endpoints.good]
tools = ["everything__echo"]

[endpoints.broken]
tools = ["everything__get-*"]

[endpoints.broken.transform.everything__no-such-tool]
name = "ghost"

[endpoints.broken.transform.everything__echo]
name = "everything__get-sum"

[endpoints.broken.transform.everything__get-env]
fixed = {{ repo = "acme/site" }}

[endpoints.empty]
tools = ["nothing__*"]
""")
    r = wf.run("check", "--deep", "--config", str(cfg), *wf.plugin_args(), timeout=120)
    assert r.returncode == 1, r.stderr
    err = r.stderr
    assert 'endpoints.broken: transform.everything__no-such-tool: no tool "everything__no-such-tool"' in err, err
    assert "everything__echo is renamed \"everything__get-sum\", the name of a selected tool" in err, err
    assert 'everything__get-env has no argument "repo"' in err, err
    assert "endpoints.empty: selects nothing" in err, err
    assert "endpoints.good" not in err, err
    # Bad names and unknown keys are refused with the key that holds them.
    bad = wf.write_config("[endpoints.Bad]\ntools = [\"x\"]\n", "bad.toml")
    r = wf.run("check", "--config", str(bad), *wf.plugin_args())
    assert r.returncode == 1 and "endpoints.Bad" in r.stderr and "invalid endpoint name" in r.stderr, r.stderr
    typo = wf.write_config("[endpoints.ok]\ntool = [\"x\"]\n", "typo.toml")
    r = wf.run("check", "--config", str(typo), *wf.plugin_args())
    assert r.returncode == 1 and 'unknown key "tool" (did you mean "tools"?)' in r.stderr, r.stderr
