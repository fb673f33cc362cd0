"""The live Playwright check: a workflow drives a real browser through
`@playwright/mcp` (pinned in package-lock.json, installed by tests/run with
`npm ci`) and Debian's chromium, on wf's persistent upstream session.

A local page on 127.0.0.1 has a counter button. A deployed workflow navigates
to it, snapshots it, clicks the button by its snapshot ref and snapshots again:
the second snapshot shows the click ("count: 1") because every node ran on the
one live browser. The contrast: the same four calls, each in its own `wf serve`
process (so each on its own upstream session), never see the page.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import Wf, all_tools, children_of, content_text, descendants_of, toml_config, wait_processes_gone
from planner_support import get_run, planner, publish_and_deploy
from playwright_support import CHROMIUM, require_playwright_mcp, serve_pages

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 120
SOURCE = "playwright"

PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>Counter</title></head>
<body><button id=b onclick="this.textContent = 'count: ' + (parseInt(this.textContent.slice(7)) + 1)">count: 0</button></body>
</html>
"""

# The button in a snapshot: `- 'button "count: 0" [ref=e2]'` (refs differ per page load).
BUTTON_REF = re.compile(r'button "count: 0"[^\n]*\[ref=([A-Za-z0-9]+)\]')

COUNTER_CLICK = {
    "name": "counter-click",
    "description": "Opens the counter page, clicks its button once, and shows the page before and after",
    "inputs": {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The counter page"},
            "ref": {"type": "string", "description": "The button's ref in the page's snapshot"},
        },
        "required": ["url", "ref"],
    },
    "nodes": [
        {"id": "open", "use": "playwright.browser_navigate", "args": {"url": {"$ref": "inputs.url"}}},
        {"id": "before", "use": "playwright.browser_snapshot", "args": {}, "after": ["open"]},
        {
            "id": "click",
            "use": "playwright.browser_click",
            "args": {"element": "the counter button", "target": {"$ref": "inputs.ref"}},
            "after": ["before"],
        },
        {"id": "after", "use": "playwright.browser_snapshot", "args": {}, "after": ["click"]},
    ],
    "outputs": {"before": {"$ref": "nodes.before.output"}, "after": {"$ref": "nodes.after.output"}},
}


@pytest.fixture(scope="session")
def playwright_mcp_bin() -> Path:
    return require_playwright_mcp()


@pytest.fixture
def counter_url() -> Iterator[str]:
    """The counter page, served by Python's http.server on 127.0.0.1 in a thread."""
    with serve_pages(lambda _path: PAGE) as base:
        yield f"{base}/counter.html"


def playwright_config(wf: Wf, playwright_mcp_bin: Path, name: str = "wf.toml", isolation: str | None = None) -> Path:
    out = wf.root / "playwright-output"
    out.mkdir(exist_ok=True)
    args = ["--headless", "--no-sandbox", "--isolated", "--executable-path", str(CHROMIUM), "--output-dir", str(out)]
    text = toml_config({SOURCE: {"command": str(playwright_mcp_bin), "args": args}})
    if isolation:
        # The mcp plugin in a child of its own (issue 32): same session, same browser.
        text += f'\n[plugins.wf-source-mcp]\nisolation = "{isolation}"\n'
    return wf.write_config(text, name)


async def playwright_tools(c: Client, timeout: float = 60) -> dict[str, Any]:
    """The proxied playwright tools, once discovery has found them."""
    deadline = time.monotonic() + timeout
    while True:
        tools = {t.name: t for t in await all_tools(c) if t.name.startswith(f"{SOURCE}__")}
        if tools:
            return tools
        assert time.monotonic() < deadline, "playwright's tools never showed up"
        await anyio.sleep(0.2)


def check_tool_shapes(tools: dict[str, Any]) -> None:
    """The names and arguments the workflow uses are playwright-mcp's real ones."""
    navigate = tools[f"{SOURCE}__browser_navigate"].input_schema
    assert navigate["required"] == ["url"] and navigate["properties"]["url"]["type"] == "string"
    snapshot = tools[f"{SOURCE}__browser_snapshot"].input_schema
    assert "required" not in snapshot or snapshot["required"] == []
    click = tools[f"{SOURCE}__browser_click"].input_schema
    assert {"element", "target"} <= set(click["properties"]) and click["required"] == ["target"]


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def chromium_procs(pid: int) -> list[Any]:
    found = []
    for p in descendants_of(pid):
        try:
            exe = os.readlink(f"/proc/{p.pid}/exe")
        except OSError:
            continue
        if "chrom" in Path(exe).name:
            found.append(p)
    return found


