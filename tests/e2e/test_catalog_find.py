"""wf_find's answers (issue 56), end to end with the official Python client
against the real `wf serve` in `search` mode, over server-everything and
wf.std:

- a task in a user's words that shares no word with the tool's name
  ("repeat back what I say" for `echo`) finds it first, through the
  ranker's synonyms; each match carries its name, one-line purpose, source,
  signature (its key parameters) and a confidence between 0 and 1;
- wf's own tools (wf.std) rank after the upstream's unless asked for;
- a task nothing matches well is answered as such (`good_match: false`),
  with one line per source the caller may use, so the model can narrow by
  `source` instead of searching again blindly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import Wf, content_text, toml_config

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60


async def find(c: Client, query: str, **extra: Any) -> dict[str, Any]:
    r = await c.call_tool("wf_find", {"query": query, **extra})
    assert not r.is_error, content_text(r.content)
    return r.structured_content


async def wait_source(c: Client, query: str, name: str) -> dict[str, Any]:
    """wf_find(query) once `name`'s source is discovered."""
    with anyio.move_on_after(OP_TIMEOUT):
        while True:
            found = await find(c, query)
            if any(h["name"] == name for h in found["tools"]):
                return found
            await anyio.sleep(0.2)
    pytest.fail(f"{name} was not found within {OP_TIMEOUT}s")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_wf_find_answers_a_model_can_act_on(wf: Wf, everything_bin: Path, mode: str) -> None:
    config = wf.write_config(toml_config({"everything": {"command": str(everything_bin)}}) + '\n[server.catalog]\nmode = "search"\n')
    async with wf.stdio_client(mode, "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT * 2):
            found = await wait_source(c, "repeat back what I say", "everything__echo")
            top = found["tools"][0]
            assert top["name"] == "everything__echo", found
            assert top["source"] == "everything" and top["description"], top
            assert top["signature"].startswith("everything__echo(message: string"), top
            assert 0.34 <= top["confidence"] <= 1.0, top
            assert "good_match" not in found and "wf_call" in found["hint"], found

            # Both everything's get-sum and wf.std tools know about adding
            # things; wf's own come after the upstream's unless asked for.
            sums = (await find(c, "add two numbers together"))["tools"]
            assert sums[0]["name"] == "everything__get-sum", sums
            first_std = next((i for i, h in enumerate(sums) if h["source"] == "wf.std"), len(sums))
            last_other = max(i for i, h in enumerate(sums) if h["source"] != "wf.std")
            assert first_std > last_other, sums
            asked = (await find(c, "wf std sleep"))["tools"]
            assert asked[0]["name"] == "wf_std__sleep", asked

            # Nothing matches well: said so, with the sources to narrow by.
            none = await find(c, "file my quarterly taxes with the revenue office")
            assert none.get("good_match") is False, none
            assert all(h["confidence"] < 0.34 for h in none["tools"]) and len(none["tools"]) <= 3, none
            lines = {line.split(" ", 1)[0]: line for line in none["sources"]}
            # Every source the caller may use (over stdio also wf's planner and admin).
            assert {"everything", "wf.std"} <= set(lines), none["sources"]
            assert "tools):" in lines["everything"] and "echo" in lines["everything"], lines
            assert "source" in none["hint"], none
            # Narrowed to one source, the overview names only it.
            narrowed = await find(c, "file my quarterly taxes", source="everything")
            assert [s.split(" ", 1)[0] for s in narrowed["sources"]] == ["everything"], narrowed
