"""What the web console tests (test_console*.py) share: a `wf serve --http` with
a bearer token and an admin token (or with no token at all, signed in with the
link it prints), an MCP client carrying both, and headless Debian chromium
driven by the Python `playwright` package (never a downloaded browser), with
screenshots saved as CI artifacts."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from admin_support import ADMIN_TOKEN_HEADER, http_client_with_headers
from conftest import REPO, HttpServer, Wf
from playwright_support import CHROMIUM

BEARER = "console-bearer-0123456789abcdef"
ADMIN = "console-admin-0123456789abcdef"
ADMIN_ENV = "WF_E2E_CONSOLE_ADMIN"
SCREENSHOTS = REPO / "target" / "console-screenshots"
WIDTHS = (1280, 390)
# A page update, an API answer: generous for a slow CI machine.
UI_TIMEOUT_MS = 30_000


@dataclass
class Console:
    wf: Wf
    server: HttpServer

    @property
    def url(self) -> str:
        return f"{self.server.base_url}/console/"

    def auth(self, bearer: bool = True, admin: bool = True) -> dict[str, str]:
        h = {}
        if bearer:
            h["Authorization"] = f"Bearer {BEARER}"
        if admin:
            h[ADMIN_TOKEN_HEADER] = ADMIN
        return h

    @contextlib.asynccontextmanager
    async def mcp(self) -> AsyncIterator[Client]:
        async with http_client_with_headers(self.server.url, self.auth()) as c:
            yield c


def start_console(wf: Wf, extra_config: str = "", env: dict[str, str] | None = None) -> Console:
    """`wf serve --http` on loopback with a bearer token and `[admin] token`."""
    config = wf.write_config(f'[admin]\ntoken = "${{{ADMIN_ENV}}}"\n{extra_config}')
    server = wf.start_http(
        "127.0.0.1",
        None,
        "--config",
        str(config),
        env={ADMIN_ENV: ADMIN, "WF_HTTP_TOKEN": BEARER, **(env or {})},
    )
    return Console(wf=wf, server=server)


def start_plain_console(wf: Wf, config: str = "", env: dict[str, str] | None = None) -> Console:
    """`wf serve --http` on loopback as a newcomer starts it: no token, the
    default `[admin]` (plus `config`)."""
    path = wf.write_config(config)
    return Console(wf=wf, server=wf.start_http("127.0.0.1", None, "--config", str(path), env=env))


LINK_LINE = re.compile(r"^wf console: open (http://\S+/console/login\?token=([0-9a-f]+)) ", re.M)


def login_link(console: Console, timeout: float = 30.0) -> tuple[str, str]:
    """The sign-in link `wf serve --http` printed on stderr, and its token."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = LINK_LINE.search(console.server.log.read_text(errors="replace"))
        if m:
            return m.group(1), m.group(2)
        time.sleep(0.05)
    pytest.fail(f"no sign-in link on wf's stderr within {timeout}s:\n{console.server.log.read_text()}")


async def assert_no_error_or_spinner(page: Any) -> None:
    """Nothing red, nothing still loading."""
    assert await page.locator("#status.error").count() == 0, await page.locator("#status").inner_text()
    assert await page.locator(".err[role=alert]").count() == 0
    assert "Loading…" not in await page.locator("body").inner_text()


@contextlib.asynccontextmanager
async def browser() -> AsyncIterator[Any]:
    """Headless Debian chromium. PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD keeps the
    package from ever fetching a browser of its own."""
    os.environ["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.fail("the `playwright` pip package is missing: tests/run installs tests/e2e/requirements.txt")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: tests/run installs Debian's chromium (apt-get install -y chromium)")
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            await b.close()


async def new_page(b: Any, width: int, tokens: Console | None = None) -> Any:
    """A page `width` px wide; with `tokens`, the console's tokens are already
    in its sessionStorage (as after the token form)."""
    context = await b.new_context(viewport={"width": width, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    if tokens is not None:
        await context.add_init_script(
            f"sessionStorage.setItem('wf.bearer', {BEARER!r}); sessionStorage.setItem('wf.admin', {ADMIN!r});"
        )
    return page


async def screenshot(page: Any, name: str, width: int) -> Path:
    """Saves a full-page screenshot (a CI artifact) and checks the page does
    not scroll sideways at this width (its wide tables scroll inside their box)
    and that its text is readable (contrast)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}-{width}.png"
    await page.screenshot(path=str(path), full_page=True)
    await check_contrast(page, f"{name} at {width} px")
    overflow = await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{name} at {width} px scrolls sideways by {overflow} px"
    return path


# The WCAG contrast ratio of every element that shows text, against the first
# opaque background behind it; answers the ones below 4.5:1.
LOW_CONTRAST_JS = """
() => {
  const rgb = (s) => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const el of document.querySelectorAll("body *:not(svg):not(svg *)")) {
    const text = [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent.trim()).join("");
    if (!text || el.offsetParent === null) continue;
    const fg = lum(rgb(getComputedStyle(el).color)), bg = lum(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    if (ratio < 4.5) low.push(`${el.tagName.toLowerCase()} "${text.slice(0, 30)}": ${ratio.toFixed(2)}`);
  }
  return low;
}
"""


async def check_contrast(page: Any, name: str) -> None:
    low = await page.evaluate(LOW_CONTRAST_JS)
    assert not low, f"{name}: text below 4.5:1 contrast: {low}"


async def wait_sources_ready(console: Console, timeout: float = 30.0) -> None:
    """Waits until every source finished its first discovery (wf listens
    before that ends), so a page shows each one's settled state."""
    rows: list[Any] = []
    with anyio.move_on_after(timeout):
        async with httpx2.AsyncClient(base_url=console.server.base_url, timeout=10) as http:
            while True:
                r = await http.get("/console/api/sources", headers={**console.auth(), "Connection": "close"})
                rows = r.json()["sources"] if r.status_code == 200 else []
                if rows and all(s["state"] == "ready" for s in rows):
                    return
                await anyio.sleep(0.05)
    pytest.fail(f"sources not ready within {timeout}s: {rows}")
