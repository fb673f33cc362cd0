"""Quotas (`[[quotas]]`, issue #51), end to end against the real server-everything:
a `5/min` rule refuses the sixth call with a JSON-RPC error that names the rule and
when it frees (`data.retryAfterSeconds`), through a direct call and `wf_call` alike;
a tool the rule does not match is not counted. (Held per process; a budget shared by
replicas on PostgreSQL is not built yet.)
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from conftest import Wf, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60


async def test_a_five_per_minute_rule_refuses_the_sixth_call(wf: Wf, everything_bin: Path) -> None:
    quotas = '[[quotas]]\nname = "echo-rate"\ntools = "everything__echo"\nrate = "5/min"\n\n'
    config = wf.write_config(quotas + toml_config({"everything": {"command": str(everything_bin)}}))
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await wait_listed(c, "everything__echo")
            for i in range(3):
                ok = await c.call_tool("everything__echo", {"message": f"call {i}"})
                assert not ok.is_error, ok
            for i in range(2):
                ok = await c.call_tool("wf_call", {"name": "everything__echo", "arguments": {"message": f"meta {i}"}})
                assert not ok.is_error, ok
            # Not matched by the rule: not counted.
            for _ in range(3):
                ok = await c.call_tool("everything__get-sum", {"a": 1, "b": 2})
                assert not ok.is_error, ok
            for name, args in (
                ("everything__echo", {"message": "sixth"}),
                ("wf_call", {"name": "everything__echo", "arguments": {"message": "seventh"}}),
            ):
                with pytest.raises(MCPError) as refused:
                    await c.call_tool(name, args)
                e = refused.value
                assert "echo-rate" in e.message and "frees in" in e.message, e.message
                assert isinstance(e.data, dict), e.data
                assert e.data["stage"] == "limit" and e.data["policy"] == "echo-rate", e.data
                # One token every 12 s.
                assert 1 <= e.data["retryAfterSeconds"] <= 12, e.data


def test_a_bad_quota_is_refused_at_start(wf: Wf, everything_bin: Path) -> None:
    config = wf.write_config('[[quotas]]\nrate = "5 a minute"\n')
    proc = wf.run("serve", *wf.plugin_args(), "--config", str(config), timeout=120)
    assert proc.returncode != 0, proc.stderr
    assert "quotas[0]" in proc.stderr and "5 a minute" in proc.stderr, proc.stderr
