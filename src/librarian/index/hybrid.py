"""Hybrid retrieval: the vector and lexical retrievers run with the same filter, then fuse.

Fusion is relative-score fusion: each retriever's scores are min-max normalised over its own
candidates, then combined as ``w * vector + (1 - w) * lexical`` (a candidate missing from one list
gets 0 there). Unlike reciprocal-rank fusion it keeps how decisively a retriever prefers its top
hit, which matters for documentation where an exact entity name match is strong evidence
(measured in docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from librarian.embeddings.cache import EmbeddingCache
from librarian.index.base import SearchFilter, Vector, VectorIndex
from librarian.index.exact import ExactScopeSearch
from librarian.index.identifiers import lookup_identifiers
from librarian.index.lexical import LexicalIndex


@dataclass(frozen=True)
class FusedHit:
    """One fused candidate: the chunk id, the fused score and each retriever's raw score."""

    chunk_id: int
    score: float
    vector_score: float | None
    lexical_score: float | None


def _normalise(hits: list[tuple[int, float]]) -> dict[int, float]:
    if not hits:
        return {}
    scores = [score for _, score in hits]
    low, high = min(scores), max(scores)
    if high - low < 1e-12:
        return {chunk_id: 1.0 for chunk_id, _ in hits}
    return {chunk_id: (score - low) / (high - low) for chunk_id, score in hits}


def fuse(
    vector_hits: list[tuple[int, float]], lexical_hits: list[tuple[int, float]], vector_weight: float
) -> list[FusedHit]:
    """Relative-score fusion of two ranked lists, best first (ties broken by chunk id)."""
    vector_norm = _normalise(vector_hits)
    lexical_norm = _normalise(lexical_hits)
    vector_raw = dict(vector_hits)
    lexical_raw = dict(lexical_hits)
    fused = [
        FusedHit(
            chunk_id=chunk_id,
            score=vector_weight * vector_norm.get(chunk_id, 0.0)
            + (1.0 - vector_weight) * lexical_norm.get(chunk_id, 0.0),
            vector_score=vector_raw.get(chunk_id),
            lexical_score=lexical_raw.get(chunk_id),
        )
        for chunk_id in vector_norm.keys() | lexical_norm.keys()
    ]
    fused.sort(key=lambda hit: (-hit.score, hit.chunk_id))
    return fused


def exact_first(fused: list[FusedHit], exact: list[int]) -> list[FusedHit]:
    """``fused`` with the chunks of ``exact`` first (scored 1.0, the highest fused score), the rest after.

    An exact chunk neither retriever ranked joins with no retriever score.
    """
    if not exact:
        return fused
    held = set(exact)
    ranked = [replace(hit, score=1.0) for hit in fused if hit.chunk_id in held]  # in their fused order
    known = {hit.chunk_id for hit in ranked}
    unranked = [FusedHit(chunk_id, 1.0, None, None) for chunk_id in exact if chunk_id not in known]
    return ranked + unranked + [hit for hit in fused if hit.chunk_id not in held]


# A query identifier held by more chunks than this is common (``--help``): it changes nothing.
EXACT_MAX_CHUNKS = 20
GrantsOf = Callable[[Sequence[int]], dict[int, list[str]]]
# How many nearest neighbours to read, per result wanted, before checking the caller's grants.
ACCESS_OVERFETCH = 3


