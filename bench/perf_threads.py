#!/usr/bin/env python3
"""Where a proxy's CPU goes, by thread and by code: reads `perf script` output
of a cpu-clock profile and prints a markdown table (docs/benchmarks.md, "The
call path: where wf's time goes").

    perf record -F 4000 -g --call-graph dwarf,32768 -p PID -o perf.data -- sleep 6
    perf script -i perf.data -F comm,ip,sym,dso | bench/perf_threads.py [US_PER_CALL]

Each sample is charged to its thread's name and to the object its leaf frame
runs in (kernel, the executable, a plugin library, libc). With US_PER_CALL (the
proxy's on-CPU µs per call that wf-bench printed for the same path), shares
are also given as µs per call.
"""

import collections
import re
import sys


def samples(lines):
    """(thread name, leaf object) per sample."""
    comm, leaf = None, None
    for line in lines:
        if not line.strip():
            if comm is not None:
                yield comm, leaf or "?"
            comm, leaf = None, None
        elif not line[0].isspace():
            comm = line.split()[0]
        elif leaf is None:
            # An inlined frame names no object: the next real frame holds it.
            m = re.search(r"\(([^()]*)\)\s*$", line)
            if m and m.group(1) != "inlined":
                leaf = m.group(1)
    if comm is not None:
        yield comm, leaf or "?"


def where(obj):
    if "kernel" in obj:
        return "kernel"
    name = obj.rsplit("/", 1)[-1]
    return re.sub(r"\.so(\.\d+)*$", ".so", name)


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else None
    counts = collections.Counter(
        (comm, where(obj)) for comm, obj in samples(sys.stdin)
    )
    total = sum(counts.values())
    if not total:
        sys.exit("no samples in the input")
    unit = "µs/call" if scale else "share"
    print(f"| thread | code | samples | {unit} |")
    print("|---|---|---:|---:|")
    for (comm, obj), n in sorted(counts.items(), key=lambda kv: -kv[1]):
        if n / total < 0.005:
            continue
        value = f"{scale * n / total:.0f}" if scale else f"{100 * n / total:.1f}%"
        print(f"| {comm} | {obj} | {n} | {value} |")
    print(f"\n{total} samples.")


if __name__ == "__main__":
    main()
