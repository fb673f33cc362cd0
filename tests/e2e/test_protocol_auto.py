"""`protocol = "auto"` (the default of an `mcp` source): wf tries `server/discover`
and falls back to `initialize`, so a 2026-07-28 upstream is spoken to in its own
generation and whatever it serves only to 2026-07-28 clients appears through wf.

The Rust fixture upstream (`wf-fixture-upstream --asks`) lists `confirm` only to
2026-07-28 clients; it asks its question in an input-required round. Real
server-everything (2025-11-25 only) shows the fallback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from admin_support import sources_by_name
from caller_support import ANSWER_NAME, Answerer
from conftest import UpstreamEvents, Wf, all_tools, call_outcome, free_port, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
CONFIRM = "fix__confirm"


def fixture_http(wf: Wf, fixture_upstream_bin: Path, events: UpstreamEvents) -> str:
    port = free_port()
    argv = [str(fixture_upstream_bin), "--asks", *events.args(), "--http", f"127.0.0.1:{port}"]
    return wf.start_upstream_http("fixture-http", argv, port)


async def spoken(c: Any, source: str) -> dict[str, Any]:
    """The source's `protocol` row of list_sources, once a session opened."""
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            row = (await sources_by_name(c))[source]
            if row["protocol"] and row["protocol"]["spoken"]:
                return row["protocol"]
            await anyio.sleep(0.1)


@pytest.mark.parametrize("upstream", ["url", "stdio"])
async def test_a_2026_upstream_behind_auto_serves_its_2026_only_tools_with_their_rounds(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, upstream: str
) -> None:
    """No `protocol` key: wf discovers the 2026-07-28 fixture, lists `confirm`
    (which the fixture lists only to 2026-07-28 clients), and a 2026-07-28 client in
    `auto` mode calls it: the upstream's input-required round reaches the client's
    elicitation callback and the answer goes back upstream with its requestState."""
    if upstream == "url":
        settings: dict[str, Any] = {"url": fixture_http(wf, fixture_upstream_bin, upstream_events)}
    else:
        settings = {"command": str(fixture_upstream_bin), "args": ["--asks", *upstream_events.args()]}
    config = wf.write_config(toml_config({"fix": settings}))
    a = Answerer()
    # Over stdio: the admin tools (list_sources) are served there without a token.
    async with wf.stdio_client("auto", "--config", str(config), **a.callbacks()) as c:
        assert c.protocol_version == "2026-07-28", c.protocol_version
        await wait_listed(c, CONFIRM)
        with anyio.fail_after(OP_TIMEOUT):
            r, err = await call_outcome(c, CONFIRM, {})
        assert err is None, err
        assert r.structured_content["answer"]["content"]["name"] == ANSWER_NAME, r.structured_content
        assert r.structured_content["state"] == "fixture-state", r.structured_content
        assert [e.message for e in a.elicitations] == ["fixture asks your name"]
        assert await spoken(c, "fix") == {"setting": "auto", "spoken": "2026-07-28"}
    asked = [e for e in upstream_events.read() if e.get("event") == "asked"]
    assert len(asked) == 1 and asked[0]["round"] and asked[0]["ok"], asked


async def test_a_pinned_2025_protocol_hides_what_the_upstream_serves_only_to_2026_clients(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """The same upstream with `protocol = "2025-11-25"`: `confirm` is not listed (the
    fixture does not list it to a 2025-11-25 client), and the status says so."""
    settings = {"url": fixture_http(wf, fixture_upstream_bin, upstream_events), "protocol": "2025-11-25"}
    config = wf.write_config(toml_config({"fix": settings}))
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        await wait_listed(c, "fix__ask")
        assert CONFIRM not in {t.name for t in await all_tools(c)}
        assert await spoken(c, "fix") == {"setting": "2025-11-25", "spoken": "2025-11-25"}


async def test_auto_falls_back_to_initialize_for_a_2025_upstream(wf: Wf, everything_bin: Path) -> None:
    """server-everything knows no `server/discover`: `auto` falls back to `initialize`
    and its tools are served as before."""
    config = wf.write_config(toml_config({"everything": {"command": str(everything_bin)}}))
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        await wait_listed(c, "everything__echo")
        with anyio.fail_after(OP_TIMEOUT):
            r, err = await call_outcome(c, "everything__echo", {"message": "hi"})
        assert err is None, err
        assert "hi" in str(r.content), r
        assert await spoken(c, "everything") == {"setting": "auto", "spoken": "2025-11-25"}
