#!/usr/bin/env python3
"""A steady load for profilers (docs/benchmarks.md, "Where wf's time goes").

Starts an MCP server over stdio (`wf serve`, a relay, an upstream), opens a
2025-11-25 session with raw JSON-RPC, and calls one tool in a loop, one call
at a time, for a while. It prints the server's pid as soon as the session is
open (for `perf record -p`, `strace -p`), then the calls made and the
server's on-CPU time per call: every thread of that process, from
/proc/PID/task/*/schedstat, after the warm-up calls (its children, e.g. an
upstream, are not counted). Standard library only, so it runs under any
Python 3.10+, and under `valgrind` as the server's wrapper.

    bench/drive_stdio.py --tool fx__echo --seconds 10 -- target/release/wf serve --config C
    bench/drive_stdio.py --tool echo -- target/release/wf-bench --relay split -- target/release/wf-fixture-upstream
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def cpu_ns(pid: int) -> int:
    """On-CPU nanoseconds of every thread of `pid` so far."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tool", required=True, help="the tool to call (e.g. fx__echo through wf, echo direct)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to call after the warm-up")
    parser.add_argument("--warm", type=int, default=300, help="calls before measuring")
    parser.add_argument("--message", default="hello world, a thirty byte msg")
    parser.add_argument("--args", help="the call's arguments as JSON instead of {\"message\": ...} (the reply is then only checked for success)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the server command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("the server command goes after --")

    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    next_id = 0

    def call(method: str, params: dict) -> dict:
        nonlocal next_id
        next_id += 1
        message = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        while True:
            line = server.stdout.readline()
            if not line:
                raise SystemExit(f"the server closed its stdout (exit code {server.wait()})")
            reply = json.loads(line)
            if reply.get("id") == next_id:
                if "result" not in reply:
                    raise SystemExit(f"{method} failed: {reply}")
                return reply["result"]

    try:
        call(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "drive_stdio", "version": "0"}},
        )
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        server.stdin.flush()
        print(f"pid {server.pid}", flush=True)
        arguments = json.loads(args.args) if args.args else {"message": args.message}
        echo = {"name": args.tool, "arguments": arguments}
        for _ in range(args.warm):
            call("tools/call", echo)
        before, started, calls = cpu_ns(server.pid), time.monotonic(), 0
        while time.monotonic() - started < args.seconds:
            result = call("tools/call", echo)
            if args.args:
                if result.get("isError"):
                    raise SystemExit(f"the call failed: {result}")
            elif args.message not in json.dumps(result):
                raise SystemExit(f"the reply does not carry the message: {result}")
            calls += 1
        elapsed, spent = time.monotonic() - started, cpu_ns(server.pid) - before
        print(f"calls {calls} in {elapsed:.1f} s ({calls / elapsed:.0f}/s); server CPU {spent / 1000 / max(calls, 1):.1f} µs/call")
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
