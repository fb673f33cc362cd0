#!/usr/bin/env python3
"""A steady HTTP load for profilers (docs/benchmarks.md, "The HTTP front").

Calls one tool of a running streamable HTTP MCP server (`wf serve --http`, a
relay) in a loop, one call at a time over one keep-alive connection, as a
2025-11-25 client on its session or as a stateless 2026-07-28 client. With
`--pid` (the server's), it prints the server's on-CPU time per call after the
warm-up: every thread of that process, from /proc/PID/task/*/schedstat.
Standard library only.

    bench/drive_http.py --url http://127.0.0.1:PORT/mcp --tool fx__echo --generation 2026 --pid PID
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
from urllib.parse import urlsplit

from drive_stdio import cpu_ns

V2025, V2026 = "2025-11-25", "2026-07-28"


class Client:
    def __init__(self, url: str, generation: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path or "/"
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.generation = generation
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        self.next_id = 0

    def post(self, message: dict, extra: dict[str, str] | None = None) -> tuple[http.client.HTTPResponse, bytes]:
        self.conn.request("POST", self.path, json.dumps(message), {**self.headers, **(extra or {})})
        reply = self.conn.getresponse()
        return reply, reply.read()

    def answer(self, body: bytes, content_type: str) -> dict:
        """The JSON-RPC answer in a JSON or an SSE body."""
        if content_type.startswith("text/event-stream"):
            for line in body.decode().splitlines():
                if line.startswith("data:") and line[5:].strip():
                    m = json.loads(line[5:])
                    if m.get("id") == self.next_id:
                        return m
            raise SystemExit(f"the event stream ended without the answer: {body[:300]!r}")
        return json.loads(body)

    def request(self, method: str, params: dict, extra: dict[str, str] | None = None) -> dict:
        self.next_id += 1
        reply, body = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}, extra)
        if reply.status != 200:
            raise SystemExit(f"{method}: HTTP {reply.status}: {body[:300]!r}")
        answer = self.answer(body, reply.getheader("content-type", ""))
        if "result" not in answer:
            raise SystemExit(f"{method} failed: {answer}")
        return answer["result"]

    def connect(self) -> None:
        if self.generation == "2026":
            self.headers["mcp-protocol-version"] = V2026
            return
        init = {"protocolVersion": V2025, "capabilities": {}, "clientInfo": {"name": "drive_http", "version": "0"}}
        self.next_id += 1
        reply, body = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": "initialize", "params": init})
        session = reply.getheader("mcp-session-id")
        if reply.status != 200 or not session:
            raise SystemExit(f"initialize: HTTP {reply.status}, no session: {body[:300]!r}")
        self.headers.update({"mcp-session-id": session, "mcp-protocol-version": V2025})
        reply, body = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if reply.status not in (200, 202):
            raise SystemExit(f"notifications/initialized: HTTP {reply.status}")

    def call(self, tool: str, arguments: dict) -> dict:
        params: dict = {"name": tool, "arguments": arguments}
        extra = None
        if self.generation == "2026":
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": V2026,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "drive_http", "version": "0"},
            }
            extra = {"mcp-method": "tools/call", "mcp-name": tool}
        return self.request("tools/call", params, extra)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the server's MCP endpoint, e.g. http://127.0.0.1:8080/mcp")
    parser.add_argument("--tool", required=True, help="the tool to call (e.g. fx__echo through wf)")
    parser.add_argument("--generation", choices=["2025", "2026"], default="2026")
    parser.add_argument("--pid", type=int, help="the server's pid, for its CPU per call")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to call after the warm-up")
    parser.add_argument("--warm", type=int, default=300, help="calls before measuring")
    parser.add_argument("--message", default="hello world, a thirty byte msg")
    args = parser.parse_args()

    client = Client(args.url, args.generation)
    client.connect()
    echo = {"message": args.message}
    for _ in range(args.warm):
        client.call(args.tool, echo)
    before = cpu_ns(args.pid) if args.pid else 0
    started, calls = time.monotonic(), 0
    while time.monotonic() - started < args.seconds:
        result = client.call(args.tool, echo)
        if args.message not in json.dumps(result):
            raise SystemExit(f"the reply does not carry the message: {result}")
        calls += 1
    elapsed = time.monotonic() - started
    line = f"calls {calls} in {elapsed:.1f} s ({calls / elapsed:.0f}/s)"
    if args.pid:
        line += f"; server CPU {(cpu_ns(args.pid) - before) / 1000 / max(calls, 1):.1f} µs/call"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
