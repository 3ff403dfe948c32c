"""Exact vector search over a small filtered scope, read from the source of truth.

Approximate (HNSW) indexes are fast on the whole collection but slow or incomplete when a filter
keeps only a small share of it: Chroma evaluates metadata filters by scanning (about 90 ms at 100k
vectors for a 1 % filter, measured in docs/benchmarks.md), and HNSW graph walks miss matches a filter
hides. Like the query planners of dedicated vector databases, Librarian therefore estimates the
filter's cardinality first: when at most ``max_chunks`` chunks pass, it scores them exactly (a matrix
product); only broad scopes go to the approximate index.

The vectors of a scope come from the embedding cache in the relational store and are kept in a small
in-memory LRU. An entry is reused only while the scope's fingerprint (count, sum and maximum of its
chunk ids) is unchanged: chunk ids are never reused and a chunk's text never changes under its id, so
any insert, delete or relabel that moves chunks in or out of the scope changes the fingerprint.
Tags are not part of the cached data; a tag filter reads the scope from the store.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from librarian.index.base import SearchFilter, Vector
from librarian.index.grants_sql import grants_condition
from librarian.storage.models import Chunk, EmbeddingCacheEntry


def chunk_conditions(where: SearchFilter, dialect: str) -> list[ColumnElement[bool]]:
    """SQL conditions on :class:`Chunk` for every field of ``where`` but its tags (checked in Python)."""
    conditions: list[ColumnElement[bool]] = []
    if where.document_types:
        conditions.append(Chunk.document_type.in_(sorted(set(where.document_types))))
    if where.access is not None:
        conditions.append(grants_condition(dialect, Chunk.access_grants, where.access))
    for field in ("sdk_name", "sdk_version", "document_type", "category"):
        value = getattr(where, field)
        if value is not None:
            conditions.append(getattr(Chunk, field) == value)
    if where.fetched_after is not None:
        conditions.append(Chunk.last_fetched_at >= where.fetched_after)
    if where.fetched_before is not None:
        conditions.append(Chunk.last_fetched_at <= where.fetched_before)
    return conditions


@dataclass(frozen=True)
class _Scope:
    fingerprint: tuple[int, int, int]
    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]


class ExactScopeSearch:
    """Scores every chunk of a small filtered scope against the query vector."""

    def __init__(
        self, sessions: sessionmaker[Session], max_chunks: int, cache_vectors: int = 100_000
    ) -> None:
        self._sessions = sessions
        self._max_chunks = max_chunks
        self._cache_vectors = cache_vectors
        self._cache: OrderedDict[tuple[object, ...], _Scope] = OrderedDict()
        self._lock = threading.Lock()

    def query(
        self, vector: Vector, k: int, where: SearchFilter | None, model_version: str
    ) -> list[tuple[int, float]] | None:
        """Exact ``(chunk id, cosine similarity)`` best first, or None when the scope is too broad.

        A filter on nothing but tags or dates cannot use an index, so it is left to the vector index.
        """
        if where is None or not (
            where.sdk_name or where.document_type or where.category or where.document_types
        ):
            return None
        with self._sessions() as session:
            conditions = chunk_conditions(where, session.get_bind().dialect.name)
            count, id_sum, id_max = session.execute(
                select(
                    func.count(), func.coalesce(func.sum(Chunk.id), 0), func.coalesce(func.max(Chunk.id), 0)
                )
                .select_from(Chunk)
                .where(and_(*conditions))
            ).one()
            if count > self._max_chunks:
                return None
            if count == 0:
                return []
            fingerprint = (int(count), int(id_sum), int(id_max))
            if where.tags:
                scope = self._load(session, conditions, model_version, fingerprint, tags=set(where.tags))
            else:
                key = (
                    model_version,
                    where.sdk_name,
                    where.sdk_version,
                    where.document_type,
                    where.category,
                    where.fetched_after,
                    where.fetched_before,
                    where.document_types,
                    where.access,
                )
                scope = self._cached(key, fingerprint) or self._remember(
                    key, self._load(session, conditions, model_version, fingerprint, tags=set())
                )
        if len(scope.ids) == 0:
            return []
        scores = scope.matrix @ np.asarray(vector, dtype=np.float32)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(int(scope.ids[i]), float(scores[i])) for i in top]

    def _load(
        self,
        session: Session,
        conditions: list[ColumnElement[bool]],
        model_version: str,
        fingerprint: tuple[int, int, int],
        tags: set[str],
    ) -> _Scope:
        columns = (
            (Chunk.id, EmbeddingCacheEntry.vector, Chunk.tags)
            if tags
            else (Chunk.id, EmbeddingCacheEntry.vector)
        )
        statement = (
            select(*columns)
            .join(
                EmbeddingCacheEntry,
                and_(
                    EmbeddingCacheEntry.content_hash == Chunk.content_hash,
                    EmbeddingCacheEntry.model_version == model_version,
                ),
            )
            .where(and_(*conditions))
        )
        rows = session.execute(statement).all()
        if tags:
            rows = [row for row in rows if tags <= set(row[2] or ())]
        if not rows:
            return _Scope(fingerprint, np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(len(rows), -1)
        return _Scope(fingerprint, ids, matrix)

    def _cached(self, key: tuple[object, ...], fingerprint: tuple[int, int, int]) -> _Scope | None:
        with self._lock:
            scope = self._cache.get(key)
            if scope is None or scope.fingerprint != fingerprint:
                return None
            self._cache.move_to_end(key)
            return scope

    def _remember(self, key: tuple[object, ...], scope: _Scope) -> _Scope:
        with self._lock:
            self._cache[key] = scope
            self._cache.move_to_end(key)
            while (
                sum(len(s.ids) for s in self._cache.values()) > self._cache_vectors and len(self._cache) > 1
            ):
                self._cache.popitem(last=False)
        return scope
