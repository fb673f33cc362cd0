#!/usr/bin/env python3
"""What a proxied call costs in the caches and branch predictor, per call, by
simulation (docs/benchmarks.md, "Why the host's threads run slower").

This VM exposes no hardware counters (`perf stat -e instructions`: not
supported), so this uses valgrind's simulator instead: callgrind with
`--cache-sim=yes --branch-sim=yes`, a first-level instruction and data cache
and one last-level cache (by default this machine's AMD Zen 3 core: 32 KiB
8-way L1i and L1d, the 512 KiB 8-way L2 as the last level). It drives each
server with `bench/drive_stdio.py` (one `echo` at a time over stdio) twice,
after W and after W + N calls, and prints the difference divided by N, so
start-up and warm-up cancel out:

- events per call, by object (the executable, a plugin library, libc);
- the code it runs on (nearly) every call: distinct 64-byte lines, by object
  and by crate (its footprint, which the L2 holds with the data, or not);
- cycles the extra misses cost, at latencies given on the command line.

    bench/cache_sim.py                       # wf, the two-runtime relay, the lean relay
    bench/cache_sim.py --ll 1048576,8,64     # the same with a 1 MiB L2
    bench/cache_sim.py --only wf --wf-dir target/dist

valgrind runs every thread of the server on one simulated core, in turn, and
simulates neither the kernel, nor the client or upstream process, nor
hardware prefetch: the absolute miss counts are a model, and the comparison
of two servers under the same model is what this is for. Standard library
only.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVENTS = "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim".split()
E = {e: i for i, e in enumerate(EVENTS)}
COMPRESSED = re.compile(r"\((\d+)\)(?: (.*))?")
CRATE = re.compile(r"[<&\s]*(?:mut |dyn )?([A-Za-z_][A-Za-z0-9_]*)::")
MEMCPY = "__memcpy_avx_unaligned_erms"


class Profile:
    """One callgrind output (`--dump-instr=yes --dump-line=no`): the self cost
    of every object, and of every code line (object, 64-byte line, crate)."""

    def __init__(self, path: Path):
        self.objects: dict[str, list[int]] = collections.defaultdict(lambda: [0] * len(EVENTS))
        self.lines: dict[tuple[str, int, str], int] = collections.defaultdict(int)
        self.memcpy_ir = 0
        names: dict[str, dict[str, str]] = {"ob": {}, "fn": {}}
        ob, fn, pos, call_cost = "?", "", 0, False
        with open(path, errors="replace") as f:
            for line in f:
                c = line[0]
                if c == "0" or c in "+-*":
                    fields = line.split()
                    p = fields[0]
                    if p.startswith("0x"):
                        pos = int(p, 16)
                    elif p[0] in "+-":
                        step = int(p[1:], 16) if p[1:].startswith("0x") else int(p[1:])
                        pos += step if p[0] == "+" else -step
                    if call_cost:  # the inclusive cost of a call: not this function's own
                        call_cost = False
                        continue
                    costs = [int(v) for v in fields[1 : 1 + len(EVENTS)]]
                    totals = self.objects[ob]
                    for i, v in enumerate(costs):
                        totals[i] += v
                    if costs:
                        self.lines[(ob, pos >> 6, crate(fn))] += costs[0]
                        if fn == MEMCPY:
                            self.memcpy_ir += costs[0]
                    continue
                key, _, rest = line.partition("=")
                if key in ("ob", "cob", "fn", "cfn"):
                    table = names[key[-2:]]
                    m = COMPRESSED.match(rest.strip())
                    if m:
                        if m.group(2):
                            table[m.group(1)] = m.group(2)
                        value = table.get(m.group(1), "?")
                    else:
                        value = rest.strip()
                    if key == "ob":
                        ob = value
                    elif key == "fn":
                        fn = value
                elif key == "calls":
                    call_cost = True


def crate(fn: str) -> str:
    m = CRATE.match(fn)
    if m:
        return m.group(1)
    return "libc" if fn and "::" not in fn else "?"


def short(obj: str) -> str:
    return obj.rsplit("/", 1)[-1]


def servers(args, config: Path) -> dict[str, tuple[str, list[str]]]:
    release = Path(args.release)
    fixture = str(release / "wf-fixture-upstream")
    bench = str(release / "wf-bench")
    wf_dir = Path(args.wf_dir or args.release)
    return {
        "wf": ("fx__echo", [str(wf_dir / "wf"), "serve", "--plugins", str(wf_dir), "--config", str(config)]),
        "relay (two runtimes)": ("echo", [bench, "--relay", "split", "--", fixture]),
        "relay (stdio_pipes)": ("echo", [bench, "--relay", "pipes", "--", fixture]),
    }


def run(args, name: str, tool: str, command: list[str], calls: int, out: Path) -> None:
    valgrind = [
        "valgrind", "--tool=callgrind", "--cache-sim=yes", "--branch-sim=yes",
        f"--I1={args.l1i}", f"--D1={args.l1d}", f"--LL={args.ll}",
        "--dump-instr=yes", "--dump-line=no", f"--callgrind-out-file={out}",
    ]
    driver = [sys.executable, str(ROOT / "bench" / "drive_stdio.py"), "--tool", tool,
              "--warm", str(calls), "--seconds", "0", "--"]
    log = out.with_suffix(".log")
    with open(log, "w") as err:
        done = subprocess.run(driver + valgrind + command, stdout=subprocess.DEVNULL, stderr=err,
                              env={**os.environ, "WF_LOG": "warn"})
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"{name}: the run with {calls} calls failed (exit {done.returncode}); see {log}")


def per_call(a: Profile, b: Profile, n: int):
    objects = {}
    for ob, costs in b.objects.items():
        before = a.objects.get(ob, [0] * len(EVENTS))
        objects[short(ob)] = [(x - y) / n for x, y in zip(costs, before)]
    # A line counts when it ran at least 0.9 instructions per call more.
    hot = [k for k, v in b.lines.items() if v - a.lines.get(k, 0) >= 0.9 * n]
    memcpy = (b.memcpy_ir - a.memcpy_ir) / n
    return objects, hot, memcpy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--release", default=str(ROOT / "target" / "release"), help="wf-bench, the fixture (and wf)")
    parser.add_argument("--wf-dir", help="where wf and its plugins are, if not --release (e.g. target/dist)")
    parser.add_argument("--only", action="append", help="wf, split, pipes (repeatable; default all three)")
    parser.add_argument("--warm", type=int, default=200, help="calls of the shorter run")
    parser.add_argument("--calls", type=int, default=1000, help="how many more calls the longer run makes")
    parser.add_argument("--l1i", default="32768,8,64", help="valgrind --I1 (size,assoc,line)")
    parser.add_argument("--l1d", default="32768,8,64", help="valgrind --D1")
    parser.add_argument("--ll", default="524288,8,64", help="valgrind --LL: the last level simulated")
    parser.add_argument("--l1-miss-cycles", type=float, default=12, help="an L1 miss served by the L2")
    parser.add_argument("--ll-miss-cycles", type=float, default=34, help="added when the L2 misses too (L3 ≈ 46)")
    parser.add_argument("--mispredict-cycles", type=float, default=15)
    parser.add_argument("--keep", help="keep the callgrind files in this folder")
    args = parser.parse_args()

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="wf-cache-sim-"))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "wf.toml"
    config.write_text(f'[sources.fx]\ncommand = "{Path(args.release) / "wf-fixture-upstream"}"\nargs = []\n')
    wanted = {"wf": "wf", "split": "relay (two runtimes)", "pipes": "relay (stdio_pipes)"}
    chosen = [wanted[o] for o in args.only] if args.only else list(wanted.values())

    results = {}
    for name, (tool, command) in servers(args, config).items():
        if name not in chosen:
            continue
        tag = re.sub(r"\W+", "_", name)
        profiles = []
        for calls in (args.warm, args.warm + args.calls):
            out = work / f"{tag}.{calls}.out"
            print(f"{name}: {calls} calls under callgrind…", file=sys.stderr, flush=True)
            run(args, name, tool, command, calls, out)
            profiles.append(Profile(out))
        results[name] = per_call(*profiles, args.calls)
        if not args.keep:
            for calls in (args.warm, args.warm + args.calls):
                (work / f"{tag}.{calls}.out").unlink(missing_ok=True)

    print(f"Simulated caches: L1i {args.l1i}, L1d {args.l1d}, last level {args.ll} (size,ways,line); "
          f"per call: the run of {args.warm + args.calls} calls minus the run of {args.warm}, ÷ {args.calls}.\n")
    print("| server | object | instructions | of which memcpy | L1i misses | L2 misses, code | L1d misses (read / write) "
          "| L2 misses, data (read / write) | mispredicts (cond / indirect) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    totals = {}
    for name, (objects, _, memcpy) in results.items():
        total = [sum(o[i] for o in objects.values()) for i in range(len(EVENTS))]
        totals[name] = (total, memcpy)
        rows = sorted(objects.items(), key=lambda kv: -kv[1][0])
        for obj, c in rows + [("**total**", total)]:
            if obj != "**total**" and c[0] < 500:
                continue
            mc = f"{memcpy / 1000:.1f} K" if obj in ("libc.so.6", "**total**") else ""
            print(f"| {name} | {obj} | {c[E['Ir']] / 1000:.1f} K | {mc} | {c[E['I1mr']]:.0f} | {c[E['ILmr']]:.0f} | "
                  f"{c[E['D1mr']]:.0f} / {c[E['D1mw']]:.0f} | {c[E['DLmr']]:.0f} / {c[E['DLmw']]:.0f} | "
                  f"{c[E['Bcm']]:.0f} / {c[E['Bim']]:.0f} |")

    print("\nCode run on (nearly) every call, distinct 64-byte lines, KiB:\n")
    print("| server | total | by object | largest crates (object: crate KiB) |")
    print("|---|---:|---|---|")
    for name, (_, hot, _) in results.items():
        by_object = collections.Counter(short(k[0]) for k in hot)
        by_crate = collections.Counter((short(k[0]), k[2]) for k in hot)
        objs = ", ".join(f"{o} {n * 64 / 1024:.0f}" for o, n in by_object.most_common() if n * 64 >= 1024)
        crates = ", ".join(f"{o.split('.')[0][:14]}: {c} {n * 64 / 1024:.0f}" for (o, c), n in by_crate.most_common(12))
        print(f"| {name} | {len(hot) * 64 / 1024:.0f} | {objs} | {crates} |")

    if len(totals) > 1:
        base_name = "relay (two runtimes)" if "relay (two runtimes)" in totals else None
        if base_name and "wf" in totals:
            (w, wm), (r, rm) = totals["wf"], totals[base_name]
            d = [x - y for x, y in zip(w, r)]
            l1 = (d[E["I1mr"]] + d[E["D1mr"]]) * args.l1_miss_cycles
            ll_code = d[E["ILmr"]] * args.ll_miss_cycles
            ll_read = d[E["DLmr"]] * args.ll_miss_cycles
            ll_write = d[E["DLmw"]] * args.ll_miss_cycles
            bp = (d[E["Bcm"]] + d[E["Bim"]]) * args.mispredict_cycles
            print(f"\nwf minus {base_name}, per call, at {args.l1_miss_cycles:g} cycles an L1 miss, "
                  f"+{args.ll_miss_cycles:g} an L2 miss, {args.mispredict_cycles:g} a mispredict:\n")
            print("| what | difference | cycles |")
            print("|---|---:|---:|")
            print(f"| instructions other than memcpy | {(d[0] - (wm - rm)) / 1000:+.1f} K | |")
            print(f"| L1 misses, code + data read | {d[E['I1mr']] + d[E['D1mr']]:+.0f} | {l1:+,.0f} |")
            print(f"| L2 misses, code | {d[E['ILmr']]:+.0f} | {ll_code:+,.0f} |")
            print(f"| L2 misses, data read | {d[E['DLmr']]:+.0f} | {ll_read:+,.0f} |")
            print(f"| L2 misses, data write (mostly hidden by the store buffer) | {d[E['DLmw']]:+.0f} | ({ll_write:+,.0f}) |")
            print(f"| mispredicted branches | {d[E['Bcm']] + d[E['Bim']]:+.0f} | {bp:+,.0f} |")
            print(f"| **misses and mispredicts, writes left out** | | **{l1 + ll_code + ll_read + bp:+,.0f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
