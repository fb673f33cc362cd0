"""An OTLP/HTTP metrics receiver for test_otlp_metrics.py, built on
`opentelemetry-proto`: it keeps the latest value of every data point it
received (sums, gauges and histogram counts; wf's sums are cumulative), by metric name
and attributes."""

from __future__ import annotations

import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc

from conftest import free_port
from traces_support import _value

Key = tuple[str, frozenset[tuple[str, Any]]]


class MetricsReceiver:
    """`POST /v1/metrics` on 127.0.0.1; `endpoint` is the base URL wf is given.
    With `grpc=True`, OTLP/gRPC (plaintext) `MetricsService/Export` instead."""

    def __init__(self, grpc_: bool = False) -> None:
        self.points: dict[Key, float] = {}
        self.histograms: dict[Key, tuple[int, list[float]]] = {}
        self.services: set[str] = set()
        self.exports = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                ok = self.path == "/v1/metrics" and self.headers.get("content-type") == "application/x-protobuf"
                if ok:
                    receiver.add(body)
                self.send_response(200 if ok else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        if grpc_:

            class Service(metrics_service_pb2_grpc.MetricsServiceServicer):
                def Export(self, request, context):  # noqa: N802 (the gRPC method's name)
                    receiver.add(request.SerializeToString())
                    return metrics_service_pb2.ExportMetricsServiceResponse()

            self.grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Service(), self.grpc)
            self.endpoint = f"http://127.0.0.1:{self.grpc.add_insecure_port('127.0.0.1:0')}"
            self.grpc.start()
            self.server = None
            return
        self.grpc = None
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, body: bytes) -> None:
        req = metrics_service_pb2.ExportMetricsServiceRequest()
        req.ParseFromString(body)
        with self.lock:
            self.exports += 1
            for rm in req.resource_metrics:
                res = {a.key: _value(a.value) for a in rm.resource.attributes}
                self.services.add(str(res.get("service.name")))
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        kind = m.WhichOneof("data")
                        for p in getattr(m, kind).data_points:
                            key = (m.name, frozenset((a.key, _value(a.value)) for a in p.attributes))
                            if kind in ("sum", "gauge"):
                                self.points[key] = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                            elif kind == "histogram":
                                self.histograms[key] = (p.count, list(p.explicit_bounds))

    def point(self, name: str, /, **labels: str) -> float | None:
        with self.lock:
            return self.points.get((name, frozenset(labels.items())))

    def histogram(self, name: str, /, **labels: str) -> tuple[int, list[float]] | None:
        with self.lock:
            return self.histograms.get((name, frozenset(labels.items())))

    async def wait(self, done, what: str, timeout: float = 60.0) -> None:
        """Waits until `done()` holds (exports are periodic: wait for the event)."""
        with anyio.move_on_after(timeout):
            while not done():
                await anyio.sleep(0.05)
            return
        with self.lock:
            raise AssertionError(f"no {what} within {timeout}s; got {self.points} {self.histograms}")

    def close(self) -> None:
        if self.grpc is not None:
            self.grpc.stop(grace=None)
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
