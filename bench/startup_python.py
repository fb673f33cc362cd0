#!/usr/bin/env python3
"""Issue #38's measure, side by side: the official `mcp` client (legacy mode) over stdio,
from spawn to the first tools/list that holds `echo`, for server-everything directly,
`wf serve` on a fresh state directory and on a warm one (the catalog snapshot of an
earlier run). The three take turns, the order reversed every other round; medians.

    tests/e2e/.venv/bin/python bench/startup_python.py --wf target/release/wf --rounds 7

wf-bench's "Start-up with real upstreams" rows measure the same with an rmcp client and
two more servers; this is the check with the client a new user would try first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
EVERYTHING = REPO / "tests/e2e/node_modules/.bin/mcp-server-everything"


async def first_list(command: str, args: list[str], want: str) -> tuple[float, int]:
    """Seconds from spawn to the first tools/list holding `want`, and the lists made."""
    t0 = time.monotonic()
    transport = stdio_client(StdioServerParameters(command=command, args=args), errlog=open(os.devnull, "w"))
    lists = 0
    async with Client(transport, mode="legacy", cache=None, read_timeout_seconds=60) as c:
        while True:
            lists += 1
            if any(t.name == want for t in (await c.list_tools()).tools):
                return time.monotonic() - t0, lists
            if time.monotonic() - t0 > 30:
                raise SystemExit(f"{want} not listed within 30 s")
            await anyio.sleep(0.005)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wf", default=str(REPO / "target/release/wf"))
    p.add_argument("--everything", default=str(EVERYTHING))
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wf-startup-py-"))
    try:
        config = tmp / "wf.toml"
        config.write_text(f'[sources.everything]\ncommand = "{a.everything}"\n')
        warm = tmp / "warm"

        def wf(state: Path) -> tuple[float, int]:
            args = ["serve", "--config", str(config), "--state-dir", str(state)]
            return anyio.run(first_list, a.wf, args, "everything__echo")

        wf(warm)  # not counted: leaves the warm state directory its snapshot
        times: dict[str, list[float]] = {"direct": [], "wf, fresh state dir": [], "wf, warm state dir": []}
        fresh_lists = []
        for r in range(a.rounds):
            order = [0, 1, 2] if r % 2 == 0 else [2, 1, 0]
            for which in order:
                if which == 0:
                    t, _ = anyio.run(first_list, a.everything, [], "echo")
                    times["direct"].append(t)
                elif which == 1:
                    t, n = wf(tmp / f"fresh-{r}")
                    times["wf, fresh state dir"].append(t)
                    fresh_lists.append(n)
                else:
                    times["wf, warm state dir"].append(wf(warm)[0])
        print(f"wf: {a.wf}; {a.rounds} rounds; load average {os.getloadavg()[0]:.2f} at the end")
        for what, ts in times.items():
            rounds = ", ".join(f"{t * 1000:.0f}" for t in ts)
            print(f"{what:20s} median {statistics.median(ts) * 1000:5.0f} ms   rounds: {rounds}")
        print("tools/list calls, fresh:", ", ".join(map(str, fresh_lists)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
