"""Metrics over OTLP (issue #12): with an OTLP endpoint, wf pushes the same
metrics it serves at `/metrics` (same names without `_total`, same labels)
to a receiver in the test (otlp_metrics_support, on `opentelemetry-proto`),
and the counts match the traffic sent and the Prometheus text; over
HTTP/protobuf and gRPC. With `otlp_metrics = false` none are pushed."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import HttpServer, Wf
from otlp_metrics_support import MetricsReceiver
from traces_support import FAST_EXPORT, telemetry_config

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
TOKEN = "metrics-secret-0123456789"
CALLS = 3
WORKFLOW = {
    "name": "counted",
    "nodes": [
        {"id": "first", "use": "wf.std.const", "args": {"value": 1}},
        {"id": "second", "use": "wf.std.passthrough", "args": {"value": {"$ref": "nodes.first.output"}}},
    ],
}


@pytest.fixture
def receiver() -> Iterator[MetricsReceiver]:
    r = MetricsReceiver()
    yield r
    r.close()


def start(wf: Wf, endpoint: str, **telemetry: object) -> HttpServer:
    config = telemetry_config(endpoint, metrics_token="${WF_E2E_METRICS_TOKEN}", **telemetry)
    return wf.start_http(
        "127.0.0.1", None, "--config", str(wf.write_config(config)),
        env={**FAST_EXPORT, "WF_E2E_METRICS_TOKEN": TOKEN},
    )


async def traffic(wf: Wf, server: HttpServer) -> None:
    """CALLS good tool calls, one refused (unknown tool), one workflow run."""
    async with wf.http_client(server, "legacy") as c:
        with anyio.fail_after(OP_TIMEOUT):
            for i in range(CALLS):
                r = await c.call_tool("wf_std__const", {"value": i})
                assert not r.is_error, r
            with pytest.raises(MCPError):
                await c.call_tool("no_such_tool", {})
            r = await c.call_tool("wf_planner__run_workflow", {"workflow": WORKFLOW})
            assert r.structured_content["status"] == "succeeded", r.structured_content


def scrape(server: HttpServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    r = httpx2.get(
        f"http://127.0.0.1:{server.port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False
    )
    assert r.status_code == 200, r.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


async def test_the_metrics_go_over_otlp_with_the_counts_of_the_traffic(wf: Wf, receiver: MetricsReceiver) -> None:
    server = start(wf, receiver.endpoint, otlp_metrics_interval_ms=200, service_name="wf-metrics")
    await traffic(wf, server)
    calls = {"method": "tools/call", "outcome": "ok"}
    refused = {"method": "tools/call", "outcome": "error"}
    runs = {"status": "succeeded"}

    def done() -> bool:
        return (
            receiver.point("wf_requests", **calls) == CALLS + 1  # + the run_workflow call
            and receiver.point("wf_requests", **refused) == 1
            and receiver.point("wf_workflow_runs", **runs) == 1
        )

    await receiver.wait(done, "OTLP metrics counting the traffic")
    assert receiver.services == {"wf-metrics"}, receiver.services
    # Node times: one histogram point per capability, with the Prometheus buckets.
    count, bounds = receiver.histogram(
        "wf_workflow_node_duration_seconds", capability="wf.std.const", status="succeeded"
    ) or (0, [])
    assert count == 1 and len(bounds) == 16 and bounds[0] == 0.001, (count, bounds)
    # The same counts as /metrics.
    text = scrape(server)
    assert text[("wf_requests_total", frozenset(calls.items()))] == CALLS + 1
    assert text[("wf_requests_total", frozenset(refused.items()))] == 1
    assert text[("wf_workflow_runs_total", frozenset(runs.items()))] == 1
    # A live gauge: a call in flight is seen in flight, then done.
    async with wf.http_client(server, "legacy") as c, anyio.create_task_group() as tg:
        tg.start_soon(c.call_tool, "wf_std__sleep", {"ms": 3000})
        await receiver.wait(lambda: receiver.point("wf_calls_in_flight", source="wf.std") == 1, "a call in flight")
    await receiver.wait(lambda: receiver.point("wf_calls_in_flight", source="wf.std") == 0, "no call in flight")


async def test_metrics_go_over_grpc_when_asked(wf: Wf) -> None:
    receiver = MetricsReceiver(grpc_=True)
    try:
        server = start(wf, receiver.endpoint, otlp_protocol="grpc", otlp_metrics_interval_ms=200)
        await traffic(wf, server)
        await receiver.wait(
            lambda: receiver.point("wf_requests", method="tools/call", outcome="ok") == CALLS + 1
            and receiver.point("wf_workflow_runs", status="succeeded") == 1,
            "OTLP/gRPC metrics counting the traffic",
        )
    finally:
        receiver.close()


async def test_otlp_metrics_false_sends_none(wf: Wf, receiver: MetricsReceiver) -> None:
    off = start(wf, receiver.endpoint, otlp_metrics=False, otlp_metrics_interval_ms=100)
    await traffic(wf, off)
    off.stop()  # a graceful stop flushes metrics that are on
    assert receiver.exports == 0
    # The same with metrics on (the default) does export, by the stop at the latest.
    on = start(wf, receiver.endpoint, otlp_metrics_interval_ms=100)
    await traffic(wf, on)
    on.stop()
    assert receiver.exports > 0 and receiver.point("wf_workflow_runs", status="succeeded") == 1
