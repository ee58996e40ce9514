"""all-MiniLM-L6-v2's forward pass in numpy: a 6-layer BERT encoder (hidden 384, 12
heads, feed-forward 1536), mean-pooled over the text's tokens and normalised, as
sentence-transformers computes it. numpy, not torch: the CPU tier embeds questions and
chunks, and it loads no torch (the model tiers do); the model is small enough that
numpy's matrix products are the whole cost.

`Encoder(weights, tokenizer)` takes the model's safetensors file and its tokenizer.json
(`tokenizers`, as the CPU tier already uses for prompts). Texts are cut at MAX_TOKENS
word pieces, the length the model was trained at; a batch is sorted by length so that
padding costs little. Shapes in comments: B texts, S tokens, H = 384, A = 12 heads,
D = 32 per head."""

from __future__ import annotations

import numpy as np

MAX_TOKENS = 128
LAYERS = 6
HEADS = 12
EPS = 1e-12
BATCH = 16


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (absolute error under 1.5e-7): numpy has no erf, and
    # BERT's GELU is the exact one, not the tanh approximation.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * np.exp(-a * a)
    return sign * y


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * weight + bias


class Encoder:
    def __init__(self, weights: dict[str, np.ndarray], tokenizer):
        w = {k: v.astype(np.float32, copy=False) for k, v in weights.items()}
        self.tokenizer = tokenizer
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.word = w["embeddings.word_embeddings.weight"]                 # [vocab, H]
        self.position = w["embeddings.position_embeddings.weight"]         # [512, H]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]       # [H]
        self.ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            qkv = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            self.layers.append({
                # Weights stored as [out, in]; kept transposed ([in, out]) for x @ W.
                "qkv": np.ascontiguousarray(qkv.T),                                            # [H, 3H]
                "qkv_b": np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")]),
                "out": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),          # [H, H]
                "out_b": w[p + "attention.output.dense.bias"],
                "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                "up": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),               # [H, 4H]
                "up_b": w[p + "intermediate.dense.bias"],
                "down": np.ascontiguousarray(w[p + "output.dense.weight"].T),                   # [4H, H]
                "down_b": w[p + "output.dense.bias"],
                "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            })
        self.dim = self.word.shape[1]

    def embed(self, texts: list[str]) -> np.ndarray:
        """[len(texts), H] float32, each row unit length."""
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            out[batch] = self._forward([encodings[i].ids for i in batch])
        return out

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        b, s = len(ids), max(len(x) for x in ids)
        tokens = np.zeros((b, s), dtype=np.int64)
        mask = np.zeros((b, s), dtype=np.float32)
        for i, row in enumerate(ids):
            tokens[i, :len(row)] = row
            mask[i, :len(row)] = 1.0
        x = self.word[tokens] + self.position[:s] + self.type0                       # [B, S, H]
        x = _layer_norm(x, *self.ln)
        # Padded keys get no attention: a large negative added before the softmax.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]                   # [B, 1, 1, S]
        d = self.dim // HEADS
        scale = np.float32(1.0 / np.sqrt(d))
        for L in self.layers:
            qkv = x @ L["qkv"] + L["qkv_b"]                                           # [B, S, 3H]
            qkv = qkv.reshape(b, s, 3, HEADS, d).transpose(2, 0, 3, 1, 4)            # [3, B, A, S, D]
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias                     # [B, A, S, S]
            scores -= scores.max(-1, keepdims=True)
            p = np.exp(scores)
            p /= p.sum(-1, keepdims=True)
            ctx = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, self.dim)              # [B, S, H]
            x = _layer_norm(x + ctx @ L["out"] + L["out_b"], *L["ln1"])
            h = _gelu(x @ L["up"] + L["up_b"])                                        # [B, S, 4H]
            x = _layer_norm(x + h @ L["down"] + L["down_b"], *L["ln2"])
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)          # [B, H]
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
