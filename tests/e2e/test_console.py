"""The web console at /console, in headless Debian chromium driven by the
Python `playwright` package: sources and plugins render, a capability search
finds wf_std__template, a running workflow's graph turns succeeded live (over
the event stream), cancel stops a slow run, and the API and stream refuse a
caller without the tokens. Screenshots of every page at 1280 and 390 px go to
target/console-screenshots/ (CI artifacts)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from admin_support import structured
from conftest import Wf
from console_support import (
    BEARER,
    WIDTHS,
    Console,
    assert_no_error_or_spinner,
    browser,
    new_page,
    screenshot,
    start_console,
    wait_sources_ready,
)

pytestmark = pytest.mark.anyio


def workflow(name: str, first_sleep_ms: int) -> dict[str, Any]:
    """sleep → render (a template of the sleep's output): two nodes, one edge."""
    return {
        "name": name,
        "nodes": [
            {"id": "nap", "use": "wf.std.sleep", "args": {"ms": first_sleep_ms}},
            {
                "id": "render",
                "use": "wf.std.template",
                "args": {"template": "slept {{ms}}", "values": {"ms": {"$ref": "nodes.nap.output.slept_ms"}}},
            },
        ],
    }


async def start_run(console: Console, wf_doc: dict[str, Any]) -> str:
    async with console.mcp() as c:
        started = await structured(c, "wf_planner__run_workflow", {"workflow": wf_doc, "wait": False})
    return started["run_id"]


async def run_status(console: Console, run_id: str) -> str:
    async with console.mcp() as c:
        return (await structured(c, "wf_planner__get_run", {"run_id": run_id}))["run"]["status"]


async def test_sources_plugins_and_capability_search_render(wf: Wf) -> None:
    refused = wf.install("bad_version")
    wf.install("crashy")  # not bundled: runs in a child (issue 32)
    console = start_console(wf)
    await wait_sources_ready(console)
    async with browser() as b:
        for width in WIDTHS:
            page = await new_page(b, width, tokens=console)
            await page.goto(console.url)
            row = page.locator('tr[data-source="wf.std"]')
            await row.wait_for()
            assert "ready" in await row.inner_text()
            assert "std" in await row.inner_text()
            await screenshot(page, "sources", width)

            # Keyboard only: focus the nav link and press Enter.
            await page.focus('nav a[data-tab="plugins"]')
            await page.keyboard.press("Enter")
            std = page.locator('tr[data-plugin="wf-source-std"]')
            await std.wait_for()
            assert "1." in await std.inner_text(), await std.inner_text()  # its api version
            assert "in_process" in await std.inner_text(), await std.inner_text()
            child = page.locator('tr[data-plugin="fixture-crashy"]')
            assert re.search(r"process: pid \d+, 0 restarts, running", await child.inner_text()), await child.inner_text()
            bad = page.locator(f'tr[data-refused$="{refused.name}"]')
            await bad.wait_for()
            assert "version" in (await bad.inner_text()).lower(), await bad.inner_text()
            await screenshot(page, "plugins", width)

            await page.focus('nav a[data-tab="capabilities"]')
            await page.keyboard.press("Enter")
            await page.locator("#cap-query").fill("template")
            await page.keyboard.press("Enter")
            # The unfiltered list stays on the page until the search answers:
            # wait for it to go, or the checks below would read the old list.
            await page.locator('details[data-capability="wf_std__sleep"]').wait_for(state="detached")
            hit = page.locator('details[data-capability="wf_std__template"]')
            await hit.wait_for()
            await hit.locator("summary").focus()
            await page.keyboard.press("Enter")
            schema = await hit.locator("pre").first.inner_text()
            assert '"template"' in schema, schema
            assert await page.locator('details[data-capability="wf_std__sleep"]').count() == 0
            await screenshot(page, "capabilities", width)
            await page.context.close()


async def test_a_running_workflows_graph_turns_succeeded_live(wf: Wf) -> None:
    console = start_console(wf)
    async with browser() as b:
        page = await new_page(b, 1280, tokens=console)
        streams: list[str] = []
        page.on("request", lambda r: streams.append(r.url) if "/console/api/events" in r.url else None)
        await page.goto(f"{console.url}#/runs")
        await page.locator("text=No runs match.").wait_for()
        # A mark in this document: it survives only if the page is never reloaded.
        await page.evaluate("window.wfSameDocument = true")
        # The page must reach the run while `nap` runs: 5 s is >20x what it takes.
        run_id = await start_run(console, workflow("live", 5000))
        # The new run shows up in the open list (the event stream), and the
        # keyboard opens it.
        link = page.locator(f'tr[data-run="{run_id}"] a')
        await link.wait_for()
        await link.focus()
        await page.keyboard.press("Enter")
        nap = page.locator('[data-node="nap"]')
        render = page.locator('[data-node="render"]')
        await page.locator('[data-node="nap"][data-status="running"]').wait_for()
        assert await render.get_attribute("data-status") == "pending", "render ran before nap finished"
        assert await run_status(console, run_id) == "running"
        assert await page.locator('[data-edge="nap->render"]').count() == 1
        await screenshot(page, "run-live", 1280)
        # No reload: the event stream moves both nodes to succeeded.
        await page.locator('[data-node="render"][data-status="succeeded"]').wait_for()
        assert await nap.get_attribute("data-status") == "succeeded"
        await page.locator('[data-run-status="succeeded"]').wait_for()
        assert await page.evaluate("window.wfSameDocument === true"), "the page was reloaded"
        assert any(f"run={run_id}" in s for s in streams), streams
        # The node's inputs, output and attempts are shown.
        await page.focus('[data-node="render"]')
        await page.keyboard.press("Enter")
        details = page.locator('details[data-node-details="render"]')
        text = await details.inner_text()
        assert "slept 5000" in text and "attempts 1" in text, text
        await screenshot(page, "run", 1280)
        await page.context.close()

        # The run list, filtered, at both widths.
        for width in WIDTHS:
            page = await new_page(b, width, tokens=console)
            await page.goto(f"{console.url}#/runs")
            await page.locator(f'tr[data-run="{run_id}"]').wait_for()
            await page.select_option("#run-status", "failed")
            await page.locator("text=No runs match.").wait_for()
            await page.select_option("#run-status", "succeeded")
            await page.locator(f'tr[data-run="{run_id}"]').wait_for()
            await screenshot(page, "runs", width)
            await page.goto(f"{console.url}#/runs/{run_id}")
            await page.locator('[data-node="render"][data-status="succeeded"]').wait_for()
            await screenshot(page, "run-finished", width)
            await page.context.close()


async def test_cancel_stops_a_slow_run(wf: Wf) -> None:
    console = start_console(wf)
    run_id = await start_run(console, workflow("slow", 60_000))
    async with browser() as b:
        page = await new_page(b, 390, tokens=console)
        await page.goto(f"{console.url}#/runs/{run_id}")
        await page.locator('[data-node="nap"][data-status="running"]').wait_for()
        await screenshot(page, "run-cancel", 390)
        # Keyboard only: focus the button and press Enter.
        await page.focus("#cancel-run")
        await page.keyboard.press("Enter")
        await page.locator('[data-run-status="cancelled"]').wait_for()
        assert await page.locator('[data-node="render"]').get_attribute("data-status") != "succeeded"
        await page.context.close()
    # The run really ended: recorded cancelled, long before its 60 s sleep.
    assert await run_status(console, run_id) == "cancelled"


async def test_the_api_and_stream_refuse_callers_without_the_tokens(wf: Wf) -> None:
    console = start_console(wf)
    base = console.server.base_url
    # One connection per request: a refused request's unread body ends its
    # connection, and a pooled reuse of it would race that close.
    async with httpx2.AsyncClient(base_url=base, timeout=30, headers={"Connection": "close"}) as http:
        # The page itself loads (it holds no data) ...
        page = await http.get("/console/")
        assert page.status_code == 200 and "wf console" in page.text
        assert "default-src 'none'" in page.headers["content-security-policy"]
        # ... but no API call or stream is answered without a token, and
        # the admin surface's views and every action need the admin token
        # too; the planner's views (runs, capabilities) need only what
        # listing them over /mcp needs: the bearer token (issue #37).
        admin_views = [
            ("GET", "/console/api/sources"),
            ("GET", "/console/api/plugins"),
            ("POST", "/console/api/reload"),
            ("POST", "/console/api/sources/refresh"),
            ("POST", "/console/api/runs/run_x/cancel"),
        ]
        planner_views = [
            ("GET", "/console/api/events"),
            ("GET", "/console/api/tasks"),
            ("POST", "/console/api/runs"),
            ("POST", "/console/api/capabilities"),
        ]
        for what, headers, refused in [
            ("no token", {}, admin_views + planner_views),
            ("bearer token only", console.auth(admin=False), admin_views),
            ("wrong admin token", {**console.auth(admin=False), "X-Wf-Admin-Token": "x" * 30}, admin_views),
            ("admin token only", console.auth(bearer=False), admin_views + planner_views),
        ]:
            for method, path in refused:
                r = await http.request(method, path, headers={**headers, "Content-Type": "application/json"}, content="{}")
                assert r.status_code == 401, f"{what}: {method} {path} -> {r.status_code} {r.text}"
                assert "wf.std" not in r.text, f"{what}: {method} {path} leaked data: {r.text}"
        for method, path in [("POST", "/console/api/runs"), ("POST", "/console/api/capabilities")]:
            r = await http.request(method, path, headers=console.auth(admin=False), json={})
            assert r.status_code == 200, f"bearer token only: {method} {path} -> {r.status_code} {r.text}"
        async with http.stream("GET", "/console/api/events", headers=console.auth(admin=False)) as r:
            assert r.status_code == 200, r.status_code
        r = await http.get("/console/api/sources", headers=console.auth(admin=False))
        assert "admin token" in r.json()["error"], r.text
        # A page of another origin is refused even with the tokens (403).
        r = await http.get("/console/api/sources", headers={**console.auth(), "Origin": "http://evil.example"})
        assert r.status_code == 403, r.text
        r = await http.get("/console/", headers={"Host": "evil.example"})
        assert r.status_code == 403, r.text
        # With both tokens: answered.
        r = await http.get("/console/api/sources", headers=console.auth())
        assert r.status_code == 200 and "wf.std" in r.text, r.text
        status = (await http.get("/console/api/status", headers=console.auth())).json()
        assert status["last_reload"] is None, status

    # In the browser, without tokens: the page says how to get in (the
    # printed link, or a bearer token) and opens the token form, with no
    # error; the tokens entered with the keyboard, the sources render.
    async with browser() as b:
        page = await new_page(b, 1280)
        await page.goto(console.url)
        how = page.locator("#signin-how")
        await how.wait_for()
        assert "wf console: open" in await how.inner_text() and "bearer token" in await how.inner_text()
        assert await page.locator("#tokens").is_visible()
        await assert_no_error_or_spinner(page)
        assert await page.locator('tr[data-source="wf.std"]').count() == 0
        await screenshot(page, "tokens", 1280)
        await page.focus("#bearer-token")
        await page.keyboard.type(console.auth()["Authorization"][len("Bearer ") :])
        await page.keyboard.press("Tab")
        await page.keyboard.type(console.auth()["X-Wf-Admin-Token"])
        await page.keyboard.press("Enter")
        await page.locator('tr[data-source="wf.std"]').wait_for()
        await page.context.close()


async def test_a_principals_tool_lists_bound_what_the_console_does_for_it(wf: Wf) -> None:
    ops = "console-ops-0123456789abcdef"
    console = start_console(
        wf,
        '\n[[server.tokens]]\nname = "ops"\ntoken = "${E2E_OPS_TOKEN}"\n'
        'deny_tools = ["wf_admin__reload", "wf_std__template"]\n',
        env={"E2E_OPS_TOKEN": ops},
    )
    as_ops = {**console.auth(), "Authorization": f"Bearer {ops}", "Connection": "close"}
    as_default = {**console.auth(), "Connection": "close"}
    async with httpx2.AsyncClient(base_url=console.server.base_url, timeout=30) as http:
        r = await http.get("/console/api/sources", headers=as_ops)
        assert r.status_code == 200 and "wf.std" in r.text, r.text
        # reload is the admin tool ops may not call: refused, nothing reloaded.
        r = await http.post("/console/api/reload", headers=as_ops, json={})
        assert r.status_code == 403 and "wf_admin__reload" in r.json()["error"], r.text
        status = (await http.get("/console/api/status", headers=as_ops)).json()
        assert status["last_reload"] is None, status
        # The capability list is what each principal's clients are served.
        names = lambda r: {i["name"] for i in r.json()["items"]}  # noqa: E731
        r = await http.post("/console/api/capabilities", headers=as_ops, json={"query": "wf_std"})
        assert "wf_std__sleep" in names(r) and "wf_std__template" not in names(r), r.text
        r = await http.post("/console/api/capabilities", headers=as_default, json={"query": "wf_std"})
        assert "wf_std__template" in names(r), r.text
        r = await http.post("/console/api/reload", headers=as_default, json={})
        assert r.status_code == 200, r.text


async def test_a_task_at_a_source_is_listed_beside_the_runs(wf: Wf, fixture_upstream_bin: Path) -> None:
    """An upstream's task forwarded through wf (a 2026-07-28 client that declared MCP
    Tasks calls the fixture's `job`) is listed in the Runs view's "Tasks at sources",
    with its source, the source's task id, its status as the source tells it and its
    principal; cancelled, it reads `cancelled`. wf's own task id (a handle) is not shown."""
    from test_tasks_runs import Raw

    source = f'\n[sources.fix]\ncommand = "{fixture_upstream_bin}"\nargs = ["--tasks"]\n'
    console = start_console(wf, source)
    async with httpx2.AsyncClient(timeout=60) as http:
        raw = Raw(http, console.server.url, BEARER)
        with anyio.fail_after(60):
            while "result" not in (r := await raw.request("tools/call", {"name": "fix__job", "arguments": {"ms": 600000}}, "fix__job")):
                await anyio.sleep(0.1)
        task_id = r["result"]["taskId"]
        listed = (await http.get(f"{console.server.base_url}/console/api/tasks", headers=console.auth(admin=False))).json()
        [row] = listed["tasks"]
        assert row["source"] == "fix" and row["status"] == "working" and row["principal"], row
        assert row["source_task"] and task_id not in json.dumps(listed), listed
        async with browser() as b:
            page = await new_page(b, 1280, tokens=console)
            await page.goto(f"{console.url}#/runs")
            table = page.locator('table[aria-label="Tasks at sources"]')
            await table.locator("text=working").wait_for()
            assert row["source_task"] in await table.inner_text()
            await screenshot(page, "tasks", 1280)
            await raw.request("tasks/cancel", {"taskId": task_id}, task_id)
            # The view looks again every few seconds.
            await table.locator("text=cancelled").wait_for()
            await page.context.close()
