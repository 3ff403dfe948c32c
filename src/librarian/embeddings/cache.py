"""An embedding cache keyed by content hash, stored in the relational store.

Unchanged text is never embedded twice: re-ingesting, re-chunking a document whose sections did not
change, and rebuilding the vector index (``librarian reindex``) all read vectors from here.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from librarian.embeddings.base import Embedder, Matrix
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.storage.models import EmbeddingCacheEntry

# SQLite allows at most 32766 bound parameters; stay far below for IN (...) look-ups.
_LOOKUP_BATCH = 500


def content_hash(text: str) -> str:
    """SHA-256 of ``text`` in UTF-8, hex encoded: the key of every cache."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stored_vector(blob: bytes) -> Matrix:
    """A vector as the cache stores it (``EmbeddingCacheEntry.vector``: float32 bytes), as an array."""
    return np.frombuffer(blob, dtype=np.float32)


class EmbeddingCache:
    """Embeds texts through ``embedder``, reusing vectors stored for the same text and model."""

    def __init__(self, embedder: Embedder, sessions: sessionmaker[Session], query_cache_size: int = 1024):
        self.embedder = embedder
        self._sessions = sessions
        self._queries: OrderedDict[str, Matrix] = OrderedDict()
        self._query_cache_size = query_cache_size
        self.embedded_count = 0
        self.reused_count = 0

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """Vectors for ``texts``, embedding only those not cached; new vectors are stored."""
        hashes = [content_hash(text) for text in texts]
        found = self.lookup(hashes)
        missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in found}
        if missing:
            fresh = self.embedder.embed(list(missing.values()))
            new_vectors = dict(zip(missing.keys(), fresh, strict=True))
            self._store(new_vectors)
            found.update(new_vectors)
            self.embedded_count += len(missing)
        self.reused_count += len(texts) - len(missing)
        if not texts:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Matrix:
        """A ``(1, dimension)`` vector for a search query, from a small in-memory LRU cache."""
        cached = self._queries.get(text)
        if cached is not None:
            self._queries.move_to_end(text)
            return cached
        vector = self.embedder.embed([text])
        self._queries[text] = vector
        if len(self._queries) > self._query_cache_size:
            self._queries.popitem(last=False)
        return vector

    def warm_up_in_background(self) -> bool:
        """Start loading the embedder's faster query path on a daemon thread, if it has one.

        The local model has (PyTorch: :meth:`LocalMiniLMEmbedder.warm_up_in_background`); a remote
        embedder has nothing to load. Returns whether a load started.
        """
        if isinstance(self.embedder, LocalMiniLMEmbedder):
            self.embedder.warm_up_in_background()
            return True
        return False

    def lookup(self, hashes: Sequence[str]) -> dict[str, Matrix]:
        """Stored vectors for ``hashes`` under the current model; absent hashes are left out."""
        model = self.embedder.model_version
        result: dict[str, Matrix] = {}
        unique = list(dict.fromkeys(hashes))
        with self._sessions() as session:
            for start in range(0, len(unique), _LOOKUP_BATCH):
                batch = unique[start : start + _LOOKUP_BATCH]
                rows = session.execute(
                    select(EmbeddingCacheEntry.content_hash, EmbeddingCacheEntry.vector).where(
                        EmbeddingCacheEntry.model_version == model,
                        EmbeddingCacheEntry.content_hash.in_(batch),
                    )
                )
                for digest, blob in rows:
                    result[digest] = stored_vector(blob)
        return result

    def _store(self, vectors: dict[str, Matrix]) -> None:
        model = self.embedder.model_version
        rows = [
            {
                "content_hash": digest,
                "model_version": model,
                "dimension": int(vector.shape[0]),
                "vector": np.asarray(vector, dtype=np.float32).tobytes(),
            }
            for digest, vector in vectors.items()
        ]
        with self._sessions.begin() as session:
            insert = (
                pg_insert
                if session.bind is not None and session.bind.dialect.name == "postgresql"
                else (sqlite_insert)
            )
            statement = insert(EmbeddingCacheEntry).on_conflict_do_nothing()
            session.execute(statement, rows)
