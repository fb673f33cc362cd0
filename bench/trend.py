#!/usr/bin/env python3
"""How a benchmark figure moved: reads bench/results/*.jsonl (one record per
figure: date, question, row, column, value, unit, raw, command, machine;
written by `wf-bench --record FILE`) and prints, per figure, its value run by
run, oldest first.

    python3 bench/trend.py                         # the questions recorded, with counts
    python3 bench/trend.py "HTTP front"            # every figure of the matching questions
    python3 bench/trend.py "HTTP front" --row 2025-11-25 --column "p50 added"

Matching is case-insensitive and by substring. Standard library only.
"""

import argparse
import glob
import json
import os
import sys
from collections import OrderedDict

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def load(paths):
    records = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not a JSON record: {e}")
    return records


def matches(value, wanted):
    return wanted is None or wanted.lower() in (value or "").lower()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("question", nargs="?", help="part of a question's name")
    p.add_argument("--row", help="part of a row's label")
    p.add_argument("--column", help="part of a column's name")
    p.add_argument("--files", nargs="*", help="JSONL files (default: bench/results/*.jsonl)")
    args = p.parse_args(argv)

    records = load(args.files or sorted(glob.glob(os.path.join(RESULTS, "*.jsonl"))))
    if not records:
        sys.exit("no records (bench/results/*.jsonl)")
    if args.question is None and args.row is None and args.column is None:
        counts = OrderedDict()
        for r in sorted(records, key=lambda r: r["question"]):
            dates = counts.setdefault(r["question"], set())
            dates.add((r.get("date") or "")[:16])
        for q, dates in counts.items():
            print(f"{q}  ({len(dates)} run(s), latest {max(dates)})")
        return 0

    series = OrderedDict()
    for r in records:
        if matches(r["question"], args.question) and matches(r["row"], args.row) and matches(
            r["column"], args.column
        ):
            series.setdefault((r["row"], r["column"]), []).append(r)
    if not series:
        sys.exit("no figure matches")
    for (row, column), runs in series.items():
        unit = next((r.get("unit") for r in runs if r.get("unit")), "") or ""
        print(f"{row} | {column}" + (f" ({unit})" if unit else ""))
        runs.sort(key=lambda r: r.get("date") or "")
        first = runs[0]["value"]
        for r in runs:
            change = ""
            if first not in (None, 0) and r["value"] is not None and r is not runs[0]:
                change = f"  {r['value'] / first:.2f}× the first"
            print(
                f"  {(r.get('date') or '?'):<18} {r['value']:>10}{change}   {r.get('raw', '')}"
                f"   [{r['question']}; {r.get('machine') or ''}]"
            )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `| head`
        sys.exit(0)
