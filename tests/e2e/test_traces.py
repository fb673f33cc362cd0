"""OpenTelemetry traces (issue #12): wf exports one trace per proxied call over
OTLP to a receiver in the test, built on `opentelemetry-proto` (traces_support).

A call through an HTTP fixture upstream is one trace: the downstream request
(`mcp.request`, a child of the client's W3C `traceparent`) → the source call
crossing the plugin boundary → the mcp plugin's upstream request, whose
`traceparent` the upstream received both in `_meta` and as an HTTP header.
No argument values are in any export unless `capture_payloads` is on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from admin_support import http_client_with_headers
from conftest import UpstreamEvents, Wf, free_port, toml_config, wait_listed
from traces_support import FAST_EXPORT, GrpcReceiver, HttpReceiver, Span, telemetry_config

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
SECRET_ARG = "an-argument-value-that-must-not-be-traced"


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    r = HttpReceiver()
    yield r
    r.close()


@pytest.fixture
def grpc_receiver() -> Iterator[GrpcReceiver]:
    r = GrpcReceiver()
    yield r
    r.close()


def start(wf: Wf, fixture_upstream_bin: Path, events: UpstreamEvents, telemetry: str, *extra: str):
    port = free_port()
    argv = [str(fixture_upstream_bin), *events.args(), "--http", f"127.0.0.1:{port}"]
    url = wf.start_upstream_http("fixture-http", argv, port)
    config = wf.write_config(toml_config({"fix": {"url": url}}) + telemetry)
    return wf.start_http("127.0.0.1", None, "--config", str(config), *extra, env=FAST_EXPORT)


def one_trace(trace_id: str, upstream_tool: str = "echo"):
    """Done when the trace holds the request, the source call and the upstream request."""

    def done(spans: list[Span]) -> bool:
        names = {s.name for s in spans if s.trace_id == trace_id}
        return {f"tools/call fix__{upstream_tool}", f"fix tools/call", f"tools/call {upstream_tool}"} <= names

    return done


def chain(spans: list[Span], trace_id: str, tool: str = "echo") -> tuple[Span, Span, Span]:
    mine = {s.name: s for s in spans if s.trace_id == trace_id}
    return mine[f"tools/call fix__{tool}"], mine["fix tools/call"], mine[f"tools/call {tool}"]


async def test_a_proxied_call_is_one_trace_from_the_clients_traceparent_into_the_http_upstream(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, http_receiver: HttpReceiver
) -> None:
    server = start(wf, fixture_upstream_bin, upstream_events, telemetry_config(http_receiver.endpoint))
    async with wf.http_client(server, "legacy") as c:
        await wait_listed(c, "fix__echo")
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("fix__echo", {"message": SECRET_ARG}, meta={"traceparent": TRACEPARENT})
        assert not r.is_error, r
    spans = await http_receiver.collected.wait(one_trace(TRACE_ID), "trace of the proxied call")
    request, call, upstream = chain(spans, TRACE_ID)
    # request → source call → upstream request, under the client's span.
    assert request.parent_span_id == CLIENT_SPAN, request
    assert (request.kind, call.kind, upstream.kind) == ("server", "internal", "client")
    assert call.parent_span_id == request.span_id and upstream.parent_span_id == call.span_id
    assert request.attributes["mcp.method.name"] == "tools/call"
    assert request.attributes["gen_ai.tool.name"] == "fix__echo"
    assert request.attributes["mcp.session.id"], request.attributes
    assert call.attributes["wf.source.id"] == "fix" and call.attributes["gen_ai.tool.name"] == "echo"
    assert upstream.attributes["mcp.method.name"] == "tools/call" and upstream.attributes["wf.source.id"] == "fix"
    assert {s.service for s in (request, call, upstream)} == {"wf"}
    # The upstream got the upstream span's context in `_meta` and the HTTP header.
    seen = await upstream_events.wait_for(event="trace", tool="echo")
    assert seen["meta"] == seen["header"] == f"00-{TRACE_ID}-{upstream.span_id}-01", seen
    # No argument values anywhere in what was exported.
    assert not any(SECRET_ARG.encode() in body for body in http_receiver.collected.raw)
    assert "gen_ai.tool.call.arguments" not in call.attributes


async def test_the_http_traceparent_header_is_the_parent_when_meta_has_none(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, http_receiver: HttpReceiver
) -> None:
    server = start(wf, fixture_upstream_bin, upstream_events, telemetry_config(http_receiver.endpoint))
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = {"traceparent": f"00-{trace_id}-{parent}-01"}
    async with http_client_with_headers(server.url, headers, "legacy") as c:
        await wait_listed(c, "fix__echo")
        with anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("fix__echo", {"message": "hi"})
    spans = await http_receiver.collected.wait(one_trace(trace_id), "trace under the header's context")
    request, _, upstream = chain(spans, trace_id)
    assert request.parent_span_id == parent
    seen = await upstream_events.wait_for(event="trace", tool="echo")
    assert seen["header"] == f"00-{trace_id}-{upstream.span_id}-01", seen


async def test_without_a_client_context_each_call_starts_its_own_trace(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, http_receiver: HttpReceiver
) -> None:
    server = start(wf, fixture_upstream_bin, upstream_events, telemetry_config(http_receiver.endpoint))
    async with wf.http_client(server, "legacy") as c:
        await wait_listed(c, "fix__echo")
        with anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("fix__echo", {"message": "a"})
            await c.call_tool("fix__echo", {"message": "b"})

    def two(spans: list[Span]) -> bool:
        return len([s for s in spans if s.name == "tools/call fix__echo"]) == 2

    spans = await http_receiver.collected.wait(two, "two request spans")
    roots = [s for s in spans if s.name == "tools/call fix__echo"]
    assert all(s.parent_span_id == "" for s in roots), roots
    assert roots[0].trace_id != roots[1].trace_id
    for root in roots:
        await http_receiver.collected.wait(one_trace(root.trace_id), f"the rest of trace {root.trace_id}")


async def test_capture_payloads_puts_argument_values_in_the_source_call_span(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, http_receiver: HttpReceiver
) -> None:
    telemetry = telemetry_config(http_receiver.endpoint, capture_payloads=True, service_name="wf-gw")
    server = start(wf, fixture_upstream_bin, upstream_events, telemetry)
    async with wf.http_client(server, "legacy") as c:
        await wait_listed(c, "fix__echo")
        with anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("fix__echo", {"message": SECRET_ARG}, meta={"traceparent": TRACEPARENT})
    spans = await http_receiver.collected.wait(one_trace(TRACE_ID), "trace with payloads")
    _, call, _ = chain(spans, TRACE_ID)
    assert json.loads(call.attributes["gen_ai.tool.call.arguments"]) == {"message": SECRET_ARG}
    assert call.service == "wf-gw"


async def test_traces_go_over_grpc_when_asked(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, grpc_receiver: GrpcReceiver
) -> None:
    telemetry = telemetry_config(grpc_receiver.endpoint, otlp_protocol="grpc")
    server = start(wf, fixture_upstream_bin, upstream_events, telemetry)
    async with wf.http_client(server, "legacy") as c:
        await wait_listed(c, "fix__echo")
        with anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("fix__echo", {"message": "hi"}, meta={"traceparent": TRACEPARENT})
    spans = await grpc_receiver.collected.wait(one_trace(TRACE_ID), "trace over gRPC")
    request, call, upstream = chain(spans, TRACE_ID)
    assert request.parent_span_id == CLIENT_SPAN
    assert call.parent_span_id == request.span_id and upstream.parent_span_id == call.span_id


async def test_json_log_lines_carry_the_trace_and_span_ids(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, http_receiver: HttpReceiver
) -> None:
    server = start(
        wf, fixture_upstream_bin, upstream_events, telemetry_config(http_receiver.endpoint),
        "--log-format", "json", "--log-level", "info,wf_host=debug",
    )
    async with wf.http_client(server, "legacy") as c:
        await wait_listed(c, "fix__echo")
        with anyio.fail_after(OP_TIMEOUT):
            await c.call_tool("fix__echo", {"message": "hi"}, meta={"traceparent": TRACEPARENT})
    await http_receiver.collected.wait(one_trace(TRACE_ID), "trace")
    lines = [json.loads(line) for line in server.log.read_text().splitlines() if line.startswith("{")]
    traced = [
        l for l in lines
        if any(s.get("trace_id") == TRACE_ID and s.get("span_id") for s in l.get("spans", []))
    ]
    assert traced, "no log line inside the traced call carries its trace id"


async def test_a_bad_protocol_stops_wf_with_a_clear_error(wf: Wf) -> None:
    config = wf.write_config(telemetry_config("http://127.0.0.1:9", otlp_protocol="thrift"))
    r = wf.run("serve", "--config", str(config), check=False)
    assert r.returncode != 0
    assert 'telemetry.otlp_protocol: "thrift" is neither "http" nor "grpc"' in r.stderr, r.stderr


async def test_a_workflow_run_is_one_span_with_a_child_per_node(
    wf: Wf, http_receiver: HttpReceiver
) -> None:
    config = wf.write_config(telemetry_config(http_receiver.endpoint))
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=FAST_EXPORT)
    workflow = {
        "name": "traced",
        "nodes": [
            {"id": "first", "use": "wf.std.const", "args": {"value": 1}},
            {"id": "second", "use": "wf.std.passthrough", "args": {"value": {"$ref": "nodes.first.output"}}},
        ],
    }
    async with wf.http_client(server, "legacy") as c:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_planner__run_workflow", {"workflow": workflow})
        assert r.structured_content["status"] == "succeeded", r.structured_content
    run_id = r.structured_content["run_id"]

    def done(spans: list[Span]) -> bool:
        names = {s.name for s in spans}
        return {"workflow.run traced", "workflow.node first", "workflow.node second"} <= names

    spans = await http_receiver.collected.wait(done, "the run's trace")
    run = next(s for s in spans if s.name == "workflow.run traced")
    assert run.attributes["wf.run.id"] == run_id and run.attributes["wf.run.status"] == "succeeded"
    for node in ("first", "second"):
        s = next(s for s in spans if s.name == f"workflow.node {node}")
        assert (s.trace_id, s.parent_span_id) == (run.trace_id, run.span_id), s
        assert s.attributes["wf.node.capability"].startswith("wf.std.")
        assert s.attributes["wf.node.attempts"] == 1 and s.attributes["wf.node.status"] == "succeeded"


async def test_a_run_started_by_a_tool_call_is_a_child_of_that_call_in_the_clients_trace(
    wf: Wf, http_receiver: HttpReceiver
) -> None:
    config = wf.write_config(telemetry_config(http_receiver.endpoint))
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=FAST_EXPORT)
    workflow = {
        "name": "child",
        "nodes": [
            {"id": "first", "use": "wf.std.const", "args": {"value": 1}},
            {"id": "second", "use": "wf.std.passthrough", "args": {"value": {"$ref": "nodes.first.output"}}},
        ],
    }
    async with wf.http_client(server, "legacy") as c:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool(
                "wf_planner__run_workflow", {"workflow": workflow}, meta={"traceparent": TRACEPARENT}
            )
        assert r.structured_content["status"] == "succeeded", r.structured_content

    def done(spans: list[Span]) -> bool:
        names = {s.name for s in spans if s.trace_id == TRACE_ID}
        return {
            "tools/call wf_planner__run_workflow", "workflow.run child",
            "workflow.node first", "workflow.node second",
        } <= names

    spans = await http_receiver.collected.wait(done, "the run inside the client's trace")
    mine = {s.name: s for s in spans if s.trace_id == TRACE_ID}
    request, run = mine["tools/call wf_planner__run_workflow"], mine["workflow.run child"]
    assert request.parent_span_id == CLIENT_SPAN and request.kind == "server", request
    assert request.attributes["mcp.method.name"] == "tools/call"
    assert request.attributes["gen_ai.tool.name"] == "wf_planner__run_workflow"
    assert request.attributes["mcp.session.id"], request.attributes
    assert run.parent_span_id == request.span_id, (run, request)
    for node in ("first", "second"):
        assert mine[f"workflow.node {node}"].parent_span_id == run.span_id


@pytest.mark.parametrize("tool, args", [
    ("wf_std__const", {"value": 7}),  # a plugin source's tool
    ("wf_planner__list_capabilities", {}),  # a host-local tool
])
async def test_a_wf_std_or_host_local_tool_call_gets_a_request_span(
    wf: Wf, http_receiver: HttpReceiver, tool: str, args: dict
) -> None:
    config = wf.write_config(telemetry_config(http_receiver.endpoint))
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=FAST_EXPORT)
    async with wf.http_client(server, "legacy") as c:
        await wait_listed(c, tool)
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool(tool, args, meta={"traceparent": TRACEPARENT})
        assert not r.is_error, r

    def done(spans: list[Span]) -> bool:
        return any(s.name == f"tools/call {tool}" for s in spans)

    spans = await http_receiver.collected.wait(done, f"the {tool} call's request span")
    request = next(s for s in spans if s.name == f"tools/call {tool}")
    assert (request.trace_id, request.parent_span_id) == (TRACE_ID, CLIENT_SPAN), request
    assert request.kind == "server"
    assert request.attributes["mcp.method.name"] == "tools/call"
    assert request.attributes["gen_ai.tool.name"] == tool
    assert request.attributes["mcp.session.id"], request.attributes


async def test_each_attempt_of_a_node_is_a_span_that_parents_its_source_call(
    wf: Wf, http_receiver: HttpReceiver
) -> None:
    config = wf.write_config(telemetry_config(http_receiver.endpoint))
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=FAST_EXPORT)
    workflow = {
        "name": "retried",
        "nodes": [
            {
                "id": "flaky",
                "use": "wf.std.runtime_error",
                "args": {"code": "nope", "message": "always"},
                "retry": {"attempts": 3, "backoff_ms": 10},
                "on_error": "continue",
            },
            {"id": "after", "use": "wf.std.const", "args": {"value": 1}, "after": ["flaky"]},
        ],
    }
    async with wf.http_client(server, "legacy") as c:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("wf_planner__run_workflow", {"workflow": workflow})
        assert r.structured_content["status"] == "succeeded", r.structured_content

    attempts = {f"workflow.attempt flaky #{n}" for n in (1, 2, 3)}

    def done(spans: list[Span]) -> bool:
        names = {s.name for s in spans}
        return attempts | {"workflow.run retried", "workflow.attempt after #1"} <= names

    spans = await http_receiver.collected.wait(done, "the attempts' spans")
    node = next(s for s in spans if s.name == "workflow.node flaky")
    assert node.attributes["wf.node.attempts"] == 3, node
    error = 2  # STATUS_CODE_ERROR
    for n in (1, 2, 3):
        a = next(s for s in spans if s.name == f"workflow.attempt flaky #{n}")
        assert (a.trace_id, a.parent_span_id) == (node.trace_id, node.span_id), a
        assert a.attributes["wf.node.attempt"] == n and a.status_code == error, a
        # The call that crossed the plugin boundary is the attempt's child.
        calls = [s for s in spans if s.parent_span_id == a.span_id and s.name.startswith("wf.std ")]
        assert len(calls) == 1, (a, [s.name for s in spans if s.parent_span_id == a.span_id])
    ok = next(s for s in spans if s.name == "workflow.attempt after #1")
    assert ok.status_code != error, ok
    # No attempt span for a node that never ran more than the ones seen.
    assert not any(s.name == "workflow.attempt flaky #4" for s in spans)
