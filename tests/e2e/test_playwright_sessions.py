"""Browser state never leaks between clients: `@playwright/mcp` with Debian's
chromium behind `wf serve --http` with `session = "client"`. Two clients of
one principal and a client of another principal each navigate to their own
page; each one's snapshot shows only its own page, and A's page survives B's
calls. The pages are served by Python's http.server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import Wf, content_text, descendants_of, wait_listed, wait_processes_gone
from playwright_support import CHROMIUM, require_playwright_mcp, serve_pages
from sessions_support import client_as, sessions_config

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 180
SOURCE = "playwright"
OWNERS = ("alice-one", "alice-two", "bob")


@pytest.fixture(scope="module")
def playwright_mcp_bin() -> Path:
    return require_playwright_mcp()


@pytest.fixture
def pages_url() -> Iterator[str]:
    """`<base>/<owner>` is a page titled and headed "Page of <owner>"."""

    def page(path: str) -> bytes:
        owner = path.strip("/")
        return f"<!doctype html><title>Page of {owner}</title><h1>Page of {owner}</h1>".encode()

    with serve_pages(page) as base:
        yield base


def playwright_source(wf: Wf, playwright_mcp_bin: Path) -> dict[str, Any]:
    out = wf.root / "playwright-output"
    out.mkdir(exist_ok=True)
    args = ["--headless", "--no-sandbox", "--isolated", "--executable-path", str(CHROMIUM), "--output-dir", str(out)]
    # No `session` key: over HTTP a source that names a browser server gets
    # one session per client by default (docs/operator-manual.md, "Session scopes").
    return {"command": str(playwright_mcp_bin), "args": args}


async def snapshot(c: Any) -> str:
    result = await c.call_tool(f"{SOURCE}__browser_snapshot", {})
    text = content_text(result.content)
    assert not result.is_error, text
    return text


def shows_only(text: str, owner: str) -> bool:
    return f"Page of {owner}" in text and not any(f"Page of {o}" in text for o in OWNERS if o != owner)


async def test_each_client_sees_only_its_own_browser(wf: Wf, playwright_mcp_bin: Path, pages_url: str) -> None:
    config = sessions_config(wf, {SOURCE: playwright_source(wf, playwright_mcp_bin)})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    with anyio.fail_after(OP_TIMEOUT):
        async with (
            client_as(server, "alice", read_timeout_seconds=OP_TIMEOUT) as a1,
            client_as(server, "alice", read_timeout_seconds=OP_TIMEOUT) as a2,
            client_as(server, "bob", read_timeout_seconds=OP_TIMEOUT) as b,
        ):
            await wait_listed(a1, f"{SOURCE}__browser_navigate", timeout=OP_TIMEOUT / 2)
            clients = {"alice-one": a1, "alice-two": a2, "bob": b}
            for owner, c in clients.items():
                nav = await c.call_tool(f"{SOURCE}__browser_navigate", {"url": f"{pages_url}/{owner}"})
                assert not nav.is_error, content_text(nav.content)
            # Each snapshot shows its own page only, though every client
            # navigated after alice-one did.
            for owner, c in clients.items():
                text = await snapshot(c)
                assert shows_only(text, owner), f"{owner} saw:\n{text}"
            # A's page survives B's calls (bob navigates again meanwhile).
            again = await b.call_tool(f"{SOURCE}__browser_navigate", {"url": f"{pages_url}/bob"})
            assert not again.is_error
            assert shows_only(await snapshot(a1), "alice-one")
            everything = descendants_of(server.proc.pid)
    server.stop()
    left = wait_processes_gone(everything, timeout=30)
    assert left == [], f"processes outlived wf: {left}"
