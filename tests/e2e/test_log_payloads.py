"""Debug logs never carry message payloads unless the operator asks: a tool
result's marker is absent from stderr at --log-level debug (also when it
comes from an upstream, through the mcp plugin's own rmcp), and present with
--log-payloads."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from conftest import Wf, tail
from hardening_support import RawStdio

OP_TIMEOUT = 60


@pytest.mark.parametrize("tool", ["wf_std__const", "fx__echo"])
@pytest.mark.parametrize(
    ("flags", "logged"),
    [
        (["--log-level", "debug"], False),
        (["--log-level", "trace,rmcp=trace"], False),
        (["--log-level", "debug", "--log-payloads"], True),
    ],
)
def test_tool_results_reach_the_log_only_with_log_payloads(
    wf: Wf, fixture_upstream_bin: Path, tool: str, flags: list[str], logged: bool
) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    cfg = wf.write_config(f'[sources.fx]\nkind = "mcp"\ncommand = "{fixture_upstream_bin}"\n')
    argv = [str(wf.bin), *flags, *wf.serve_args("--config", str(cfg))]
    s = RawStdio(argv, wf.root, wf.env(), wf.new_log("stdio-log"))
    arguments = {"value": marker} if tool == "wf_std__const" else {"message": marker}
    try:
        s.initialize(OP_TIMEOUT)
        s.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        r = s.reply(OP_TIMEOUT)
        assert marker in str(r["result"]), r
    finally:
        assert s.close() == 0, tail(s.log)
    text = s.log.read_text(errors="replace")
    # The run did log at debug: the filter was applied, not the logging lost.
    assert "DEBUG wf_host::server: serving MCP on stdio" in text, tail(s.log)
    assert (marker in text) is logged, tail(s.log)
