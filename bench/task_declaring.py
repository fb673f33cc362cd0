#!/usr/bin/env python3
"""What declaring MCP Tasks costs a client's plain calls (docs/benchmarks.md,
"Task-declaring clients").

Against a running `wf serve --http`, calls one tool as a stateless 2026-07-28
client, alternating a request that declares the `io.modelcontextprotocol/tasks`
extension with one that does not, one call at a time over one keep-alive
connection, and prints each kind's median and p90 wall time per call. Point it
at a tool whose source serves no tasks to see the price of asking. Standard
library only.

    bench/task_declaring.py --url http://127.0.0.1:PORT/mcp --token T --tool fix__echo --args '{"message":"x"}'
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time
from urllib.parse import urlsplit

TASKS = "io.modelcontextprotocol/tasks"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--args", default="{}")
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--warmup", type=int, default=100)
    a = ap.parse_args()
    parts = urlsplit(a.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    arguments = json.loads(a.args)

    def call(tasks: bool) -> float:
        caps = {"extensions": {TASKS: {}}} if tasks else {}
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": a.tool, "arguments": arguments, "_meta": meta}}
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": a.tool,
                   "authorization": f"Bearer {a.token}"}
        start = time.perf_counter()
        conn.request("POST", parts.path or "/", json.dumps(body), headers)
        reply = conn.getresponse()
        text = reply.read()
        took = time.perf_counter() - start
        if reply.status != 200 or b'"result"' not in text or b'"resultType":"task"' in text:
            raise SystemExit(f"unexpected reply {reply.status}: {text[:300]!r}")
        return took * 1e6

    for i in range(a.warmup):
        call(bool(i % 2))
    times: dict[bool, list[float]] = {False: [], True: []}
    for i in range(a.calls):
        times[bool(i % 2)].append(call(bool(i % 2)))
    for tasks, t in times.items():
        t.sort()
        label = "tasks declared" if tasks else "no tasks"
        print(f"{label:>14}: n={len(t)} median={statistics.median(t):.0f} us p90={t[int(len(t) * 0.9)]:.0f} us")


if __name__ == "__main__":
    main()