@pytest.mark.parametrize("isolation", ["in_process", "process"])
async def test_workflow_clicks_on_one_live_browser(
    wf: Wf, playwright_mcp_bin: Path, counter_url: str, isolation: str
) -> None:
    config = playwright_config(wf, playwright_mcp_bin, isolation=isolation)
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server, read_timeout_seconds=OP_TIMEOUT) as c:
        with anyio.fail_after(OP_TIMEOUT):
            check_tool_shapes(await playwright_tools(c))

            # Where the button's ref comes from. The snapshot node's output is
            # playwright's markdown/YAML text (a JSON string), and wf.std has no
            # regex or substring node, so the ref cannot be cut out of it inside
            # the workflow. So it is discovered once on the same persistent
            # session with call_capability and passed as the workflow input `ref`.
            # Refs are per page load (a reload renames them: e2 → f1e2), so the
            # workflow's navigate goes to the same page with a `#fragment`: a
            # same-document navigation that keeps the loaded page and its refs.
            # The test then checks that the ref IS the one in the workflow's own
            # first snapshot, and that the click landed on the same live page.
            opened = await planner(c, "call_capability", {"ref": "playwright.browser_navigate", "arguments": {"url": counter_url}})
            assert "Page Title: Counter" in opened["output"], opened
            snap = await planner(c, "call_capability", {"ref": "playwright.browser_snapshot"})
            found = BUTTON_REF.search(snap["output"])
            assert found, f"no counter button in the snapshot:\n{snap['output']}"
            ref = found.group(1)

            made = await publish_and_deploy(c, COUNTER_CLICK, "counter-click")
            assert made["deploy"]["tool"] == "wf_deploy__counter-click"
            tools = {t.name: t for t in await all_tools(c)}
            assert tools["wf_deploy__counter-click"].input_schema == COUNTER_CLICK["inputs"]

            result = await c.call_tool("wf_deploy__counter-click", {"url": counter_url + "#workflow", "ref": ref})
            run: dict[str, Any] = result.structured_content or {}
            assert not result.is_error and run.get("status") == "succeeded", run
            before, after = run["outputs"]["before"], run["outputs"]["after"]
            assert 'button "count: 0"' in before and f"[ref={ref}]" in before, before
            assert "count: 1" not in before
            assert 'button "count: 1"' in after, after
            assert "count: 0" not in after
            assert [n["status"] for n in run["nodes"]] == ["succeeded"] * 4, run["nodes"]

            # All four nodes ran on the session call_capability used (epoch 1:
            # never reconnected). Over HTTP the source's default scope is
            # `client`; this stateless (auto) client has no handle, so that is
            # its principal's own session: a lease of the source.
            record, nodes = await get_run(c, run["run_id"])
            assert set(record["sessions"]) == {SOURCE}, record["sessions"]
            used = record["sessions"][SOURCE]
            assert used["expect_epoch"] == 1 and used["lease"].startswith("lease-"), used
            assert {n["epoch"] for n in nodes.values()} == {1}
            assert nodes["click"]["args"] == {"element": "the counter button", "target": ref}

            # Proxied calls use that session too: the page still shows the click.
            proxied = await c.call_tool(f"{SOURCE}__browser_snapshot", {})
            assert not proxied.is_error and 'button "count: 1"' in content_text(proxied.content)

            browsers = chromium_procs(server.proc.pid)
            assert browsers, "no chromium below wf while the session is open"
            hosts = [p for p in children_of(server.proc.pid) if _exe(p.pid).endswith("/wf-plugin-host")]
            assert len(hosts) == (1 if isolation == "process" else 0), hosts
            if hosts:
                # By pid: a process's other /proc fields (its state) change between reads.
                below = {d.pid for d in descendants_of(hosts[0].pid)}
                assert all(b.pid in below for b in browsers), "the browser is not below the plugin's child"
            everything = descendants_of(server.proc.pid)

    # Stopping wf ends playwright-mcp and its browser.
    server.stop()
    left = wait_processes_gone(everything, timeout=15)
    assert left == [], f"processes outlived wf: {left}"


async def test_separate_sessions_do_not_see_the_page(wf: Wf, playwright_mcp_bin: Path, counter_url: str) -> None:
    """The contrast: navigate, snapshot, click and snapshot, each in its own
    `wf serve` process — so each on a fresh upstream session and browser — as a
    one-shot `call_tool` per step would be. Nothing carries over."""
    config = playwright_config(wf, playwright_mcp_bin)

    async def one_call(tool: str, args: dict[str, Any]) -> tuple[bool, str]:
        async with wf.client("stdio", "auto", "--config", str(config)) as c:
            with anyio.fail_after(OP_TIMEOUT):
                tools = await playwright_tools(c)
                check_tool_shapes(tools)
                result = await c.call_tool(f"{SOURCE}__{tool}", args)
                return bool(result.is_error), content_text(result.content)

    # The ref the button gets in a fresh session, found the same way as in the
    # workflow test (navigate + snapshot on one session), so the click below uses
    # a ref that was valid — on another session.
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await playwright_tools(c)
            await planner(c, "call_capability", {"ref": "playwright.browser_navigate", "arguments": {"url": counter_url}})
            snap = await planner(c, "call_capability", {"ref": "playwright.browser_snapshot"})
            found = BUTTON_REF.search(snap["output"])
            assert found, snap["output"]
            ref = found.group(1)

    failed, text = await one_call("browser_navigate", {"url": counter_url})
    assert not failed and "Page Title: Counter" in text, text

    failed, text = await one_call("browser_snapshot", {})
    assert not failed, text
    assert "about:blank" in text and "count:" not in text and "Counter" not in text, text

    failed, text = await one_call("browser_click", {"element": "the counter button", "target": ref})
    assert failed, f"a click on a ref from another session succeeded: {text}"
    assert ref in text and "not found" in text, text

    failed, text = await one_call("browser_snapshot", {})
    assert not failed, text
    assert "about:blank" in text and "count:" not in text, text
