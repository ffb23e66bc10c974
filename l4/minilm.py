"""all-MiniLM-L6-v2 forward pass in numpy: the same vectors without importing torch.

``l4 kb match`` on new text used to spend most of its time importing torch and
sentence-transformers (about 6 s of CPU) before embedding 50 short lines, which takes a
fraction of a second.  The model is a 6-layer BERT (384 hidden, 12 heads, GELU) followed
by mean pooling over the attention mask and L2 normalisation (the packaged
``modules.json``: Transformer -> Pooling(mean) -> Normalize).  This module reads the
packaged ``model.safetensors`` with ``safetensors.numpy`` and the packaged
``tokenizer.json`` with the Rust ``tokenizers`` library (both import in milliseconds) and
computes exactly that, in float32.  The weights are the real MiniLM weights; the vectors
agree with sentence-transformers' to cosine > 0.99999 (``tests/test_kb_embed_numpy.py``).

Truncation follows the packaged ``sentence_bert_config.json`` (``max_seq_length`` 256).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_BATCH = 32


@dataclass
class _Layer:
    qkv_w: np.ndarray  # (384, 3*384), transposed for x @ W
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    up_w: np.ndarray
    up_b: np.ndarray
    down_w: np.ndarray
    down_b: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, float32's own
    precision); numpy has no erf and scipy.special costs half a second to import."""
    a = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    y = 1.0 - poly * np.exp(-a * a)
    return (np.sign(x) * y).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, 0.5 x (1 + erf(x / sqrt 2)) (not the tanh approximation)."""
    return 0.5 * x * (1.0 + _erf(x * np.float32(1.0 / math.sqrt(2.0))))


class MiniLM:
    """The packaged sentence-transformers model, evaluated with numpy."""

    def __init__(self, model_dir: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        cfg = json.loads((model_dir / "config.json").read_text())
        st_cfg_path = model_dir / "sentence_bert_config.json"
        st_cfg = json.loads(st_cfg_path.read_text()) if st_cfg_path.is_file() else {}
        pool_path = model_dir / "1_Pooling" / "config.json"
        pool = json.loads(pool_path.read_text()) if pool_path.is_file() else {"pooling_mode_mean_tokens": True}
        if not pool.get("pooling_mode_mean_tokens", False) or cfg.get("model_type") != "bert":
            raise ValueError(f"unsupported model layout under {model_dir}")
        self.heads = int(cfg["num_attention_heads"])
        self.hidden = int(cfg["hidden_size"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.max_len = int(st_cfg.get("max_seq_length", 256))
        w = load_file(str(next(model_dir.glob("*.safetensors"))))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

        def g(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[prefix + name], dtype=np.float32)

        self.word = g("embeddings.word_embeddings.weight")
        self.pos = g("embeddings.position_embeddings.weight")
        self.type0 = g("embeddings.token_type_embeddings.weight")[0]
        self.emb_g = g("embeddings.LayerNorm.weight")
        self.emb_b = g("embeddings.LayerNorm.bias")
        self.layers: list[_Layer] = []
        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([g(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")])
            qkv_b = np.concatenate([g(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
            self.layers.append(_Layer(
                np.ascontiguousarray(qkv_w.T), qkv_b,
                np.ascontiguousarray(g(p + "attention.output.dense.weight").T), g(p + "attention.output.dense.bias"),
                g(p + "attention.output.LayerNorm.weight"), g(p + "attention.output.LayerNorm.bias"),
                np.ascontiguousarray(g(p + "intermediate.dense.weight").T), g(p + "intermediate.dense.bias"),
                np.ascontiguousarray(g(p + "output.dense.weight").T), g(p + "output.dense.bias"),
                g(p + "output.LayerNorm.weight"), g(p + "output.LayerNorm.bias"),
            ))
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.enable_truncation(max_length=self.max_len)
        tok.no_padding()
        self.tokenizer = tok

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vectors of one padded batch.

        Dense layers run on a 2-D (tokens, hidden) matrix and attention on contiguous
        (batch*heads, n, d) stacks, so every product is one BLAS call (numpy's stacked
        matmul on strided views falls back to a slow loop)."""
        b, n = ids.shape
        h, d = self.heads, self.hidden // self.heads
        x = (self.word[ids] + self.pos[:n][None, :, :] + self.type0).reshape(b * n, self.hidden)
        x = _layer_norm(x, self.emb_g, self.emb_b, self.eps)
        bias = np.repeat((1.0 - mask.astype(np.float32)) * np.float32(-1e9), h, axis=0)[:, None, :]
        scale = np.float32(1.0 / math.sqrt(d))
        for L in self.layers:
            qkv = x @ L.qkv_w + L.qkv_b  # (b*n, 3*hidden)
            qkv = np.ascontiguousarray(qkv.reshape(b, n, 3, h, d).transpose(2, 0, 3, 1, 4))
            q = qkv[0].reshape(b * h, n, d)
            k = qkv[1].reshape(b * h, n, d)
            v = qkv[2].reshape(b * h, n, d)
            att = np.matmul(q, np.ascontiguousarray(k.transpose(0, 2, 1))) * scale + bias
            att -= att.max(axis=-1, keepdims=True)
            np.exp(att, out=att)
            att /= att.sum(axis=-1, keepdims=True)
            ctx = np.matmul(att, v).reshape(b, h, n, d).transpose(0, 2, 1, 3).reshape(b * n, self.hidden)
            x = _layer_norm(ctx @ L.out_w + L.out_b + x, L.ln1_g, L.ln1_b, self.eps)
            y = _gelu(x @ L.up_w + L.up_b) @ L.down_w + L.down_b
            x = _layer_norm(y + x, L.ln2_g, L.ln2_b, self.eps)
        x = x.reshape(b, n, self.hidden)
        m = mask.astype(np.float32)[:, :, None]
        pooled = (x * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norm, 1e-12, None)).astype(np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 vectors, shape (len(texts), hidden).

        Texts are batched by token length (as sentence-transformers does), so padding is
        small; padded positions are masked out of attention and pooling."""
        if not texts:
            return np.zeros((0, self.hidden), dtype=np.float32)
        enc = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(enc)), key=lambda i: -len(enc[i].ids))
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        for start in range(0, len(order), _BATCH):
            idx = order[start:start + _BATCH]
            n = max(len(enc[i].ids) for i in idx)
            ids = np.zeros((len(idx), n), dtype=np.int64)
            mask = np.zeros((len(idx), n), dtype=np.int64)
            for r, i in enumerate(idx):
                e = enc[i].ids
                ids[r, :len(e)] = e
                mask[r, :len(e)] = 1
            out[idx] = self._forward(ids, mask)
        return out
