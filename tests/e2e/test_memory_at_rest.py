"""Memory at rest: once its first discovery is done, `wf serve` unmaps the
start-up pages of its code and constants (docs/manual/commands.md) and goes
on serving from the pages it maps back; `WF_KEEP_CODE_PAGES=1` keeps them."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from conftest import HttpServer, Wf, content_text, tail, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 30
LOG = "info,wf_host::plugins::resident=debug"


async def wait_line(server: HttpServer, pattern: str) -> re.Match[str]:
    with anyio.move_on_after(OP_TIMEOUT):
        while True:
            m = re.search(pattern, server.log.read_text(errors="replace"))
            if m:
                return m
            await anyio.sleep(0.05)
    pytest.fail(f"no line matching {pattern!r} within {OP_TIMEOUT}s:\n{tail(server.log)}")


async def serve_and_call(wf: Wf, fixture_upstream_bin: Path, env: dict[str, str]) -> HttpServer:
    config = wf.write_config(toml_config({"fx": {"command": str(fixture_upstream_bin)}}))
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env={"WF_LOG": LOG, **env})
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await wait_listed(c, "fx__echo")
            # The release runs on its own thread beside these calls: each one
            # is answered whole, whenever its code was unmapped.
            for i in range(200):
                r = await c.call_tool("fx__echo", {"message": f"at rest {i}"})
                assert not r.is_error and f"at rest {i}" in content_text(r.content), content_text(r.content)
    return server


async def test_start_up_code_is_released_and_wf_keeps_serving(wf: Wf, fixture_upstream_bin: Path) -> None:
    server = await serve_and_call(wf, fixture_upstream_bin, {})
    m = await wait_line(server, r"start-up code pages released kib=(\d+)")
    assert int(m.group(1)) > 1024, f"only {m.group(1)} KiB released"
    assert "pages kept" not in server.log.read_text()
    # After the release: a new session and a call, from code mapped back.
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("fx__echo", {"message": "after the release"})
            assert not r.is_error and "after the release" in content_text(r.content)
    assert server.proc.poll() is None, tail(server.log)


async def test_wf_keep_code_pages_keeps_them(wf: Wf, fixture_upstream_bin: Path) -> None:
    server = await serve_and_call(wf, fixture_upstream_bin, {"WF_KEEP_CODE_PAGES": "1"})
    await wait_line(server, r"start-up code pages kept \(WF_KEEP_CODE_PAGES=1\)")
    assert "pages released" not in server.log.read_text()
    assert server.proc.poll() is None, tail(server.log)
