#!/usr/bin/env bash
# CI smoke run of the benchmark (issue #13): `wf-bench --quick` against the
# debug build must complete and print every table of the default run. Its
# numbers are not judged (a debug build on a shared CI machine).
#
#   tests/bench_smoke.sh WF_BENCH EVERYTHING_BIN OUT_DIR
#
# Writes OUT_DIR/bench-smoke.md (the tables), OUT_DIR/bench-smoke.log (progress),
# OUT_DIR/bench-smoke.jsonl (the figures, as `--record` appends them) and
# OUT_DIR/bench.counts (1 passed or 1 failed, for tests/ci_report.py total).
set -uo pipefail

bench="$1" everything="$2" out="$3"
tables="$out/bench-smoke.md" log="$out/bench-smoke.log"
# Generous: a quick debug run takes about a minute on an idle 2-core machine.
LIMIT_S=600
# The headings of the tables a default (`--quick`) run prints, one per benchmark
# (and the call-path targets judged against the relays).
HEADINGS=(
  "## Echo round trip: wf versus direct"
  "wf against each relay, in the same rounds"
  "## Start-up: time to a complete tools/list"
  "## Memory"
  "## Workflow engine"
  "## Run writes: fenced by the run's lease against unfenced"
  "## Per-client sessions"
  "## HTTP front: echo through"
  "## A slow upstream beside a fast one"
  "## OpenAPI source: a GET through wf versus direct"
  "## Finding tools in a large catalog (wf_find)"
  "## Audit trail: the record stage's price, and records written per second"
  "## WebAssembly components: a trivial tool against native"
)

started=$SECONDS
status=0
rm -f "$out/bench-smoke.jsonl"
timeout --kill-after=10 "$LIMIT_S" "$bench" --quick --everything "$everything" \
  --record "$out/bench-smoke.jsonl" >"$tables" 2>"$log" || status=$?
problems=()
if [[ $status -ne 0 ]]; then
  problems+=("wf-bench --quick exited with status $status (progress in ${log})")
fi
for h in "${HEADINGS[@]}"; do
  grep -qF -- "$h" "$tables" || problems+=("no table \"$h\" in its output")
done
# --record kept the figures of the tables it passed through.
for q in "Echo round trip: wf versus direct" "Memory" "Workflow engine"; do
  grep -qF -- "\"question\":\"$q\"" "$out/bench-smoke.jsonl" 2>/dev/null ||
    problems+=("no figure of \"$q\" in bench-smoke.jsonl (--record)")
done
if [[ ${#problems[@]} -eq 0 ]]; then
  echo "wf-bench --quick: every table printed in $((SECONDS - started))s (numbers not judged)"
  echo '{"passed": 1, "failed": 0, "skipped": 0}' >"$out/bench.counts"
  exit 0
fi
for p in "${problems[@]}"; do echo "error: $p" >&2; done
tail -20 "$log" >&2
echo '{"passed": 0, "failed": 1, "skipped": 0}' >"$out/bench.counts"
exit 1
