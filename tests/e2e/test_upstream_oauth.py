"""Upstream OAuth end to end: an `mcp` url source behind the conformance
suite's mock authorization server, `wf auth login` driven headlessly (the test
plays the browser), then the source's tools through `wf serve` with the
official Python client. No token may appear in anything wf writes."""

from __future__ import annotations

import json
import stat

import anyio
import pytest

from admin_support import sources_by_name
from conftest import Wf, call_outcome, content_text, toml_config, wait_listed
from oauth_support import TOKEN_PREFIX, files_containing, login, start_mock

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60


def oauth_config(wf: Wf, url: str) -> object:
    return wf.write_config(toml_config({"secure": {"url": url, "auth": {"oauth": {}}}}))


def auth_status(wf: Wf, config: object) -> list[dict]:
    out = wf.run("auth", "status", "--json", "--config", str(config), "--state-dir", str(wf.state_dir))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


async def test_a_source_that_needs_login_says_so_and_blocks_nothing(wf: Wf) -> None:
    config = oauth_config(wf, start_mock(wf))
    [row] = auth_status(wf, config)
    assert row["source"] == "secure" and row["state"] == "needs_login"
    assert row["command"] == "wf auth login secure"
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        # Other sources are served while this one waits for a login.
        await wait_listed(c, "wf_std__const")
        with anyio.fail_after(OP_TIMEOUT):
            while (row := (await sources_by_name(c))["secure"])["state"] == "pending":
                await anyio.sleep(0.1)
        assert row["state"] == "needs_login", row
        assert "wf auth login secure" in row["error"], row


async def test_login_then_its_tools_work_through_wf_serve_and_no_token_is_written(wf: Wf) -> None:
    config = oauth_config(wf, start_mock(wf))
    printed = login(wf, config, "secure")
    assert "logged in to secure" in printed

    [row] = auth_status(wf, config)
    assert row["state"] == "logged_in" and row["expires_at"], row
    token_file = wf.state_dir / "sources" / "secure" / "oauth-tokens"
    for f in (token_file, token_file.with_name("oauth.key")):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f

    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server) as c:
        await wait_listed(c, "secure__test-tool")
        with anyio.fail_after(OP_TIMEOUT):
            result, error = await call_outcome(c, "secure__test-tool")
        assert error is None, error
        assert content_text(result.content) == "test"
    server.stop()

    # Everything wf wrote: state dir (tokens, database, snapshots), logs, outputs.
    leaked = files_containing(wf.root, TOKEN_PREFIX)
    assert leaked == [], f"an access token shows in {leaked}"


async def test_a_token_file_others_can_read_is_refused(wf: Wf) -> None:
    config = oauth_config(wf, start_mock(wf))
    login(wf, config, "secure")
    token_file = wf.state_dir / "sources" / "secure" / "oauth-tokens"
    token_file.chmod(0o644)
    out = wf.run("auth", "login", "secure", "--no-browser", "--config", str(config),
                 "--state-dir", str(wf.state_dir), timeout=30)
    assert out.returncode == 1
    assert "mode 644" in out.stderr and "chmod 600" in out.stderr, out.stderr
