#!/usr/bin/env bash
# How often an idle `wf serve --http` is woken: its threads' context switches
# (voluntary + involuntary, /proc/PID/task/*/status) over SECONDS, summed by
# thread name, 6 s after start. docs/performance/gateways.md, "Idle wake-ups".
#
#   bench/idle_wakeups.sh WF_BIN CONFIG [SECONDS]
#
# CONFIG is started as given (its sources, policy files and tools lock are
# what wf watches); its state_dir should be a scratch folder.
set -euo pipefail
BIN=$1 CONFIG=$2 SECS=${3:-10}
LOG=$(mktemp)
"$BIN" serve --http 127.0.0.1:0 --config "$CONFIG" 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$LOG"' EXIT
sleep 6
snap() {
  for t in /proc/"$PID"/task/*; do
    echo "$(cat "$t/comm") $(awk '/^(non)?voluntary_ctxt_switches/ {s += $2} END {print s}' "$t/status")"
  done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
}
before=$(snap)
sleep "$SECS"
after=$(snap)
join <(echo "$before") <(echo "$after") |
  awk -v s="$SECS" '{d = ($3 - $2) / s; t += d; printf "%-20s %6.1f/s\n", $1, d} END {printf "%-20s %6.1f/s\n", "total", t}'
