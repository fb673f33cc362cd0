#!/usr/bin/env python3
"""Which share of a cpu-clock profile runs under given code: reads `perf
script -F comm,ip,sym,dso` output (recorded with call graphs) and prints, for
each `PATTERN[!EXCLUDED]` argument, the share of samples with a frame (its
symbol and object, `sym (/path/lib.so)`) that matches the regular expression
PATTERN, and no frame matching EXCLUDED
(docs/benchmarks.md, "The HTTP front"). With `--per-call US`, the shares are
also µs per call.

    perf script -i perf.data -F comm,ip,sym,dso | bench/perf_stacks.py --per-call 416 \\
        'StreamableHttpService!ServerHandler>::call_tool' 'libwf_source_mcp'
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator


def stacks(lines: Iterable[str]) -> Iterator[list[str]]:
    """Each sample's frames, leaf first, as `symbol (object)`."""
    stack: list[str] = []
    for line in lines:
        if not line.strip():
            if stack:
                yield stack
            stack = []
        elif line[0].isspace():
            parts = line.split(None, 1)
            if len(parts) == 2:
                stack.append(parts[1].strip())
    if stack:
        yield stack


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-call", type=float, help="the process's on-CPU µs per call in the same run")
    parser.add_argument("patterns", nargs="+", help="PATTERN or PATTERN!EXCLUDED (regular expressions)")
    args = parser.parse_args()
    queries = []
    for p in args.patterns:
        want, _, unwanted = p.partition("!")
        queries.append((p, re.compile(want), re.compile(unwanted) if unwanted else None))
    total, hits = 0, [0] * len(queries)
    for stack in stacks(sys.stdin):
        total += 1
        for i, (_, want, unwanted) in enumerate(queries):
            if any(want.search(s) for s in stack) and not (unwanted and any(unwanted.search(s) for s in stack)):
                hits[i] += 1
    if total == 0:
        print("no samples", file=sys.stderr)
        return 1
    head = "| code | samples | share |" + (" µs/call |" if args.per_call else "")
    print(head)
    print("|---|---:|---:|" + ("---:|" if args.per_call else ""))
    for (p, _, _), h in zip(queries, hits):
        row = f"| `{p}` | {h} | {100 * h / total:.1f}% |"
        if args.per_call:
            row += f" {args.per_call * h / total:.0f} |"
        print(row)
    print(f"\n{total} samples.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
