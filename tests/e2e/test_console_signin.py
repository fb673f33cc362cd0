"""Signing in to the web console (issue #37), as a newcomer meets it: a fresh
`wf serve --http` with the default config prints one sign-in link on stderr;
opening it in headless Debian chromium sets an HttpOnly, SameSite=Strict
cookie and lands on the bare console, whose Sources table fills by itself;
the read-only session sees every view, and its actions are shown disabled
with the reason. Without the cookie, or with a used or made-up link, the page
says in one paragraph how to get in (no red error, no "Loading…" left). With
`[admin] console = "actions"` the page acts, but a cross-origin form post
carrying the cookie (from a real page on another port of 127.0.0.1: same-site,
so SameSite=Strict lets the cookie go) is refused, as are raw HTTP posts
without the console's own Origin. A link's expiry is covered by the unit
tests of host/src/server/console/logins.rs (10 minutes is too long here).
Screenshots go to target/console-screenshots/."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from conftest import Wf, free_port
from console_support import (
    BEARER,
    UI_TIMEOUT_MS,
    Console,
    assert_no_error_or_spinner,
    browser,
    login_link,
    screenshot,
    start_console,
    start_plain_console,
)

pytestmark = pytest.mark.anyio

# The printed link opens the console and the Sources table fills by itself
# (no reload, no user action): a generous bound, not a figure (a busy 2-core
# CI machine runs chromium beside wf); docs/benchmarks.md has the figures.
SOURCES_WITHIN_S = 30.0


async def new_context(b: Any, width: int = 1280) -> Any:
    return await b.new_context(viewport={"width": width, "height": 900})


async def new_page(context: Any) -> Any:
    page = await context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    return page


async def session_cookie(context: Any, console: Console) -> dict[str, Any]:
    cookies = [c for c in await context.cookies() if c["name"] == f"wf_console_{console.server.port}"]
    assert len(cookies) == 1, await context.cookies()
    return cookies[0]


async def last_reload(console: Console, cookie: str) -> Any:
    async with httpx2.AsyncClient(base_url=console.server.base_url, timeout=30) as http:
        r = await http.get("/console/api/status", headers={"Cookie": cookie, "Connection": "close"})
    assert r.status_code == 200, r.text
    return r.json()["last_reload"]


def raw_post(port: int, path: str, headers: dict[str, str], body: str = "x=1") -> tuple[int, str]:
    """One HTTP/1.1 request written by hand on a socket: what any local
    process or a browser's form post can send. Answers status and body."""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}"
        f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n\r\n{body}"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request.encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    text = data.decode(errors="replace")
    status = int(text.split(" ", 2)[1])
    return status, text.split("\r\n\r\n", 1)[-1]


