"""Hybrid retrieval: the vector and lexical retrievers run with the same filter, then fuse.

How the two lists become one is :mod:`librarian.index.fusion`; a search made for an organisation is
then reordered by what its documents answered before (:mod:`librarian.knowledge.learned_search`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

from librarian.embeddings.cache import EmbeddingCache
from librarian.index.base import SearchFilter, Vector, VectorIndex
from librarian.index.exact import ExactScopeSearch
from librarian.index.fusion import FusedHit, exact_first, fuse
from librarian.index.fusion_fit import Hits, Retrieve
from librarian.index.identifiers import lookup_identifiers
from librarian.index.lexical import LexicalIndex

logger = logging.getLogger(__name__)


class LearnedRanking(Protocol):
    """What search learns from readers' verdicts (:class:`librarian.knowledge.learned_search.LearnedRanking`).

    A protocol, so retrieval does not reach into the knowledge feature's tables.
    """

    @property
    def enabled(self) -> bool:
        """False when learning from use is turned off."""
        ...

    def rerank(
        self, organization_id: int, query_vector: Vector, fused: list[FusedHit], where: SearchFilter | None
    ) -> list[FusedHit]:
        """``fused`` rescored by what the organisation's verdicts say, best first."""
        ...

    def fusion_weight(self, organization_id: int) -> float | None:
        """The organisation's fitted fusion weight, if any."""
        ...

    def needs_fit(self, organization_id: int) -> bool:
        """Whether a fit of the organisation's fusion weight is due."""
        ...

    def fit_fusion_weight(self, organization_id: int, retrieve: Retrieve, configured: float) -> float:
        """Fit the organisation's fusion weight with ``retrieve`` (both retrievers' candidates); keep it."""
        ...

    def fit_failed(self, organization_id: int) -> None:
        """Keep the configured weight until enough new verdicts call for another try."""
        ...


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
        learned: LearnedRanking | None = None,
        active_index: Callable[[], VectorIndex] | None = None,
    ) -> None:
        self._cache = cache
        self._lexical = lexical
        self._exact = exact
        self._vector_weight = vector_weight
        self._candidates = candidates
        self._grants_of = grants_of
        self._learned = learned
        self._active_index = active_index
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="librarian-lexical")
        # Fits of organisations' fusion weights run here, off the search path (index/fusion_fit.py).
        self._fitter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="librarian-fusion-fit")
        self._fitting: set[int] = set()
        self._fitting_lock = threading.Lock()

    def retrieve(
        self,
        vectors: VectorIndex,
        query: str,
        top_k: int,
        where: SearchFilter | None = None,
        *,
        exact_identifiers: bool = True,
        learned_for: int | None = None,
    ) -> list[FusedHit]:
        """The ``top_k`` best chunks for ``query`` passing ``where``.

        With ``exact_identifiers``, chunks that hold an identifier of the query as written
        (``get_object_tagging``, ``--max-retries``, ``E1107``; :mod:`librarian.index.identifiers`)
        come first, when the query is about its identifiers (few other words) and the identifier is
        distinctive (at most :data:`EXACT_MAX_CHUNKS` chunks hold it).

        ``learned_for`` names the organisation whose readers' feedback reorders the candidates
        (:mod:`librarian.knowledge.learned_search`) and whose fitted fusion weight, if any, replaces the
        configured one (:mod:`librarian.index.fusion_fit`); ``None`` ranks by retrieval alone, as
        research does so that its confidence model sees the scores it was fitted on.

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
        fused = self._fuse_for(learned_for, query_vector, vector_hits, lexical_hits, where)
        if exact_future is not None:
            fused = exact_first(fused, exact_future.result())
        return fused[:top_k]

    def _fuse_for(
        self,
        organization_id: int | None,
        query_vector: Vector,
        vector_hits: list[tuple[int, float]],
        lexical_hits: list[tuple[int, float]],
        where: SearchFilter | None,
    ) -> list[FusedHit]:
        """The fused candidates, with what the organisation's verdicts taught when there is any.

        Learning is an optimisation: if it fails (the store busy, the embedder unreachable while
        loading the verdicts), the search answers with plain fusion and the failure is logged.
        """
        learned = self._learned
        if organization_id is None or learned is None or not learned.enabled:
            return fuse(vector_hits, lexical_hits, self._vector_weight)
        try:
            weight = self._fusion_weight_for(learned, organization_id)
            return learned.rerank(
                organization_id, query_vector, fuse(vector_hits, lexical_hits, weight), where
            )
        except Exception:
            logger.exception("learning from use failed for organisation %s; plain fusion", organization_id)
            return fuse(vector_hits, lexical_hits, self._vector_weight)

    def _fusion_weight_for(self, learned: LearnedRanking, organization_id: int) -> float:
        """The organisation's fitted weight (else the configured one); starts a fit when one is due.

        A configured weight of 0 or 1 (one retriever only) is an operator's choice and is kept.
        """
        if not 0 < self._vector_weight < 1 or self._active_index is None:
            return self._vector_weight
        if learned.needs_fit(organization_id):
            with self._fitting_lock:
                start = organization_id not in self._fitting
                self._fitting.add(organization_id)
            if start:
                try:
                    self._fitter.submit(self._fit_in_background, organization_id)
                except RuntimeError:  # closed: this retriever is shutting down
                    with self._fitting_lock:
                        self._fitting.discard(organization_id)
        fitted = learned.fusion_weight(organization_id)
        return self._vector_weight if fitted is None else fitted

    def _fit_in_background(self, organization_id: int) -> None:
        try:
            self.fit_fusion_weight(organization_id)
        except Exception:  # a fit is an optimisation: log it, keep searching with the configured weight
            logger.exception("could not fit the fusion weight of organisation %s", organization_id)
            if self._learned is not None:  # not again before enough new verdicts arrive
                self._learned.fit_failed(organization_id)
        finally:
            with self._fitting_lock:
                self._fitting.discard(organization_id)

    def fit_fusion_weight(self, organization_id: int) -> float:
        """Fit the organisation's fusion weight on its remembered verdicts now; returns the weight.

        Without learning from use, or with a configured weight of 0 or 1, nothing is fitted and the
        configured weight is returned.

        The remembered queries are retrieved by both retrievers here; which weight ranks their
        answers best is the learned ranking's to say (``LearnedRanking.fit_fusion_weight``).
        """
        if (
            self._learned is None
            or not self._learned.enabled
            or self._active_index is None
            or not 0 < self._vector_weight < 1
        ):
            return self._vector_weight
        index = self._active_index()
        k = self._candidates

        def retrieve(query: str, query_vector: Vector, where: SearchFilter) -> tuple[Hits, Hits]:
            return self._vector_hits(index, query_vector, k, where), self._lexical.query(query, k, where)

        weight = self._learned.fit_fusion_weight(organization_id, retrieve, self._vector_weight)
        logger.info("fusion weight of organisation %s: %.2f", organization_id, weight)
        return weight

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
        """Stop the worker threads."""
        self._worker.shutdown(wait=True)
        self._fitter.shutdown(wait=True, cancel_futures=True)
