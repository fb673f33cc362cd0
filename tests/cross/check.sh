#!/usr/bin/env bash
# Type-checks wf and its bundled plugins for macOS and Windows from Linux:
#   rustup target add x86_64-apple-darwin x86_64-pc-windows-gnu
#   tests/cross/check.sh [TARGET_DIR]
# Without a C cross compiler for a target, the C parts of two dependencies
# (aws-lc-sys, wasmtime's fiber helper) get a stand-in compiler that writes
# empty objects: `cargo check` needs their Rust, not their code. With
# x86_64-w64-mingw32-gcc installed (Debian: gcc-mingw-w64-x86-64), the
# Windows check compiles their C for real. Not run by CI (minutes per target).
set -euo pipefail
cd "$(dirname "$0")/../.."
target_dir=${1:-target/cross}
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && { shift; : > "$1"; }; shift; done\n' > "$stub/cc"
printf '#!/bin/sh\nexit 0\n' > "$stub/ar"
chmod +x "$stub/cc" "$stub/ar"
export CC_x86_64_apple_darwin="$stub/cc" AR_x86_64_apple_darwin="$stub/ar"
if ! command -v x86_64-w64-mingw32-gcc > /dev/null; then
  export CC_x86_64_pc_windows_gnu="$stub/cc" AR_x86_64_pc_windows_gnu="$stub/ar"
fi
crates=(-p wf-host -p wf-plugin-api -p wf-source-std -p wf-source-mcp -p wf-mcp-oauth -p wf-source-openapi -p wf-source-wasm)
for t in x86_64-apple-darwin x86_64-pc-windows-gnu; do
  echo "== $t"
  # Warnings are errors here as in CI's clippy run.
  RUSTFLAGS="-D warnings" cargo check --locked --target "$t" "${crates[@]}" --lib --bins --target-dir "$target_dir"
done