class HybridRetriever:
    """Runs both retrievers for a query and fuses their candidates.

    ``grants_of`` reads the stored grants of chunks by id. With it, an access-filtered vector query
    first reads ``3 x k`` nearest neighbours without the access clause and keeps those the caller may
    read (the grants come from the source of truth by primary key, about a millisecond); only when
    fewer than ``k`` pass does the vector index filter by itself. The answer is the same (the ``k``
    nearest readable chunks), but Chroma answers an unfiltered query without reading metadata, which
    is several times faster than its filtered scan.

    An index that evaluates filters inside its scan (``filters_in_scan``, pgvector) gets the access
    clause in its query instead: there the over-fetch only added work. On PostgreSQL at 100,000
    chunks it read the same ``3 x k`` HNSW candidates plus their rows, then spent a second round trip
    (a pooled connection, its ping, 180 JSON lists) fetching the grants the vector table already
    holds, and in one query of thirty fell back to a ``10 x k`` scan. Those grants reach the vector
    table through the outbox in the call that changes them, as every filtered vector query already
    relied on; ``search_knowledge`` checks each document's own grants again before showing it.
    """

    def __init__(
        self,
        cache: EmbeddingCache,
        lexical: LexicalIndex,
        exact: ExactScopeSearch | None = None,
        vector_weight: float = 0.5,
        candidates: int = 60,
        grants_of: GrantsOf | None = None,
    ) -> None:
        self._cache = cache
        self._lexical = lexical
        self._exact = exact
        self._vector_weight = vector_weight
        self._candidates = candidates
        self._grants_of = grants_of
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="librarian-lexical")

    def retrieve(
        self,
        vectors: VectorIndex,
        query: str,
        top_k: int,
        where: SearchFilter | None = None,
        *,
        exact_identifiers: bool = True,
    ) -> list[FusedHit]:
        """The ``top_k`` best chunks for ``query`` passing ``where``.

        With ``exact_identifiers``, chunks that hold an identifier of the query as written
        (``get_object_tagging``, ``--max-retries``, ``E1107``; :mod:`librarian.index.identifiers`)
        come first, when the query is about its identifiers (few other words) and the identifier is
        distinctive (at most :data:`EXACT_MAX_CHUNKS` chunks hold it).

        The lexical query runs on a worker thread while this one embeds the query and searches
        vectors: both spend their time outside the GIL (SQLite, torch), so on two cores the slower
        of the two sets the latency instead of their sum.
        """
        k = max(self._candidates, top_k)
        lexical_future: Future[list[tuple[int, float]]] | None = None
        if self._vector_weight < 1:
            lexical_future = self._worker.submit(self._lexical.query, query, k, where)
        identifiers = lookup_identifiers(query) if exact_identifiers else []
        exact_future = self._worker.submit(self._exact_chunks, identifiers, where) if identifiers else None
        query_vector = self._cache.embed_query(query)[0]
        vector_hits: list[tuple[int, float]] = []
        if self._vector_weight > 0:
            exact = (
                self._exact.query(query_vector, k, where, self._cache.embedder.model_version)
                if self._exact is not None
                else None
            )
            vector_hits = exact if exact is not None else self._vector_hits(vectors, query_vector, k, where)
        lexical_hits = lexical_future.result() if lexical_future is not None else []
        fused = fuse(vector_hits, lexical_hits, self._vector_weight)
        if exact_future is not None:
            fused = exact_first(fused, exact_future.result())
        return fused[:top_k]

    def _exact_chunks(self, identifiers: list[str], where: SearchFilter | None) -> list[int]:
        """The chunks holding a distinctive identifier of the query (none for a common one)."""
        found: list[int] = []
        for identifier in identifiers:
            holders = self._lexical.containing(identifier, EXACT_MAX_CHUNKS + 1, where)
            if len(holders) <= EXACT_MAX_CHUNKS:
                found += [chunk_id for chunk_id in holders if chunk_id not in found]
        return found

    def _vector_hits(
        self, vectors: VectorIndex, query_vector: Vector, k: int, where: SearchFilter | None
    ) -> list[tuple[int, float]]:
        if (
            where is None
            or where.access is None
            or self._grants_of is None
            or getattr(vectors, "filters_in_scan", False)
        ):
            return vectors.query(query_vector, k, where)
        loose = replace(where, access=None)
        wanted = ACCESS_OVERFETCH * k
        hits = vectors.query(query_vector, wanted, None if loose.is_empty() else loose)
        held = set(where.access)
        stored = self._grants_of([chunk_id for chunk_id, _ in hits])
        readable = [
            (chunk_id, score) for chunk_id, score in hits if not held.isdisjoint(stored.get(chunk_id, ()))
        ]
        if len(readable) >= k or len(hits) < wanted:
            return readable[:k]
        return vectors.query(query_vector, k, where)

    def close(self) -> None:
        """Stop the worker thread."""
        self._worker.shutdown(wait=True)
