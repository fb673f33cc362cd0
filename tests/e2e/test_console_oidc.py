"""The console signs in through the identity provider (issue #50): a real
`oidc-provider` (pinned, npm; users alice in `eng` and bob in `ops`) with the
console's confidential client registered, `wf serve --http` with
`[server.oauth.console]`, and headless Debian chromium driven by the Python
`playwright` package through the whole flow as a person meets it: the console
offers "Sign in with <issuer>", the provider's own login page asks who (its
consent is granted by the test provider at once), and the browser lands back
on the console signed in as alice, whose Capabilities show her group's tool
and not bob's, and whose Sources view (a tool her group lacks) says it is not
available. Bob, in another browser context, sees the reverse. A callback no
browser started is refused, and no token or secret reaches wf's log."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from conftest import Wf, free_port
from console_support import UI_TIMEOUT_MS, browser, screenshot
from oauth_rs_support import IdP

pytestmark = pytest.mark.anyio

CLIENT_ID = "wf-console"
CLIENT_SECRET = "console-oidc-secret-0123456789abcdef"
SECRET_ENV = "WF_E2E_CONSOLE_OIDC_SECRET"


def config(issuer: str, resource: str) -> str:
    return f"""\
[server.oauth]
issuer = "{issuer}"
resource = "{resource}"
scopes = ["mcp"]
principal_claim = "email"

[server.oauth.console]
client_id = "{CLIENT_ID}"
client_secret = "${{{SECRET_ENV}}}"
scopes = ["email", "groups"]

[[server.oauth.groups]]
name = "eng"
allow_tools = ["wf_std__const", "wf_planner__list_capabilities"]

[[server.oauth.groups]]
name = "ops"
allow_tools = ["wf_std__sleep", "wf_planner__list_capabilities"]
"""


async def sign_in(b: Any, console_url: str, issuer: str, user: str) -> tuple[Any, Any]:
    """A fresh browser context through console -> provider -> console."""
    context = await b.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    await page.goto(console_url)
    link = page.locator("#signin-oidc")
    await link.wait_for()
    assert await link.inner_text() == f"Sign in with {issuer}"
    await link.click()
    # The provider's own login page (its interaction), on its own origin.
    await page.wait_for_url(f"{issuer}/interaction/**")
    await page.locator("input[name=login]").fill(user)
    await page.locator("button[type=submit]").click()
    await page.wait_for_url(f"{console_url}**")
    await page.locator("#who").filter(has_text=f"Signed in as {user}@example.com").wait_for()
    return context, page


async def capabilities(page: Any, console_url: str) -> set[str]:
    await page.goto(f"{console_url}#/capabilities")
    await page.locator("#cap-count").filter(has_text="found").wait_for()
    return set(await page.locator("#cap-list details").evaluate_all("ds => ds.map(d => d.dataset.capability)"))


async def test_the_console_signs_in_through_the_identity_provider(wf: Wf) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    resource = f"{base}/mcp"
    redirect = f"{base}/console/oidc/callback"
    idp = IdP(
        wf.new_log("oidc-provider"),
        resource,
        {"alice": ["eng"], "bob": ["ops"]},
        clients=[f"{CLIENT_ID}:{CLIENT_SECRET}@{redirect}"],
    )
    try:
        cfg = wf.write_config(config(idp.issuer, resource))
        proc = wf.run("check", "--config", str(cfg), *wf.plugin_args(), env={SECRET_ENV: CLIENT_SECRET})
        assert proc.returncode == 0, proc.stderr
        server = wf.start_http("127.0.0.1", port, "--config", str(cfg), env={SECRET_ENV: CLIENT_SECRET})
        console_url = f"{base}/console/"

        # A callback no browser started goes back to the page, refused.
        with httpx2.Client(timeout=30, trust_env=False) as http:
            r = http.get(f"{base}/console/oidc/callback", params={"code": "made-up", "state": "0" * 64})
            assert r.status_code == 303 and r.headers["location"] == "/console/?login=stale", (r.status_code, r.headers)
            assert http.get(f"{base}/console/api/access").json()["oidc"] == {
                "issuer": idp.issuer,
                "start": "/console/oidc/start",
            }

        async with browser() as b:
            context, page = await sign_in(b, console_url, idp.issuer, "alice")
            cookies = {c["name"]: c for c in await context.cookies()}
            session = cookies[f"wf_console_{port}"]
            assert session["httpOnly"] and session["sameSite"] == "Strict", session
            assert f"wf_console_{port}_oidc" not in cookies, "the binding cookie is cleared"
            access = await page.evaluate("fetch('/console/api/access').then(r => r.json())")
            assert access["signed_in"] and access["via"] == "oidc", access
            assert access["principal"] == "alice@example.com", access
            assert access["views"]["capabilities"] is None, access
            assert access["views"]["sources"], "alice's group has no wf_admin__list_sources"
            seen = await capabilities(page, console_url)
            assert "wf_std__const" in seen and "wf_std__sleep" not in seen, seen
            await screenshot(page, "oidc-alice-capabilities", 1280)
            await page.goto(f"{console_url}#/sources")
            await page.locator("[data-refused]").filter(has_text="not available to you").wait_for()
            await context.close()

            context, page = await sign_in(b, console_url, idp.issuer, "bob")
            seen = await capabilities(page, console_url)
            assert "wf_std__sleep" in seen and "wf_std__const" not in seen, seen
            await context.close()

            # A browser that did not start the sign-in cannot finish it: the
            # provider's redirect is replayed in a context without the
            # binding cookie.
            context = await b.new_context()
            page = await context.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            start = await page.request.get(f"{base}/console/oidc/start", max_redirects=0)
            assert start.status == 303, start.status
            location = start.headers["location"]
            assert location.startswith(f"{idp.issuer}/auth?"), location
            for part in ("code_challenge_method=S256", "state=", "nonce=", f"client_id={CLIENT_ID}"):
                assert part in location, location
            await context.clear_cookies()
            state = httpx2.URL(location).params["state"]
            await page.goto(f"{base}/console/oidc/callback?code=x&state={state}")
            await page.locator("#signin-how").filter(has_text="not started in this browser").wait_for()
            await context.close()

        log = server.log.read_text(errors="replace")
        assert "signed in at the identity provider" in log, log[-3000:]
        assert CLIENT_SECRET not in log
        assert "eyJ" not in log, "a JWT reached the log"
    finally:
        idp.stop()