@contextlib.contextmanager
def other_origin_page(html: str) -> Iterator[str]:
    """A page served from another port of 127.0.0.1 (another local web app,
    or whatever a rebinding or local process serves): its URL."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


async def test_the_printed_link_opens_the_console_and_the_sources_fill(wf: Wf) -> None:
    # The most verbose logging there is: the token must still show only once.
    console = start_plain_console(wf, env={"WF_LOG": "trace", "WF_LOG_PAYLOADS": "true"})
    link, token = login_link(console)
    # A HEAD (a link checker) does not spend the link.
    async with httpx2.AsyncClient(timeout=30) as http:
        r = await http.head(link, headers={"Connection": "close"})
    assert r.status_code == 200 and "set-cookie" not in r.headers, r.headers
    async with browser() as b:
        context = await new_context(b, 1280)
        page = await new_page(context)
        await page.goto(link)
        # The table fills from the one page load: no navigation in between.
        navigations: list[str] = []
        page.on("framenavigated", lambda frame: navigations.append(frame.url))
        row = page.locator('tr[data-source="wf.std"]')
        await row.wait_for(timeout=SOURCES_WITHIN_S * 1000)
        assert "ready" in await row.inner_text()
        assert navigations == [], f"the page navigated before the table filled: {navigations}"
        # The redirect took the token out of the address bar.
        assert page.url == console.url, page.url
        assert token not in await page.evaluate("location.href + document.referrer")
        await assert_no_error_or_spinner(page)
        assert await page.locator("#who").inner_text() == "Signed in (read-only)"
        cookie = await session_cookie(context, console)
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict", cookie
        assert cookie["path"] == "/console" and not cookie["secure"], cookie
        assert cookie["value"] != token
        # Read-only by default: the actions are there, disabled, with the
        # reason on hover (title) and on focus (the note they point to).
        for button in ["#refresh-all", "#reload", 'button[aria-label="Refresh wf.std"]']:
            b_ = page.locator(button)
            assert await b_.get_attribute("aria-disabled") == "true", button
            assert '[admin] console = "actions"' in (await b_.get_attribute("title") or ""), button
            assert await b_.get_attribute("aria-describedby") == "actions-why", button
        await page.focus("#reload")
        assert await page.evaluate("document.activeElement.id") == "reload"
        note = page.locator("#actions-why")
        assert await note.is_visible()
        assert '[admin] console = "actions"' in await note.inner_text()
        await screenshot(page, "signed-in-read-only", 1280)
        # Pressing a disabled action says why and does nothing.
        await page.keyboard.press("Enter")
        assert "read-only" in await page.locator("#status").inner_text()
        assert await last_reload(console, f"{cookie['name']}={cookie['value']}") is None

        # Every view works for this read-only session (the cookie is the
        # browser's, so another tab of it is signed in too).
        narrow = await new_page(context)
        await narrow.set_viewport_size({"width": 390, "height": 900})
        await narrow.goto(console.url)
        await narrow.locator('tr[data-source="wf.std"]').wait_for()
        await screenshot(narrow, "signed-in-read-only", 390)
        await narrow.goto(f"{console.url}#/plugins")
        await narrow.locator('tr[data-plugin="wf-source-std"]').wait_for()
        await assert_no_error_or_spinner(narrow)
        await narrow.goto(f"{console.url}#/capabilities")
        await narrow.locator('details[data-capability="wf_std__template"]').wait_for()
        await assert_no_error_or_spinner(narrow)
        await narrow.goto(f"{console.url}#/runs")
        await narrow.locator("text=No runs match.").wait_for()
        await assert_no_error_or_spinner(narrow)
        await context.close()
    # The token was printed once and is nowhere else in wf's output, even
    # at trace level with payload logging on.
    log = console.server.log.read_text()
    assert log.count(token) == 1, log
    assert "a browser signed in with the login link" in log, log


async def test_without_the_cookie_the_page_says_how_to_get_in(wf: Wf) -> None:
    console = start_plain_console(wf)
    link, token = login_link(console)
    async with browser() as b:
        for width in (1280, 390):
            context = await new_context(b, width)
            page = await new_page(context)
            await page.goto(console.url)
            how = page.locator("#signin-how")
            await how.wait_for()
            text = await how.inner_text()
            assert "not signed in" in text and "wf console: open" in text and "works once" in text, text
            await assert_no_error_or_spinner(page)
            assert await page.locator('tr[data-source], button:has-text("Reload config")').count() == 0
            # No token is configured: no token form to offer.
            assert not await page.locator("#tokens").is_visible()
            await screenshot(page, "signin", width)
            # Every tab says the same.
            await page.goto(f"{console.url}#/runs")
            await page.locator("#signin-how").wait_for()
            await assert_no_error_or_spinner(page)
            await context.close()

        # The link signs in one browser; opened again it is refused, and the
        # page says why and how to get in.
        first = await new_context(b)
        page = await new_page(first)
        await page.goto(link)
        await page.locator('tr[data-source="wf.std"]').wait_for()
        await first.close()
        again = await new_context(b)
        page = await new_page(again)
        await page.goto(link)
        how = page.locator("#signin-how")
        await how.wait_for()
        text = await how.inner_text()
        assert "already used" in text and "wf console: open" in text, text
        assert token not in page.url and "login=" not in page.url, page.url
        await assert_no_error_or_spinner(page)
        assert await page.locator("tr[data-source]").count() == 0
        assert [c for c in await again.cookies() if c["name"].startswith("wf_console")] == []
        await screenshot(page, "signin-used", 1280)
        # A link wf never printed.
        await page.goto(link.replace(token, "0" * len(token)))
        await page.locator("#signin-how:has-text('not one this wf printed')").wait_for()
        await assert_no_error_or_spinner(page)
        await again.close()

    async with httpx2.AsyncClient(base_url=console.server.base_url, timeout=30, headers={"Connection": "close"}) as http:
        # The API refuses, saying how to get in; a made-up cookie is no session.
        for cookie in [None, f"wf_console_{console.server.port}={'a' * 64}"]:
            r = await http.get("/console/api/sources", headers={"Cookie": cookie} if cookie else {})
            assert r.status_code == 401, r.text
            assert "wf.std" not in r.text and "sign-in link" in r.json()["hint"], r.text
        # The link is spent for raw requests too.
        r = await http.get(f"/console/login?token={token}")
        assert r.status_code == 303 and r.headers["location"] == "/console/?login=used", r.headers
        assert "set-cookie" not in r.headers


async def test_with_console_off_no_link_is_printed_and_the_page_names_the_setting(wf: Wf) -> None:
    console = start_plain_console(wf, '[admin]\nconsole = "off"\n')
    async with httpx2.AsyncClient(base_url=console.server.base_url, timeout=30, headers={"Connection": "close"}) as http:
        # Answered only once wf serves, which is after it would print the link.
        access = (await http.get("/console/api/access")).json()
    assert access["signed_in"] is False and '[admin] console = "off"' in access["how"], access
    assert "wf console:" not in console.server.log.read_text()
    async with browser() as b:
        context = await new_context(b)
        page = await new_page(context)
        await page.goto(console.url)
        await page.locator("#signin-how:has-text('[admin] console = \"read\"')").wait_for()
        await assert_no_error_or_spinner(page)
        await context.close()


async def test_a_cross_origin_post_to_an_action_is_refused(wf: Wf) -> None:
    console = start_plain_console(wf, '[admin]\nconsole = "actions"\n')
    link, _ = login_link(console)
    port = console.server.port
    reload_url = f"{console.server.base_url}/console/api/reload"
    async with browser() as b:
        context = await new_context(b)
        page = await new_page(context)
        await page.goto(link)
        await page.locator('tr[data-source="wf.std"]').wait_for()
        assert await page.locator("#reload").get_attribute("aria-disabled") is None
        assert await page.locator("#actions-why").count() == 0
        cookie = await session_cookie(context, console)
        jar = f"{cookie['name']}={cookie['value']}"

        # A page of another origin on this machine posts a form to the
        # action, in the browser that holds the cookie. Another port of
        # 127.0.0.1 is same-site: SameSite=Strict lets the cookie go, so
        # only wf's own check stands in the way.
        form = (
            f'<form method="POST" action="{reload_url}" enctype="text/plain">'
            '<input name="x" value="1"></form><script>document.forms[0].submit()</script>'
        )
        with other_origin_page(form) as evil:
            attacker = await new_page(context)
            await attacker.goto(evil)
            await attacker.wait_for_url(reload_url)
            answer = await attacker.locator("body").inner_text()
        # Refused as cross-origin: it came with the session (without the
        # cookie the answer would be "not signed in").
        assert "cross-origin console request refused" in answer, answer
        assert await last_reload(console, jar) is None

        # The same by hand: a form post with the cookie but another origin,
        # or no origin at all, is refused; nothing is reloaded.
        for headers in [
            {"Cookie": jar, "Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"},
            {"Cookie": jar, "Origin": "http://localhost:" + str(port)},
            {"Cookie": jar},
            {"Cookie": jar, "Origin": "http://evil.example"},
        ]:
            status, body = raw_post(port, "/console/api/reload", headers)
            assert status == 403, (headers, status, body)
        for path in ["/console/api/sources/refresh", "/console/api/runs/run_x/cancel"]:
            status, body = raw_post(port, path, {"Cookie": jar, "Origin": "http://127.0.0.1:1"})
            assert status == 403 and "cross-origin" in body, (path, status, body)
        assert await last_reload(console, jar) is None

        # From the console's own page the same action works.
        await page.focus("#reload")
        await page.keyboard.press("Enter")
        await page.locator("#status:has-text('Config reloaded')").wait_for()
        assert await last_reload(console, jar) is not None
        await screenshot(page, "signed-in-actions", 1280)
        await context.close()
    assert "cross-origin console request refused" in console.server.log.read_text()


async def test_a_bearer_token_alone_sees_runs_and_is_told_why_not_sources(wf: Wf) -> None:
    """Views need what listing them needs: with a bearer token but not the
    admin token, Runs and Capabilities show; Sources says why it does not,
    with no "Loading…" left, and its actions are disabled with the reason."""
    console = start_console(wf)
    async with browser() as b:
        context = await new_context(b)
        await context.add_init_script(f"sessionStorage.setItem('wf.bearer', {BEARER!r});")
        page = await new_page(context)
        await page.goto(f"{console.url}#/runs")
        await page.locator("text=No runs match.").wait_for()
        assert await page.locator("#who").inner_text() == "Signed in as default"
        await page.goto(f"{console.url}#/capabilities")
        await page.locator('details[data-capability="wf_std__template"]').wait_for()
        await page.goto(f"{console.url}#/sources")
        refused = page.locator("p[data-refused]")
        await refused.wait_for()
        assert "admin token" in await refused.inner_text(), await refused.inner_text()
        assert "Loading…" not in await page.locator("main").inner_text()
        assert await page.locator("#status.error").count() == 0
        reload = page.locator("#reload")
        assert await reload.get_attribute("aria-disabled") == "true"
        assert "admin token" in (await reload.get_attribute("title") or "")
        await screenshot(page, "bearer-only-sources", 1280)
        await context.close()
