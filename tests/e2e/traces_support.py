"""OTLP trace receivers for test_traces.py, built on `opentelemetry-proto`: one
over HTTP/protobuf (`POST /v1/traces`) and one over gRPC (`TraceService/Export`).
Each keeps every span it received (flattened, ids as hex) and the raw bytes of
every export, so a test can also check what is NOT in them."""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from conftest import free_port

SPAN_KIND = {1: "internal", 2: "server", 3: "client"}


def _value(v: AnyValue) -> Any:
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    attributes: dict[str, Any]
    service: str
    status_code: int


@dataclass
class Collected:
    spans: list[Span] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, body: bytes) -> None:
        req = trace_service_pb2.ExportTraceServiceRequest()
        req.ParseFromString(body)
        spans = []
        for rs in req.resource_spans:
            res = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(
                        Span(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            kind=SPAN_KIND.get(s.kind, str(s.kind)),
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            service=str(res.get("service.name")),
                            status_code=s.status.code,
                        )
                    )
        with self.lock:
            self.raw.append(body)
            self.spans += spans

    def snapshot(self) -> list[Span]:
        with self.lock:
            return list(self.spans)

    async def wait(self, done, what: str, timeout: float = 60.0) -> list[Span]:
        """Waits until `done(spans)` holds (exports are batched: wait for the event)."""
        with anyio.move_on_after(timeout):
            while True:
                spans = self.snapshot()
                if done(spans):
                    return spans
                await anyio.sleep(0.05)
        raise AssertionError(f"no {what} within {timeout}s; got {[(s.name, s.trace_id) for s in self.snapshot()]}")


class HttpReceiver:
    """OTLP/HTTP protobuf on 127.0.0.1: `endpoint` is the base URL wf is given."""

    def __init__(self) -> None:
        self.collected = Collected()
        collected = self.collected

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                ok = self.path == "/v1/traces" and self.headers.get("content-type") == "application/x-protobuf"
                if ok:
                    collected.add(body)
                self.send_response(200 if ok else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GrpcReceiver:
    """OTLP/gRPC (plaintext) on 127.0.0.1."""

    def __init__(self) -> None:
        self.collected = Collected()
        collected = self.collected

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):  # noqa: N802 (the gRPC method's name)
                collected.add(request.SerializeToString())
                return trace_service_pb2.ExportTraceServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"
        self.server.start()

    def close(self) -> None:
        self.server.stop(grace=None)


def telemetry_config(endpoint: str, **extra: Any) -> str:
    lines = ["[telemetry]", f'otlp_endpoint = "{endpoint}"']
    for k, v in extra.items():
        lines.append(f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v).replace(chr(39), chr(34))}")
    return "\n".join(lines) + "\n"


# Exports are batched; a short delay keeps the tests quick (the bound is the
# receivers' generous wait, not this).
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
