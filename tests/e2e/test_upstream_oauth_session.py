"""Upstream OAuth while `wf serve` runs: a token refused mid-session (refresh
rejected) turns the source `needs_login` until the next `wf auth login`; a
short-lived token is refreshed before it expires and the stored tokens survive a
restart; a 403 `insufficient_scope` fails the call once, without a retry loop,
and the next login asks for the larger scope. The upstream is oauth_upstream.py
(the official `mcp` server behind a small authorization server whose tokens the
test expires and revokes). No token may appear in anything wf writes."""

from __future__ import annotations

import anyio
import pytest

from admin_support import admin, sources_by_name
from conftest import Wf, call_outcome, content_text, wait_listed
from oauth_support import MOCK_TOKEN_PREFIX, OAuthUpstream, auth_status_rows, files_containing, login, oauth_source_config

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60


async def call_ok(c, tool: str, arguments: dict | None = None) -> str:  # type: ignore[no-untyped-def]
    with anyio.fail_after(OP_TIMEOUT):
        result, error = await call_outcome(c, tool, arguments)
    assert error is None, error
    return content_text(result.content)


async def calls_across_token_lifetimes(wf: Wf, config, expires_in: int) -> None:  # type: ignore[no-untyped-def]
    """`wf serve --http`, calls every 0.5 s across 2.5 lifetimes of a token, each of which must succeed."""
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server) as c:
        await wait_listed(c, "secure__whoami")
        # The bound is the behaviour: calls span two refreshes.
        with anyio.fail_after(OP_TIMEOUT + 3 * expires_in):
            start = anyio.current_time()
            while anyio.current_time() - start < 2.5 * expires_in:
                assert await call_ok(c, "secure__whoami") == "ok"
                await anyio.sleep(0.5)
    server.stop()


def assert_no_token_written(wf: Wf) -> None:
    # Everything wf wrote: state dir (tokens, notes, database), logs, outputs.
    leaked = files_containing(wf.root, MOCK_TOKEN_PREFIX)
    assert leaked == [], f"a token shows in {leaked}"


async def test_a_refused_refresh_makes_the_source_need_a_login_and_a_new_login_cures_it(wf: Wf) -> None:
    upstream = OAuthUpstream(wf)
    config = oauth_source_config(wf, upstream.url)
    login(wf, config, "secure")
    # Over stdio: the admin tools (list_sources, refresh_catalog) are served there.
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        await wait_listed(c, "secure__whoami")
        assert await call_ok(c, "secure__whoami") == "ok"

        upstream.revoke_all()
        with anyio.fail_after(OP_TIMEOUT):
            _, error = await call_outcome(c, "secure__whoami")
        assert error is not None and "needs_login" in error and "wf auth login secure" in error, error
        # One refresh was tried and rejected; no more.
        assert len(upstream.events(event="token", grant="refresh_token", ok=False)) == 1

        row = (await sources_by_name(c))["secure"]
        assert row["state"] == "needs_login", row
        assert "wf auth login secure" in row["error"], row
        # Other sources keep serving.
        assert "41" in await call_ok(c, "wf_std__const", {"value": 41})
        status = auth_status_rows(wf, config)["secure"]
        assert status["state"] == "needs_login" and status["command"] == "wf auth login secure", status

        # Calls keep failing clearly (one refresh attempt each, no loop) until a login.
        with anyio.fail_after(OP_TIMEOUT):
            _, error = await call_outcome(c, "secure__whoami")
        assert error is not None and "wf auth login secure" in error, error

        login(wf, config, "secure")
        assert auth_status_rows(wf, config)["secure"]["state"] == "logged_in"
        await admin(c, "refresh_catalog", {"source": "secure"})
        assert (await sources_by_name(c))["secure"]["state"] == "ready"
        assert await call_ok(c, "secure__whoami") == "ok"
    assert_no_token_written(wf)


async def test_a_short_lived_token_is_refreshed_before_expiry_and_kept_across_a_restart(wf: Wf) -> None:
    expires_in = 6
    upstream = OAuthUpstream(wf, expires_in=expires_in)
    config = oauth_source_config(wf, upstream.url)
    login(wf, config, "secure")
    await calls_across_token_lifetimes(wf, config, expires_in)
    calls = upstream.events(event="mcp", rpc="tools/call")
    assert calls and all(e["status"] == 200 for e in calls), calls
    # The upstream saw newer tokens, got by refresh before expiry: no request with a token was refused.
    assert len({e["serial"] for e in calls}) >= 2, calls
    assert upstream.events(event="token", grant="refresh_token", ok=True)
    assert [e for e in upstream.events(event="mcp") if e["serial"] is not None and e["status"] != 200] == []

    # A restart uses the stored tokens: no new authorization.
    authorizations = len(upstream.events(event="authorize"))
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server) as c:
        await wait_listed(c, "secure__whoami")
        assert await call_ok(c, "secure__whoami") == "ok"
    server.stop()
    assert len(upstream.events(event="authorize")) == authorizations
    assert_no_token_written(wf)


async def test_a_confidential_client_refreshes_with_its_secret_while_serving(wf: Wf) -> None:
    # rmcp restores only the client id from the store; without the secret the
    # server refuses the refresh and the source would fall to needs_login.
    expires_in = 6
    client = ("wf-preregistered", "s3cret-for-the-oauth-test")
    upstream = OAuthUpstream(wf, expires_in=expires_in, client=client)
    config = oauth_source_config(wf, upstream.url, client_id=client[0], client_secret=client[1])
    login(wf, config, "secure")
    assert upstream.events(event="token", grant="authorization_code", ok=True)
    await calls_across_token_lifetimes(wf, config, expires_in)
    assert upstream.events(event="token", grant="refresh_token", ok=True)
    assert upstream.events(client_auth=False) == [], upstream.events(client_auth=False)
    assert len(upstream.events(event="register")) == 0  # the pre-registered client was used
    assert_no_token_written(wf)


async def test_a_step_up_fails_the_call_once_and_the_next_login_asks_for_the_union(wf: Wf) -> None:
    upstream = OAuthUpstream(wf)
    config = oauth_source_config(wf, upstream.url)
    login(wf, config, "secure")
    [first] = upstream.events(event="authorize")
    assert "admin" not in (first["scope"] or ""), first
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        await wait_listed(c, "secure__admin_only")
        for attempt in (1, 2):
            with anyio.fail_after(OP_TIMEOUT):
                _, error = await call_outcome(c, "secure__admin_only")
            assert error is not None, "a call without the scope succeeded"
            assert "insufficient_scope" in error and 'scope "mcp admin"' in error, error
            assert "wf auth login secure" in error, error
            # Each call reaches the upstream once: no retry loop.
            assert len(upstream.events(event="mcp", tool="admin_only", status=403)) == attempt
        # The source itself still serves what its token allows.
        assert await call_ok(c, "secure__whoami") == "ok"
        assert (await sources_by_name(c))["secure"]["state"] == "ready"
        status = auth_status_rows(wf, config)["secure"]
        assert "admin" in status["step_up_scopes"] and status["command"] == "wf auth login secure", status

        login(wf, config, "secure")
        second = upstream.events(event="authorize")[-1]
        assert set(second["scope"].split()) >= {"mcp", "admin"}, second
        assert "step_up_scopes" not in auth_status_rows(wf, config)["secure"]
        assert await call_ok(c, "secure__admin_only") == "admin ok"
    assert_no_token_written(wf)
