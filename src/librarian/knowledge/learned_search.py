"""Learning from use: documents that answered similar searches before rank higher.

When a reader marks a search result helpful (``record_knowledge_feedback`` with the ``search_query``
it answered: ``helpful`` or 4-5 stars), that query and document are remembered. A later search of
the same organisation scores each candidate document by the closest of those queries::

    nearest(d) = max cos(query, a remembered query that d answered)    (0 below min_similarity)
    score      = (fused + weight x nearest(d)) / (1 + weight)

so fused relevance still decides between documents nobody has judged, and a document that answered
a near-identical question before comes up even when neither retriever ranked it: its best chunk for
the query joins the candidates with a fused score of 0 (so it can at most tie a top hit that led
both retrievers), if the search's filter lets it through.

Only the caller's own organisation's feedback counts, and the boost only reorders or adds chunks
that the search's filter (access included) lets through, so nothing becomes visible that was not.
Scores are rescaled only when a result the caller may see was raised: a caller's scores never reveal
feedback on documents it cannot read.

The same verdicts also choose the organisation's fusion weight (:mod:`librarian.index.fusion_fit`).

Negative verdicts are not used: a ``not_helpful`` vote lowers a document's usefulness score, but
says nothing about which query it failed. The weight (1.0) and the similarity floor (0.3) were
chosen on the learn halves alone of gorilla-torchhub and MetaTool (docs/benchmarks.md).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from sqlalchemy import Row, Select, and_, func, or_, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from librarian.embeddings.cache import EmbeddingCache
from librarian.index.base import SearchFilter, Vector
from librarian.index.exact import chunk_conditions
from librarian.index.fusion import FusedHit
from librarian.index.fusion_fit import MAX_EXAMPLES, MIN_EXAMPLES, Example, Retrieve, best_weight
from librarian.knowledge.access import PUBLIC_GRANT
from librarian.knowledge.models import KnowledgeFeedback
from librarian.storage import repository
from librarian.storage.models import Chunk, Document

# An organisation's remembered queries are capped (the newest are kept): every search of the
# organisation scores all of them, about 3 ms at this size on one core.
_MAX_REMEMBERED = 20_000


# (feedback id, document id, query, author) rows, and the statement that reads them.
_RememberedRow = Row[int, int, str | None, int]
_RememberedQuery = Select[int, int, str | None, int]

# A fusion weight is fitted again once the remembered queries grew by a quarter, or by a quarter of
# what a fit reads, whichever comes first.
REFIT_GROWTH = 0.25

# At most this many remembered documents no retriever ranked join one search (the closest of those
# the search's filter lets through): each costs a read of its chunks' vectors.
_MAX_ADDED = 10
# How many of the closest remembered documents are checked against the filter to find them.
_ADDED_CHECKED = 200


@dataclass(frozen=True)
class _Answered:
    """The remembered queries of one organisation: a matrix of their vectors and their documents."""

    fingerprint: tuple[int, int]
    documents: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]


def positive_feedback() -> ColumnElement[bool]:
    """The SQL condition of a verdict that says the document answered its query.

    The rating decides when there is one, as it does for usefulness (4 or 5 stars); otherwise the
    verdict must be ``helpful``. ``was_used`` alone is not enough: an ``outdated`` page was used too.
    """
    return or_(
        KnowledgeFeedback.rating >= 4,
        and_(KnowledgeFeedback.rating.is_(None), KnowledgeFeedback.feedback_type == "helpful"),
    )


def remembered_verdicts(organization_id: int) -> Select[int, int, str | None, int]:
    """(feedback id, document id, query, author) of the organisation's verdicts that search learns from:
    positive, with the query they answered, on a document not deleted."""
    return (
        select(
            KnowledgeFeedback.id,
            KnowledgeFeedback.document_id,
            KnowledgeFeedback.search_query,
            KnowledgeFeedback.user_id,
        )
        .join(Document, Document.id == KnowledgeFeedback.document_id)
        .where(
            KnowledgeFeedback.organization_id == organization_id,
            KnowledgeFeedback.search_query.is_not(None),
            positive_feedback(),
            Document.deleted_at.is_(None),
        )
    )


class LearnedRanking:
    """Reorders a search's fused candidates by the queries their documents answered before."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        cache: EmbeddingCache,
        *,
        weight: float = 1.0,
        min_similarity: float = 0.3,
    ) -> None:
        self._sessions = sessions
        self._cache = cache
        self._weight = weight
        self._min_similarity = min_similarity
        self._answered: dict[int, _Answered] = {}
        # Organisation -> (how many queries were remembered when it was fitted, its fusion weight).
        self._fitted: dict[int, tuple[int, float | None]] = {}
        self._loading: dict[int, threading.Lock] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """False when the ``search_learned_weight`` setting is 0."""
        return self._weight > 0

    def nearest_documents(self, organization_id: int, query_vector: Vector) -> dict[int, float]:
        """Document id -> the similarity of the closest query it answered (at or above the floor)."""
        answered = self._answered_of(organization_id)
        if answered is None:
            return {}
        similarities = answered.vectors @ np.asarray(query_vector, dtype=np.float32)
        keep = np.flatnonzero(similarities >= self._min_similarity)
        if len(keep) == 0:
            return {}
        # Closest first, then the first row of each document is its best.
        keep = keep[np.argsort(-similarities[keep], kind="stable")]
        documents, first = np.unique(answered.documents[keep], return_index=True)
        return {
            int(document_id): float(similarities[keep[row]])
            for document_id, row in zip(documents, first, strict=True)
        }

    def fusion_weight(self, organization_id: int) -> float | None:
        """The weight fitted on the organisation's verdicts (:mod:`~librarian.index.fusion_fit`), if any."""
        with self._lock:
            fitted = self._fitted.get(organization_id)
        return None if fitted is None else fitted[1]

    def needs_fit(self, organization_id: int) -> bool:
        """Whether the organisation has enough verdicts, and enough new ones since its last fit."""
        with self._lock:
            answered = self._answered.get(organization_id)
            fitted = self._fitted.get(organization_id)
        remembered = 0 if answered is None else len(answered.documents)
        if remembered < MIN_EXAMPLES:
            return False
        if fitted is None:
            return True
        growth = min(fitted[0] * REFIT_GROWTH, MAX_EXAMPLES * REFIT_GROWTH)
        return remembered - fitted[0] >= max(growth, 1)

    def fit_fusion_weight(self, organization_id: int, retrieve: Retrieve, configured: float) -> float:
        """Fit the organisation's fusion weight on its remembered verdicts; returns and keeps it.

        Each of the newest distinct remembered queries (:data:`~librarian.index.fusion_fit.MAX_EXAMPLES`)
        is retrieved by ``retrieve`` as its author could read, minus team grants (a conservative
        view: a team-only document is then not found, and that example counts for no weight); the
        weight whose fusion ranks the answered documents best is kept
        (:func:`~librarian.index.fusion_fit.best_weight`).
        """
        answered = self._answered_of(organization_id)
        remembered = 0 if answered is None else len(answered.documents)
        queries = self._fit_queries(organization_id)
        vectors = self._cache.embed_documents([query for query, _, _ in queries])
        retrieved = [
            (document_id, *retrieve(query, vector, SearchFilter(access=grants)))
            for (query, document_id, grants), vector in zip(queries, vectors, strict=True)
        ]
        with self._sessions() as session:
            document_of = repository.chunk_documents(
                session,
                [
                    chunk_id
                    for _, vector_hits, lexical_hits in retrieved
                    for chunk_id, _ in vector_hits + lexical_hits
                ],
            )
        examples = [
            Example(
                vector_hits,
                lexical_hits,
                frozenset(
                    chunk_id
                    for chunk_id, _ in vector_hits + lexical_hits
                    if document_of.get(chunk_id) == document_id
                ),
            )
            for document_id, vector_hits, lexical_hits in retrieved
        ]
        weight = best_weight([example for example in examples if example.answer_chunks], configured)
        with self._lock:
            self._fitted[organization_id] = (remembered, weight)
        return weight

    def fit_failed(self, organization_id: int) -> None:
        """Keep the configured weight until enough new verdicts call for another try."""
        with self._lock:
            answered = self._answered.get(organization_id)
            self._fitted[organization_id] = (0 if answered is None else len(answered.documents), None)

    def _fit_queries(self, organization_id: int) -> list[tuple[str, int, tuple[str, ...]]]:
        """The newest distinct remembered (query, document id, its author's grants without teams)."""
        newest = remembered_verdicts(organization_id).order_by(KnowledgeFeedback.id.desc())
        with self._sessions() as session:
            rows = session.execute(newest.limit(4 * MAX_EXAMPLES)).all()
        examples: dict[tuple[str, int], tuple[str, ...]] = {}
        for _, document_id, query, user_id in rows:
            text = str(query or "").strip()
            if text and (text, document_id) not in examples:
                grants = (PUBLIC_GRANT, f"org:{organization_id}", f"user:{user_id}")
                examples[(text, int(document_id))] = grants
            if len(examples) >= MAX_EXAMPLES:
                break
        return [(text, document_id, grants) for (text, document_id), grants in examples.items()]

    def rerank(
        self, organization_id: int, query_vector: Vector, fused: list[FusedHit], where: SearchFilter | None
    ) -> list[FusedHit]:
        """``fused`` rescored by the queries each document answered, best first, learned documents added.

        A document that answered a similar query but has no chunk among ``fused`` joins with its chunk
        closest to the query, if ``where`` lets that chunk through.
        """
        nearest = self.nearest_documents(organization_id, query_vector)
        if not nearest:
            return fused
        with self._sessions() as session:
            document_of = repository.chunk_documents(session, [hit.chunk_id for hit in fused])
            present = set(document_of.values())
            missing = sorted(
                (document_id for document_id in nearest if document_id not in present),
                key=lambda document_id: -nearest[document_id],
            )[:_ADDED_CHECKED]
            # The filter first, then the closest few: documents the search may not show must not
            # take the places of those it may.
            shown = self._passing(session, missing, where) if missing else set()
            closest = [document_id for document_id in missing if document_id in shown][:_MAX_ADDED]
            added = self._best_chunks(session, closest, query_vector, where) if closest else {}
        candidates = [
            replace(hit, learned_similarity=nearest.get(document_of.get(hit.chunk_id, -1))) for hit in fused
        ]
        candidates += [
            FusedHit(chunk_id, 0.0, vector_score, None, learned_similarity=nearest[document_id])
            for document_id, (chunk_id, vector_score) in added.items()
        ]
        if all(hit.learned_similarity is None for hit in candidates):
            return fused  # what was learned concerns documents this search may not show
        scale = 1.0 + self._weight
        rescored = [
            replace(hit, score=(hit.score + self._weight * (hit.learned_similarity or 0.0)) / scale)
            for hit in candidates
        ]
        rescored.sort(key=lambda hit: (-hit.score, hit.chunk_id))
        return rescored

    @staticmethod
    def _passing(session: Session, document_ids: list[int], where: SearchFilter | None) -> set[int]:
        """Those of ``document_ids`` whose first chunk ``where`` lets through (tags are checked later).

        A document's chunks share what a filter reads (SDK and version, labels, access grants: copies
        of the document's and its source's), so its first chunk stands for all; reading every chunk
        of a large page only to reject it cost more than the rest of the search.
        """
        first_chunk = (
            select(Chunk.id)
            .where(Chunk.document_id == Document.id)
            .order_by(Chunk.id)
            .limit(1)
            .correlate(Document)
            .scalar_subquery()
        )
        firsts = [
            chunk_id
            for chunk_id in session.scalars(select(first_chunk).where(Document.id.in_(document_ids)))
            if chunk_id is not None
        ]
        if not firsts:
            return set()
        conditions: list[ColumnElement[bool]] = [Chunk.id.in_(firsts)]
        if where is not None:
            conditions += chunk_conditions(where, session.get_bind().dialect.name)
        return set(session.scalars(select(Chunk.document_id).where(and_(*conditions))))

    def _best_chunks(
        self,
        session: Session,
        document_ids: list[int],
        query_vector: Vector,
        where: SearchFilter | None,
    ) -> dict[int, tuple[int, float]]:
        """Document id -> (its chunk closest to the query, their cosine), of chunks ``where`` passes."""
        conditions: list[ColumnElement[bool]] = [Chunk.document_id.in_(document_ids)]
        if where is not None:
            conditions += chunk_conditions(where, session.get_bind().dialect.name)
        rows = session.execute(
            select(Chunk.id, Chunk.document_id, Chunk.tags, Chunk.content_hash).where(and_(*conditions))
        ).all()
        wanted_tags = set(where.tags) if where is not None else set()
        rows = [row for row in rows if not wanted_tags or wanted_tags <= set(row.tags or ())]
        vectors = self._cache.lookup([row.content_hash for row in rows])
        query = np.asarray(query_vector, dtype=np.float32)
        best: dict[int, tuple[int, float]] = {}
        for chunk_id, document_id, _, digest in rows:
            if digest not in vectors:
                continue
            similarity = float(vectors[digest] @ query)
            if document_id not in best or similarity > best[document_id][1]:
                best[document_id] = (chunk_id, similarity)
        return best

    def _answered_of(self, organization_id: int) -> _Answered | None:
        """The organisation's remembered queries, read again only when its feedback changed.

        What changed is told by the count and last id of all the organisation's verdicts (an
        index-only read). New verdicts are appended (only their queries are embedded) and the oldest
        beyond :data:`_MAX_REMEMBERED` dropped; anything else (a verdict deleted) reads the whole set
        again. A document deleted meanwhile stays in the set until such a full read, harmlessly (it
        has no chunks left to raise or add); one restored comes back at the next full read. One
        search per organisation loads at a time; the others wait for its result.
        """
        with self._lock:
            loading = self._loading.setdefault(organization_id, threading.Lock())
        with loading:
            return self._load_answered(organization_id)

    def _load_answered(self, organization_id: int) -> _Answered | None:
        ours = KnowledgeFeedback.organization_id == organization_id
        with self._lock:
            known = self._answered.get(organization_id)
        with self._sessions() as session:
            count, last_id = session.execute(
                select(func.count(), func.coalesce(func.max(KnowledgeFeedback.id), 0)).where(ours)
            ).one()
            fingerprint = (int(count), int(last_id))
            if known is not None and known.fingerprint == fingerprint:
                return known if len(known.documents) else None
            remembered = remembered_verdicts(organization_id)
            appended_only = False
            if known is not None:
                # Verdicts up to the fingerprint's last id only: one committed since is for the next read.
                between = and_(KnowledgeFeedback.id > known.fingerprint[1], KnowledgeFeedback.id <= last_id)
                newer_count = session.scalar(select(func.count()).where(ours, between)) or 0
                appended_only = known.fingerprint[0] + newer_count == count
            if known is not None and appended_only:
                newer = remembered.where(between).order_by(KnowledgeFeedback.id)
                appended = self._remembered(fingerprint, session.execute(newer).all())
                answered = _Answered(
                    fingerprint,
                    np.concatenate([known.documents, appended.documents])[-_MAX_REMEMBERED:],
                    np.vstack([known.vectors, appended.vectors])[-_MAX_REMEMBERED:],
                )
            else:
                answered = self._remembered(fingerprint, self._all_rows(session, remembered, last_id))
        with self._lock:
            self._answered[organization_id] = answered
        return answered if len(answered.documents) else None

    @staticmethod
    def _all_rows(session: Session, remembered: _RememberedQuery, last_id: int) -> list[_RememberedRow]:
        """The newest :data:`_MAX_REMEMBERED` remembered queries up to ``last_id``, oldest first."""
        newest = (
            remembered.where(KnowledgeFeedback.id <= last_id)
            .order_by(KnowledgeFeedback.id.desc())
            .limit(_MAX_REMEMBERED)
        )
        return list(reversed(session.execute(newest).all()))

    def _remembered(self, fingerprint: tuple[int, int], rows: Sequence[_RememberedRow]) -> _Answered:
        """The queries of ``rows`` embedded (through the embedding cache) beside their documents."""
        kept = [(int(row[1]), str(row[2] or "").strip()) for row in rows]
        kept = [(document_id, text) for document_id, text in kept if text]
        if not kept:
            empty = np.zeros((0, self._cache.embedder.dimension), dtype=np.float32)
            return _Answered(fingerprint, np.zeros(0, dtype=np.int64), empty)
        vectors = self._cache.embed_documents([text for _, text in kept])
        return _Answered(
            fingerprint,
            np.fromiter((document_id for document_id, _ in kept), dtype=np.int64, count=len(kept)),
            np.asarray(vectors, dtype=np.float32),
        )
