"""Quotas (`[[quotas]]`, issue #51), end to end against the real server-everything:
a `5/min` rule refuses the sixth call with a JSON-RPC error that names the rule and
when it frees (`data.retryAfterSeconds`), through a direct call and `wf_call` alike;
a tool the rule does not match is not counted. Over HTTP, a stateless (2026-07-28)
call answered as JSON gets **429** with `Retry-After` and the same error as its body;
a session's call (whose answer may share an open stream) gets the JSON-RPC error. (Held per
process; a budget shared by replicas on PostgreSQL is test_quotas_replicas.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from conftest import Wf, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60


def metrics(port: int, token: str) -> tuple[dict[Any, float], str]:
    """`/metrics` of the wf on `port`: every sample as {(name, labels): value}, and the text."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    with httpx2.Client(timeout=15, trust_env=False) as http:
        r = http.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, r.text


def sample(samples: dict[Any, float], metric: str, /, **labels: str) -> float:
    return samples.get((metric, frozenset(labels.items())), 0.0)


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


async def test_over_http_a_stateless_call_past_a_limit_is_429_with_retry_after(wf: Wf, everything_bin: Path) -> None:
    from test_tasks_runs import Raw

    quotas = '[[quotas]]\nname = "echo-http"\ntools = "everything__echo"\nrate = "2/min"\n\n'
    telemetry = '[telemetry]\nmetrics_token = "${WF_E2E_METRICS_TOKEN}"\n\n'
    config = wf.write_config(telemetry + quotas + toml_config({"everything": {"command": str(everything_bin)}}))
    metrics_token = "metrics-secret-0123456789"
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env={"WF_E2E_METRICS_TOKEN": metrics_token})
    args = {"name": "everything__echo", "arguments": {"message": "hi"}}
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        raw = Raw(http, server.url, "unused", tasks=False)
        with anyio.fail_after(OP_TIMEOUT):
            # Until the source is discovered the tool is unknown (and not counted).
            while "result" not in (r := await raw.request("tools/call", args, "everything__echo")):
                assert "unknown tool" in r["error"]["message"], r
                await anyio.sleep(0.1)
        ok = await raw.request("tools/call", args, "everything__echo")
        assert "result" in ok, ok
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        }
        r = await http.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {**args, "_meta": meta}},
            headers={
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": "everything__echo",
                "authorization": "Bearer unused",
            },
        )
        assert r.status_code == 429, (r.status_code, r.text)
        # One token every 30 s.
        assert 1 <= int(r.headers["retry-after"]) <= 30, r.headers
        error = r.json()["error"]
        assert "echo-http" in error["message"] and "frees in" in error["message"], error
        assert error["data"]["stage"] == "limit" and error["data"]["retryAfterSeconds"] == int(r.headers["retry-after"])
    # A session's call: the JSON-RPC error (the same budget, still spent).
    async with wf.http_client(server) as c:
        with pytest.raises(MCPError) as refused:
            await c.call_tool("wf_call", {"name": "everything__echo", "arguments": {"message": "x"}})
        assert refused.value.data["stage"] == "limit", refused.value.data
        assert refused.value.data["policy"] == "echo-http", refused.value.data
    # Metrics per rule: two calls used the budget, two were refused.
    samples, text = metrics(server.port, metrics_token)
    assert sample(samples, "wf_quota_calls_total", rule="echo-http", outcome="used") == 2, text
    assert sample(samples, "wf_quota_calls_total", rule="echo-http", outcome="refused") == 2, text
