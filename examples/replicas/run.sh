#!/usr/bin/env bash
# Several `wf serve --http` replicas on one PostgreSQL database, from Debian's
# packages (apt-get install postgresql), on this machine: what a team runs
# behind a load balancer, in one script (docs/operator-manual.md, "Running
# several replicas").
#
#   examples/replicas/run.sh           start them; Ctrl-C drains and stops them
#   examples/replicas/run.sh --check   start them, save a draft on the first,
#                                      publish and deploy it on the second, run
#                                      it on the third, then drain and stop
#
# Environment (all optional):
#   WF_BIN         the wf binary (default: wf on PATH, else target/release or target/debug)
#   WF_STORE_URL   an existing database (default: a throwaway cluster in a temporary
#                  folder, tests/pg/cluster.sh, removed at the end)
#   REPLICAS       how many (default 3); FIRST_PORT the first one's port (default 8771)
#   BIND           the address they listen on (default 127.0.0.1)
#   WF_PLUGINS     a plugins folder (default: the one beside the wf binary)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
check=0
[ "${1:-}" = --check ] && check=1

wf=${WF_BIN:-$(command -v wf || true)}
for candidate in "$root/target/release/wf" "$root/target/debug/wf"; do
    [ -n "$wf" ] && break
    [ -x "$candidate" ] && wf=$candidate
done
[ -x "$wf" ] || { echo "run.sh: no wf binary (set WF_BIN, or cargo build)" >&2; exit 1; }
replicas=${REPLICAS:-3}
first_port=${FIRST_PORT:-8771}
bind=${BIND:-127.0.0.1}

work=$(mktemp -d /tmp/wf-replicas.XXXXXX)
chmod 755 "$work" # the cluster runs as the postgres user when this runs as root
pids=()
own_cluster=0
cleanup() {
    # SIGTERM drains (runs in progress get drain_timeout_ms), then each exits.
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    [ "$own_cluster" = 1 ] && "$root/tests/pg/cluster.sh" stop "$work/pg" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${WF_STORE_URL:-}" ]; then
    WF_STORE_URL=$("$root/tests/pg/cluster.sh" start "$work/pg")
    own_cluster=1
fi
export WF_STORE_URL
export WF_HANDLE_SECRET=${WF_HANDLE_SECRET:-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')}
export WF_HTTP_TOKEN=${WF_HTTP_TOKEN:-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')}
plugins=()
[ -n "${WF_PLUGINS:-}" ] && plugins=(--plugins "$WF_PLUGINS")

# Replicas migrate at start too (one at a time, under an advisory lock); doing
# it first is what a deploy pipeline does.
"$wf" store migrate --config "$here/wf.toml"

for i in $(seq 1 "$replicas"); do
    port=$((first_port + i - 1))
    # Each replica keeps its own state folder, as it would on its own machine.
    "$wf" serve --config "$here/wf.toml" "${plugins[@]}" --state-dir "$work/state-$i" \
        --http "$bind:$port" --replica-id "wf-$i" >"$work/wf-$i.log" 2>&1 &
    pids+=($!)
done

# Ready when /readyz says so: the store answers and first discovery is over.
for i in $(seq 1 "$replicas"); do
    port=$((first_port + i - 1))
    for _ in $(seq 1 300); do
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
        kill -0 "${pids[$((i - 1))]}" 2>/dev/null || { cat "$work/wf-$i.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "wf-$i  http://$bind:$port/mcp  $(curl -fsS "http://127.0.0.1:$port/readyz")"
done

# One stateless 2026-07-28 tool call to replica $1 (1-based); prints the
# tool's structured result.
call() {
    local port=$((first_port + $1 - 1)) tool=$2 args=$3
    curl -fsS "http://127.0.0.1:$port/mcp" \
        -H "authorization: Bearer $WF_HTTP_TOKEN" \
        -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
        -H 'mcp-protocol-version: 2026-07-28' -H 'mcp-method: tools/call' -H "mcp-name: $tool" \
        -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$tool\",\"arguments\":$args,\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{},\"io.modelcontextprotocol/clientInfo\":{\"name\":\"run.sh\",\"version\":\"0\"}}}}" |
        python3 -c 'import json,sys; r=json.load(sys.stdin); res=r.get("result") or sys.exit(f"error: {r}"); (not res.get("isError")) or sys.exit(f"tool error: {res}"); print(json.dumps(res["structuredContent"]))'
}
field() { python3 -c "import json,sys; v=json.load(sys.stdin)$1; print(v if isinstance(v, str) else json.dumps(v))"; }

if [ "$check" = 1 ]; then
    last=$replicas
    workflow='{"name":"greet","inputs":{"type":"object","properties":{"who":{"type":"string"}}},"nodes":[{"id":"hi","use":"wf.std.template","args":{"template":"hello {{w}}","values":{"w":{"$ref":"inputs.who"}}}}],"outputs":{"text":{"$ref":"nodes.hi.output"}}}'
    draft=$(call 1 wf_planner__save_draft "{\"workflow\":$workflow}" | field '["draft_id"]')
    echo "saved draft $draft on wf-1"
    artifact=$(call $((1 % replicas + 1)) wf_planner__publish_artifact "{\"draft_id\":\"$draft\"}" | field '["artifact"]')
    call $((1 % replicas + 1)) wf_planner__deploy "{\"name\":\"greeter\",\"artifact\":\"$artifact\"}" >/dev/null
    echo "published and deployed $artifact on wf-$((1 % replicas + 1))"
    run=$(call "$last" wf_planner__run_deployment '{"name":"greeter","inputs":{"who":"replicas"}}')
    echo "ran it on wf-$last: $(echo "$run" | field '["status"]') $(echo "$run" | field '["outputs"]')"
    [ "$(echo "$run" | field '["status"]')" = succeeded ] || exit 1
    echo "$run" | grep -q 'hello replicas' || exit 1
    for pid in "${pids[@]}"; do kill -TERM "$pid"; done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || { echo "wf-$((i + 1)) exited $?" >&2; cat "$work/wf-$((i + 1)).log" >&2; exit 1; }
    done
    pids=()
    echo "drained and stopped: ok"
    exit 0
fi

echo "Ctrl-C drains and stops them. Logs: $work/wf-*.log"
wait
