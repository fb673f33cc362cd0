#!/usr/bin/env python3
"""What a request on the wrong replica costs (docs/benchmarks.md, "A request on
the wrong replica").

wf answers a handle used on a replica that does not hold it with a retryable
error naming the owner (-32050), rather than forwarding it (docs/operator-
manual.md, "Running several replicas"). This starts two `wf serve --http`
replicas, A and B, on one PostgreSQL database (a fresh schema), starts a
workflow run as a task on A, and then times, taking turns, one call at a time
over one keep-alive connection per replica:

- `tasks/get` of the task on A, its owner (the request routed right);
- the same `tasks/get` on B (the answer naming A);
- B's answer followed by the retry on A (what a misrouted request costs a
  client that retries where it is told).

Prints each one's median and p90, and the added latency of a misrouted
request against a routed one. Standard library only.

    tests/pg/cluster.sh start /tmp/pg/c     # prints the URL
    bench/wrong_replica.py --wf target/release/wf --pg-url postgres://wf@127.0.0.1:PORT/wf
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

TASKS = "io.modelcontextprotocol/tasks"
SLOW = {"name": "slow", "nodes": [{"id": "nap", "use": "wf.std.sleep", "args": {"ms": 600000}}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    def __init__(self, wf: str, config: Path, name: str, root: Path, plugins: str | None, token: str) -> None:
        self.name, self.port, self.token = name, free_port(), token
        args = [wf, "serve", "--config", str(config), "--state-dir", str(root / f"state-{name}")]
        if plugins:
            args += ["--plugins", plugins]
        args += ["--http", f"127.0.0.1:{self.port}", "--replica-id", name]
        self.log = (root / f"wf-{name}.log").open("wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"replica {name} did not become ready; see {self.log.name}")
            time.sleep(0.1)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        self.next_id = 0

    def request(self, method: str, params: dict, name: str) -> dict:
        self.next_id += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        }
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": {**params, "_meta": meta}})
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": method,
            "mcp-name": name,
            "authorization": f"Bearer {self.token}",
        }
        self.conn.request("POST", "/mcp", body=body, headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            frames = [json.loads(ln[5:]) for ln in data.decode().splitlines() if ln.startswith("data:") and ln[5:].strip()]
            return next(f for f in frames if f.get("id") == self.next_id)
        return json.loads(data)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def stats(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[int(len(xs) * 0.9)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wf", required=True, help="the wf binary")
    ap.add_argument("--pg-url", default=os.environ.get("WF_BENCH_PG_URL"), help="postgres://… (or WF_BENCH_PG_URL)")
    ap.add_argument("--plugins", help="a plugins folder (default: beside wf)")
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=50)
    a = ap.parse_args()
    if not a.pg_url:
        raise SystemExit("--pg-url is needed (tests/pg/cluster.sh start DIR prints one)")
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="wf-wrong-replica-") as tmp:
        root = Path(tmp)
        config = root / "wf.toml"
        config.write_text(
            f'[server]\nhttp_token = "{token}"\n\n[store]\nurl = "{a.pg_url}"\n'
            f'schema = "bench_{secrets.token_hex(6)}"\nhandle_secret = "{secrets.token_hex(16)}"\n'
        )
        replicas: list[Replica] = []
        try:
            for name in ("a", "b"):
                replicas.append(Replica(a.wf, config, name, root, a.plugins, token))
            owner, other = replicas
            tool = "wf_planner__run_workflow"
            started = owner.request("tools/call", {"name": tool, "arguments": {"workflow": SLOW}}, tool)["result"]
            assert started.get("resultType") == "task", started
            task = started["taskId"]

            def routed() -> float:
                t = time.perf_counter()
                r = owner.request("tasks/get", {"taskId": task}, task)
                assert r["result"]["status"] == "working", r
                return time.perf_counter() - t

            def wrong() -> float:
                t = time.perf_counter()
                r = other.request("tasks/get", {"taskId": task}, task)
                assert r["error"]["code"] == -32050 and r["error"]["data"]["replica"] == "a", r
                return time.perf_counter() - t

            def misrouted() -> float:
                t = time.perf_counter()
                r = other.request("tasks/get", {"taskId": task}, task)
                assert r["error"]["data"]["replica"] == owner.name, r
                r = owner.request("tasks/get", {"taskId": task}, task)
                assert r["result"]["status"] == "working", r
                return time.perf_counter() - t

            kinds = {"routed": routed, "wrong": wrong, "misrouted": misrouted}
            seen: dict[str, list[float]] = {k: [] for k in kinds}
            for i in range(a.warmup + a.rounds):
                for k, f in kinds.items():
                    took = f()
                    if i >= a.warmup:
                        seen[k].append(took)
            owner.request("tasks/cancel", {"taskId": task}, task)
        finally:
            for r in replicas:
                r.stop()
    us = {k: tuple(x * 1e6 for x in stats(v)) for k, v in seen.items()}
    print(f"{a.rounds} rounds (after {a.warmup} warm-up), one request at a time, the kinds taking turns\n")
    print("| request | p50 | p90 |")
    print("|---|---:|---:|")
    print(f"| `tasks/get` on the owner (routed right) | {us['routed'][0]:.0f} µs | {us['routed'][1]:.0f} µs |")
    print(f"| `tasks/get` on the other replica: the -32050 answer | {us['wrong'][0]:.0f} µs | {us['wrong'][1]:.0f} µs |")
    print(f"| misrouted: that answer, then the retry on the owner | {us['misrouted'][0]:.0f} µs | {us['misrouted'][1]:.0f} µs |")
    added = us["misrouted"][0] - us["routed"][0]
    print(f"\nadded by a misrouted request, p50: {added:.0f} µs ({us['misrouted'][0] / us['routed'][0]:.2f}× a routed one)")


if __name__ == "__main__":
    main()
