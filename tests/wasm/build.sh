#!/usr/bin/env bash
# Builds the WebAssembly components the e2e tests load, into OUT (tests/run:
# target/examples/wasm), each from pinned registry packages only:
#
#   units-py.wasm   examples/wasm-plugin/python      componentize-py (tests/e2e/.venv)
#   units-js.wasm   examples/wasm-plugin/javascript  componentize-js (tests/e2e/node_modules),
#                                                    without its AOT step (weval downloads a binary)
#   probe.wasm      tests/wasm/probe                 componentize-py: a component that
#                                                    reaches for what it was not granted,
#                                                    loops, allocates and traps on request
#   probe-js.wasm   tests/wasm/probe-js              componentize-js: fetches a URL on request
#
# A build takes tens of seconds of CPU, so each component is kept by the hash of
# everything it is built from (its folder, the WIT, the toolchain's pin and this
# script) in WF_WASM_CACHE (default ~/.cache/wf/wasm-components): a fresh clone
# on the same machine copies it instead of building it again.
#
#   tests/wasm/build.sh OUT
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:?usage: tests/wasm/build.sh OUT}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
E2E="$ROOT/tests/e2e"
WIT="$ROOT/plugins/wasm/wit"
WORLD="${WF_WASM_WORLD:-source}"
CACHE="${WF_WASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wf/wasm-components}"
COMPONENTIZE_PY="$E2E/.venv/bin/componentize-py"
COMPONENTIZE_JS="$E2E/node_modules/.bin/componentize-js"
mkdir -p "$CACHE"

# sha256 over the contents and names of every file given (folders walked, sorted).
inputs_hash() {
  find "$@" -type f ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z \
    | xargs -0 sha256sum | sed "s#  $ROOT/#  #" | sha256sum | cut -c1-32
}

# build NAME SOURCE-DIR TOOLCHAIN-PIN -- COMMAND… (COMMAND writes $target)
build() {
  local name="$1" src="$2" pin="$3"
  shift 4
  local hash cached started=$SECONDS
  hash="$(inputs_hash "$src" "$WIT" "$pin" "${BASH_SOURCE[0]}")"
  cached="$CACHE/$name.$hash.wasm"
  if [[ -s "$cached" ]]; then
    cp "$cached" "$OUT/$name.wasm"
    echo "$name.wasm: unchanged (cached by hash $hash)"
    return
  fi
  target="$OUT/$name.wasm.tmp"
  rm -f "$target"
  "$@"
  mv "$target" "$OUT/$name.wasm"
  # Keep one build per component: the cache never grows past the current inputs.
  rm -f "$CACHE/$name".*.wasm
  cp "$OUT/$name.wasm" "$cached"
  echo "$name.wasm: built in $((SECONDS - started))s ($(du -h "$OUT/$name.wasm" | cut -f1))"
}

py_component() { # SOURCE-DIR
  (cd "$1" && "$COMPONENTIZE_PY" -d "$WIT" -w "$WORLD" componentize -p . app -o "$target" >/dev/null)
}
js_component() { # SOURCE-DIR
  "$COMPONENTIZE_JS" --wit "$WIT" --world-name "$WORLD" -o "$target" "$1/app.js" >/dev/null
}

# The four at once: each is mostly one thread, and the machine has two cores.
pids=()
build units-py "$ROOT/examples/wasm-plugin/python" "$E2E/requirements.txt" -- py_component "$ROOT/examples/wasm-plugin/python" &
pids+=($!)
build units-js "$ROOT/examples/wasm-plugin/javascript" "$E2E/package-lock.json" -- js_component "$ROOT/examples/wasm-plugin/javascript" &
pids+=($!)
build probe "$ROOT/tests/wasm/probe" "$E2E/requirements.txt" -- py_component "$ROOT/tests/wasm/probe" &
pids+=($!)
build probe-js "$ROOT/tests/wasm/probe-js" "$E2E/package-lock.json" -- js_component "$ROOT/tests/wasm/probe-js" &
pids+=($!)
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit "$status"
