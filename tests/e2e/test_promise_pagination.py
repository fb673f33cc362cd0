"""`server.page_size` pages wf's tools, prompts, resources and resource
templates lists, for both protocol generations: every page but the last holds
exactly `page_size` items, the last at most that, cursors lead through every
item once, and the pages together are the whole list — the very list that one
page of a wf with a page size larger than the list shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from admin_support import source_tools, wait_tools
from conftest import Wf, toml_config
from promise_support import OP_TIMEOUT

pytestmark = pytest.mark.anyio

PAGE = 3
SLOW_START_MS = 120_000
KINDS = {
    "tools": ("list_tools", "tools"),
    "prompts": ("list_prompts", "prompts"),
    "resources": ("list_resources", "resources"),
    "templates": ("list_resource_templates", "resource_templates"),
}


def item_key(item: Any) -> str:
    """What identifies an item of a list: a template's URI template, a resource's URI, else the name."""
    for attr in ("uri_template", "uri"):
        if (v := getattr(item, attr, None)) is not None:
            return str(v)
    return str(item.name)


async def pages(c: Client, kind: str) -> list[list[str]]:
    """Every page of one list, following its cursors."""
    method, attr = KINDS[kind]
    out: list[list[str]] = []
    cursor: str | None = None
    while True:
        with anyio.fail_after(OP_TIMEOUT):
            page = await getattr(c, method)(cursor=cursor)
        out.append([item_key(i) for i in getattr(page, attr)])
        cursor = page.next_cursor
        if not cursor:
            return out
        assert len(out) < 200, f"{kind}: pagination did not end"


def config(wf: Wf, fixture_upstream_bin: Path, everything_bin: Path, page_size: int, name: str) -> Path:
    # server-everything (node) can take long to start on a loaded machine.
    ev = {"command": str(everything_bin), "connect_timeout_ms": SLOW_START_MS}
    sources = {"fx": {"command": str(fixture_upstream_bin)}, "ev": ev}
    server = {"page_size": page_size, "discovery_timeout_ms": SLOW_START_MS}
    return wf.write_config(toml_config(sources, server=server), name)


async def discovered(c: Client) -> None:
    """Waits until both upstreams' tools are listed (server-everything may start slowly)."""
    await wait_tools(
        c,
        lambda n: bool(source_tools(n, "fx")) and bool(source_tools(n, "ev")),
        "both upstreams discovered",
        SLOW_START_MS / 1000,
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_lists_are_paged_by_page_size_and_followed_to_the_end(
    wf: Wf, fixture_upstream_bin: Path, everything_bin: Path, mode: str
) -> None:
    whole: dict[str, list[str]] = {}
    big = config(wf, fixture_upstream_bin, everything_bin, 1000, "big.toml")
    async with wf.stdio_client(mode, "--config", str(big)) as c:
        await discovered(c)
        for kind in KINDS:
            one = await pages(c, kind)
            assert len(one) == 1, f"{kind}: a page size of 1000 still paged: {one}"
            whole[kind] = one[0]
    assert all(len(whole[k]) > PAGE for k in ("tools", "prompts", "resources")) and whole["templates"], whole

    paged = config(wf, fixture_upstream_bin, everything_bin, PAGE, "paged.toml")
    async with wf.stdio_client(mode, "--config", str(paged)) as c:
        await discovered(c)
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28"), c.protocol_version
        for kind in KINDS:
            got = await pages(c, kind)
            sizes = [len(p) for p in got]
            assert all(s == PAGE for s in sizes[:-1]) and 0 < sizes[-1] <= PAGE or sizes == [0], (kind, sizes)
            flat = [i for p in got for i in p]
            assert flat == whole[kind], f"{kind}: pages {got} != the whole list {whole[kind]}"
            assert len(got) == max(1, -(-len(flat) // PAGE)), (kind, sizes)
