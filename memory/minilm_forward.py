"""The all-MiniLM-L6-v2 forward pass in numpy (see `minilm`, which loads it on first use)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .minilm import BATCH_SIZE, DIMENSIONS, MAX_SEQ_LENGTH, MODEL_NAME


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf and BERT's GELU is the
    exact (erf) one, not the tanh approximation."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0, dtype=np.float32)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLM:
    """Thread-safe after construction (forward passes only read the weights)."""

    name = MODEL_NAME
    dimensions = DIMENSIONS

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        w = load_file(str(path / "model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.blocks = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(name: str, prefix: str = p) -> tuple[np.ndarray, np.ndarray]:
                # Transposed once here, so every forward pass is a plain x @ W.
                return (
                    np.ascontiguousarray(w[prefix + name + ".weight"].T),
                    w[prefix + name + ".bias"],
                )

            self.blocks.append(
                {
                    "q": lin("attention.self.query"),
                    "k": lin("attention.self.key"),
                    "v": lin("attention.self.value"),
                    "o": lin("attention.output.dense"),
                    "ln1": (
                        w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"],
                    ),
                    "i": lin("intermediate.dense"),
                    "out": lin("output.dense"),
                    "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                }
            )
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.tokenizer = tokenizer
        self._tokenizer_lock = threading.Lock()  # padding/truncation state is per instance

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        # Similar lengths together: less padding, same result (padding is masked out).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            out[batch] = self._forward([texts[i] for i in batch])
        return out

    def _forward(self, texts: list[str]) -> np.ndarray:
        with self._tokenizer_lock:
            encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        batch, length = ids.shape
        x = self.word[ids] + self.position[:length][None, :, :] + self.token_type[types]
        x = _layer_norm(x, *self.emb_ln, self.eps)
        head_dim = DIMENSIONS // self.heads
        scale = np.float32(1.0 / np.sqrt(head_dim))
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]

        def split(t: np.ndarray) -> np.ndarray:
            # Contiguous, or numpy's stacked matmul falls back to a slow non-BLAS loop.
            heads = t.reshape(batch, length, self.heads, head_dim).transpose(0, 2, 1, 3)
            return np.ascontiguousarray(heads)

        def linear(t: np.ndarray, layer: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
            # One 2-D GEMM for the whole batch rather than a stack of small ones.
            flat = t.reshape(-1, t.shape[-1]) @ layer[0] + layer[1]
            return flat.reshape(batch, length, -1)

        for blk in self.blocks:
            q = split(linear(x, blk["q"]))
            k = split(linear(x, blk["k"]))
            v = split(linear(x, blk["v"]))
            scores = (q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))) * scale + bias
            scores = scores - scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, DIMENSIONS)
            x = _layer_norm(linear(context, blk["o"]) + x, *blk["ln1"], self.eps)
            hidden = _gelu(linear(x, blk["i"]))
            x = _layer_norm(linear(hidden, blk["out"]) + x, *blk["ln2"], self.eps)
        pooled = (x * mask[:, :, None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
