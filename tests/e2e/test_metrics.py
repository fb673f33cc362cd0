"""`/metrics` on `wf serve --http`: after known traffic, the Prometheus text
(parsed with prometheus_client's OpenMetrics parser) counts exactly what was
sent, per source, tool and outcome; it needs its own token, is refused to a
non-loopback peer unless allowed, and is not served without a token."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import HttpServer, Wf

OP_TIMEOUT = 30
TOKEN = "metrics-secret-0123456789"
MCP_TOKEN = "mcp-bearer-secret-0123456789"
CONFIG = '[telemetry]\nmetrics_token = "${WF_E2E_METRICS_TOKEN}"\n'


@pytest.fixture
def http() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=15, trust_env=False) as c:
        yield c


def metrics_url(server: HttpServer, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{server.port}/metrics"


def scrape(http: httpx2.Client, server: HttpServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample as {(name, labels): value}."""
    r = http.get(metrics_url(server), headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/openmetrics-text"), r.headers
    samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def sample(samples: dict[Any, float], metric: str, /, **labels: str) -> float:
    return samples.get((metric, frozenset(labels.items())), 0.0)


def start(wf: Wf, host: str = "127.0.0.1", extra_config: str = "", env: dict[str, str] | None = None) -> HttpServer:
    config = wf.write_config(CONFIG + extra_config)
    return wf.start_http(host, None, "--config", str(config), env={"WF_E2E_METRICS_TOKEN": TOKEN, **(env or {})})


@pytest.mark.anyio
async def test_metrics_count_the_calls_made(wf: Wf, http: httpx2.Client) -> None:
    wf.install("call-panics")
    server = start(wf)
    ok_calls, failed_calls = 3, 2
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            for i in range(ok_calls):
                r = await c.call_tool("wf_std__template", {"template": "n={{n}}", "values": {"n": i}})
                assert not r.is_error
            for _ in range(failed_calls):
                r = await c.call_tool("wf_std__runtime_error", {"code": "E1", "message": "nope"})
                assert r.is_error
            with pytest.raises(MCPError, match="panicked"):
                await c.call_tool("panicky__panic", {})
            r = await c.call_tool("panicky__ok", {})
            assert not r.is_error
    s = scrape(http, server)
    calls = "wf_source_calls_total"
    base = {"source": "wf.std", "method": "tools/call"}
    assert sample(s, calls, **base, name="template", outcome="ok") == ok_calls, s
    # A tool that answered with an error result counts as a tool error.
    assert sample(s, calls, **base, name="runtime_error", outcome="tool_error") == failed_calls, s
    assert sample(s, calls, **base, name="runtime_error", outcome="ok") == 0, s
    timing = {**base, "name": "template"}
    assert sample(s, "wf_source_call_duration_seconds_count", **timing) == ok_calls, s
    assert sample(s, "wf_source_call_duration_seconds_bucket", **timing, le="+Inf") == ok_calls, s
    assert sample(s, "wf_source_call_duration_seconds_sum", **timing) > 0, s
    assert sample(s, "wf_plugin_panics_total", source="panicky") == 1, s
    assert sample(s, calls, source="panicky", method="tools/call", name="panic", outcome="panicked") == 1, s
    assert sample(s, calls, source="panicky", method="tools/call", name="ok", outcome="ok") == 1, s
    assert sample(s, "wf_discoveries_total", source="wf.std", outcome="ok") >= 1, s
    assert sample(s, "wf_calls_in_flight", source="wf.std") == 0, s
    # Scraping again changes nothing that was not called.
    again = scrape(http, server)
    assert sample(again, calls, **base, name="template", outcome="ok") == ok_calls


def test_metrics_need_their_own_token(wf: Wf, http: httpx2.Client) -> None:
    server = start(wf, env={"WF_HTTP_TOKEN": MCP_TOKEN})
    url = metrics_url(server)
    assert http.get(url).status_code == 401
    assert http.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert http.get(url, headers={"Authorization": f"Bearer {TOKEN[:-1]}X"}).status_code == 401
    # The MCP bearer token is not the metrics token.
    assert http.get(url, headers={"Authorization": f"Bearer {MCP_TOKEN}"}).status_code == 401
    r = http.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and "wf_discoveries_total" in r.text, r.text
    # DNS rebinding protection holds here too.
    bad_host = {"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"}
    assert http.get(url, headers=bad_host).status_code == 403


def non_loopback_address() -> str:
    """This machine's address on its default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))
        addr = s.getsockname()[0]
    assert not addr.startswith("127."), f"no non-loopback IPv4 address to test from: {addr}"
    return addr


@pytest.mark.parametrize("remote", [False, True])
def test_metrics_are_loopback_only_by_default(wf: Wf, http: httpx2.Client, remote: bool) -> None:
    extra = "metrics_remote = true\n" if remote else ""
    server = start(wf, "0.0.0.0", extra, env={"WF_HTTP_TOKEN": MCP_TOKEN})
    addr = non_loopback_address()
    auth = {"Authorization": f"Bearer {TOKEN}", "Host": f"127.0.0.1:{server.port}"}
    # The same request, from loopback and from the machine's own public address.
    assert http.get(metrics_url(server), headers=auth).status_code == 200
    r = http.get(metrics_url(server, addr), headers=auth)
    if remote:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 403 and "loopback" in r.text, r.text


def test_metrics_not_served_without_a_token(wf: Wf, http: httpx2.Client) -> None:
    server = wf.start_http()
    assert http.get(metrics_url(server)).status_code == 404


def test_a_weak_metrics_token_refuses_to_start(wf: Wf) -> None:
    config = wf.write_config('[telemetry]\nmetrics_token = "short"\n')
    server = wf.start_http("127.0.0.1", None, "--config", str(config), wait=False)
    code = server.proc.wait(timeout=30)
    assert code != 0
    assert "metrics token" in server.log.read_text(errors="replace"), server.log.read_text(errors="replace")


@pytest.mark.anyio
async def test_metrics_count_runs_nodes_and_reloads(wf: Wf, http: httpx2.Client) -> None:
    server = start(wf, extra_config='\n[admin]\nover_http = "open"\n')
    ok = {"nodes": [{"id": "n", "use": "wf.std.const", "args": {"value": 1}}]}
    bad = {"nodes": [{"id": "b", "use": "wf.std.runtime_error", "args": {"code": "E9", "message": "no"}}]}
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            for workflow, status in [(ok, "succeeded"), (ok, "succeeded"), (bad, "failed")]:
                r = await c.call_tool("wf_planner__run_workflow", {"workflow": workflow})
                assert r.structured_content["status"] == status, r.structured_content
            r = await c.call_tool("wf_admin__reload", {})
            assert not r.is_error and r.structured_content["error"] is None, r.structured_content
    s = scrape(http, server)
    assert sample(s, "wf_workflow_runs_total", status="succeeded") == 2, s
    assert sample(s, "wf_workflow_runs_total", status="failed") == 1, s
    node = "wf_workflow_node_duration_seconds_count"
    assert sample(s, node, capability="wf.std.const", status="succeeded") == 2, s
    assert sample(s, node, capability="wf.std.runtime_error", status="failed") == 1, s
    # Nodes are source calls too.
    assert sample(s, "wf_source_calls_total", source="wf.std", method="nodes/run", name="const", outcome="ok") == 2, s
    assert sample(s, "wf_config_reloads_total", outcome="applied") == 1, s


@pytest.mark.anyio
async def test_requests_are_counted_per_mcp_method_and_outcome(wf: Wf, http: httpx2.Client) -> None:
    server = start(wf)
    ok_calls, failed_calls, prompt_lists = 3, 2, 4
    async with wf.http_client(server, "legacy") as c:
        with anyio.fail_after(OP_TIMEOUT):
            for i in range(ok_calls):
                assert not (await c.call_tool("wf_std__template", {"template": "{{n}}", "values": {"n": i}})).is_error
            for _ in range(failed_calls):
                assert (await c.call_tool("wf_std__runtime_error", {"code": "E1", "message": "nope"})).is_error
            with pytest.raises(MCPError, match="unknown tool"):
                await c.call_tool("nobody__nothing", {})
            for _ in range(prompt_lists):
                await c.list_prompts()
    s = scrape(http, server)
    req = "wf_requests_total"
    assert sample(s, req, method="tools/call", outcome="ok") == ok_calls, s
    assert sample(s, req, method="tools/call", outcome="tool_error") == failed_calls, s
    # Refused before it ran.
    assert sample(s, req, method="tools/call", outcome="error") == 1, s
    assert sample(s, req, method="prompts/list", outcome="ok") == prompt_lists, s
    assert sample(s, req, method="resources/read", outcome="ok") == 0, s
