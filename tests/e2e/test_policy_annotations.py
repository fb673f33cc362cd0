"""A `destructiveHint` rule against a real peer: "nobody writes outside working
hours", on the official @modelcontextprotocol/server-filesystem, whose tools carry
their own annotations (`write_file` and `edit_file` destructive, `read_text_file`
read-only). server-everything marks none of its tools destructive, so the rule's
other test (test_policy.py) reads `readOnlyHint`.

The working hours are written around the current UTC hour, so the same rule is
tried once with the call outside them and once inside, whatever time the test
runs (two hours of margin on each side, so the hour turning mid-test changes
nothing).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from conftest import Wf, call_outcome, content_text, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
FILESYSTEM_BIN = Path(__file__).parent / "node_modules" / ".bin" / "mcp-server-filesystem"


def working_hours(hours: list[int]) -> str:
    return "(" + " || ".join(f"context.time.hour == {h % 24}" for h in hours) + ")"


def policies(hours: list[int]) -> str:
    return f"""\
@id("baseline")
permit(principal, action, resource);

@id("office-hours-writes")
@reason("nothing that may destroy data runs outside working hours")
forbid(principal, action in wf::Action::"tool", resource)
when {{ resource.annotations.destructiveHint && !{working_hours(hours)} }};
"""


@pytest.mark.parametrize("inside", [False, True], ids=["outside-hours", "inside-hours"])
async def test_a_destructive_tool_is_refused_outside_working_hours(wf: Wf, inside: bool) -> None:
    if not FILESYSTEM_BIN.exists():
        pytest.fail(f"{FILESYSTEM_BIN} is missing: run tests/run (or `npm ci` in tests/e2e)")
    now = time.gmtime().tm_hour
    hours = [now - 2, now - 1, now, now + 1, now + 2] if inside else [now + 3, now + 4, now + 5]
    files = wf.root / "files"
    files.mkdir()
    (files / "kept.txt").write_text("kept\n")
    wf.write_config(policies(hours), "policy.cedar")
    text = toml_config({"fs": {"command": str(FILESYSTEM_BIN), "args": [str(files)]}})
    config = wf.write_config('[policy]\nfiles = ["policy.cedar"]\n\n' + text)
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await wait_listed(c, "fs__read_text_file")
            # A read-only tool is never touched by the rule.
            read = await c.call_tool("fs__read_text_file", {"path": str(files / "kept.txt")})
            assert not read.is_error and "kept" in content_text(read.content), read
            target = files / "new.txt"
            result, error = await call_outcome(c, "fs__write_file", {"path": str(target), "content": "written"})
            _, via_wf_call = await call_outcome(
                c, "wf_call", {"name": "fs__write_file", "arguments": {"path": str(target), "content": "again"}}
            )
    if inside:
        assert error is None and via_wf_call is None, (error, via_wf_call)
        assert target.read_text() == "again"
    else:
        for refused in (error, via_wf_call):
            assert refused is not None, "a destructive tool ran outside working hours"
            assert "office-hours-writes" in refused and "outside working hours" in refused, refused
        assert not target.exists(), "the refused write reached the filesystem server"
