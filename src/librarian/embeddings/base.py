"""The contract of an embedding model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors (so cosine similarity is a dot product)."""

    @property
    def model_version(self) -> str:
        """Name and version of the model, recorded on every chunk it embedded."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in one call; returns a ``(len(texts), dimension)`` matrix."""
        ...


def normalize_rows(matrix: Matrix) -> Matrix:
    """Scale every row to unit length (rows of zeros stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalized: Matrix = (matrix / norms).astype(np.float32, copy=False)
    return normalized
