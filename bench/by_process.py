#!/usr/bin/env python3
"""CPU a call of each process under load: gateway, its upstream, the client.

Drives gateways that are already running with `wf-bench --load` (the gateways
benchmark's throughput clients: SESSIONS concurrent 2025-11-25 sessions calling
one tool in a loop), the gateways taking turns for ROUNDS rounds of SECONDS, and
prints the medians of calls/s and of the CPU each process spent a call: the
gateway's and its upstream's threads from /proc/PID/task/*/schedstat, the
client's from its rusage. docs/performance/gateways.md, "Under load, by
process". Standard library only; Linux.

    bench/by_process.py --wf-bench target/release/wf-bench \\
        wf=http://127.0.0.1:8080/mcp,fx__echo,GATEWAY_PID,UPSTREAM_PID \\
        mcp-proxy=http://127.0.0.1:8081/,fx/echo,GATEWAY_PID,UPSTREAM_PID
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess

from drive_stdio import cpu_ns


def one_round(bench: str, url: str, tool: str, sessions: int, seconds: float, gw: int, up: int) -> tuple[float, ...]:
    before = (cpu_ns(gw), cpu_ns(up))
    p = subprocess.Popen([bench, "--load", f"{url},{tool},{sessions},{seconds}"], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0 or not out.split():
        raise SystemExit(f"wf-bench --load {url} failed (status {status})")
    rate = float(out.split()[0])
    calls = rate * seconds
    client = (usage.ru_utime + usage.ru_stime) * 1e6 / calls
    return rate, (cpu_ns(gw) - before[0]) / 1000 / calls, (cpu_ns(up) - before[1]) / 1000 / calls, client


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wf-bench", default="target/release/wf-bench", help="the wf-bench binary")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("gateways", nargs="+", metavar="NAME=URL,TOOL,GATEWAY_PID,UPSTREAM_PID")
    a = ap.parse_args()
    specs = []
    for g in a.gateways:
        name, _, rest = g.partition("=")
        url, tool, gw, up = rest.split(",")
        specs.append((name, url, tool, int(gw), int(up)))
    results: dict[str, list[tuple[float, ...]]] = {s[0]: [] for s in specs}
    for r in range(a.rounds):
        for name, url, tool, gw, up in specs if r % 2 == 0 else specs[::-1]:
            results[name].append(one_round(a.wf_bench, url, tool, a.sessions, a.seconds, gw, up))
    print(f"{a.sessions} sessions, {a.rounds} rounds of {a.seconds} s, medians; CPU a call in µs\n")
    print("| gateway | calls/s | gateway | upstream | client | together |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        med = [statistics.median(row[i] for row in rows) for i in range(4)]
        print(f"| {name} | {med[0]:,.0f} | {med[1]:.1f} | {med[2]:.1f} | {med[3]:.1f} | {sum(med[1:]):.1f} |")


if __name__ == "__main__":
    main()
