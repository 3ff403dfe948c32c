"""``search_knowledge``: documents ranked by relevance and usefulness, with highlighted snippets.

Retrieval is the store's hybrid chunk search with the caller's grants, document types, category, tags
and dates inside both retrievers' queries; chunks are then grouped by document. The pool is three
chunks per document wanted; filters the chunk indexes do not hold (severity, a minimum usefulness)
are applied to a pool eight times the limit, so they narrow results but never widen what the caller
may see.

Relevance is absolute, not relative to the other candidates: the cosine similarity between the query
and the document's best chunk (from the embedding cache, so keyword-only candidates are scored on the
same scale), plus 0.05 when the keyword index matched the document too. Hybrid fusion normalises
scores over its candidate list, which is right for picking candidates but would make two documents
with the same text score 1.0 and 0.5 when they are the only candidates.

Usefulness moves ranking by at most 15 % either way: ``score = relevance * (0.85 + 0.06 * u)`` with
``u`` the smoothed usefulness on a 0-5 scale (2.5, neutral, leaves the score unchanged). So of two
equally relevant documents the more useful comes first, while a highly rated but irrelevant document
never beats a relevant one by much.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import and_, select

from librarian.embeddings.cache import stored_vector
from librarian.errors import InvalidInputError
from librarian.index.query_terms import query_terms
from librarian.knowledge.access import Principal, Scope, can_read
from librarian.knowledge.documents import DOCUMENT_TYPES, SEVERITIES, document_view, flags_for
from librarian.storage.models import Chunk, Document, EmbeddingCacheEntry, as_utc

if TYPE_CHECKING:
    from librarian.app import Librarian

NEUTRAL_USEFULNESS = 2.5
KEYWORD_BONUS = 0.05
_SNIPPET_CHARS = 320
_POOL_FACTOR = 8
FILTER_FIELDS = (
    "document_type",
    "category",
    "tags",
    "created_after",
    "created_before",
    "severity",
    "min_usefulness_score",
    "sdk_name",
)


@dataclass(frozen=True)
class KnowledgeFilters:
    """The filters of ``search_knowledge`` (every one optional)."""

    document_type: tuple[str, ...] = ()
    category: str | None = None
    tags: tuple[str, ...] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None
    severity: tuple[str, ...] = ()
    min_usefulness_score: float | None = None
    sdk_name: str | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> KnowledgeFilters:
        """Filters from JSON; an unknown key or a value of the wrong type names the field."""
        values = dict(values or {})
        unknown = sorted(set(values) - set(FILTER_FIELDS))
        if unknown:
            raise InvalidInputError(
                f"filters: unknown filter {', '.join(map(repr, unknown))}",
                hint=f"use {', '.join(FILTER_FIELDS)}",
            )

        def strings(name: str) -> tuple[str, ...]:
            value = values.get(name)
            if value is None:
                return ()
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
                raise InvalidInputError(f"filters.{name}: expected a string or a list of strings")
            return tuple(items)

        def moment(name: str) -> datetime | None:
            value = values.get(name)
            if value is None or isinstance(value, datetime):
                return value
            try:
                return as_utc(datetime.fromisoformat(str(value)))
            except ValueError as exc:
                raise InvalidInputError(f"filters.{name}: not an ISO 8601 date: {value!r}") from exc

        def text(name: str) -> str | None:
            value = values.get(name)
            if value is not None and not isinstance(value, str):
                raise InvalidInputError(f"filters.{name}: expected a string")
            return value

        minimum = values.get("min_usefulness_score")
        if minimum is not None and (isinstance(minimum, bool) or not isinstance(minimum, int | float)):
            raise InvalidInputError("filters.min_usefulness_score: expected a number from 0 to 5")
        filters = cls(
            document_type=strings("document_type"),
            category=text("category"),
            tags=strings("tags"),
            created_after=moment("created_after"),
            created_before=moment("created_before"),
            severity=strings("severity"),
            min_usefulness_score=None if minimum is None else float(minimum),
            sdk_name=text("sdk_name"),
        )
        filters.check()
        return filters

    def check(self) -> None:
        """Refuse values no document can have, naming the field."""
        for severity in self.severity:
            if severity not in SEVERITIES:
                raise InvalidInputError(
                    f"filters.severity: unknown severity {severity!r}", hint=f"use {', '.join(SEVERITIES)}"
                )
        if self.min_usefulness_score is not None and not 0 <= self.min_usefulness_score <= 5:
            raise InvalidInputError("filters.min_usefulness_score: use a number from 0 to 5")


def usefulness_factor(usefulness: float) -> float:
    """How much a document's usefulness (0-5) scales its relevance: 0.85 to 1.15, 1.0 when neutral."""
    return 0.85 + 0.06 * max(0.0, min(5.0, usefulness))


def highlight(content: str, query: str, width: int = _SNIPPET_CHARS) -> tuple[str, list[list[int]]]:
    """A window of ``content`` around the first query term, and the ``[start, end)`` of every term in it.

    Terms match whole words by prefix, so ``crash`` marks ``crashed`` and ``crashes`` as the stemming
    lexical index would.
    """
    terms = [re.escape(term) for term in query_terms(query) if len(term) > 1]
    pattern = re.compile(rf"\b(?:{'|'.join(terms)})\w*", re.IGNORECASE) if terms else None
    first = pattern.search(content) if pattern else None
    start = 0 if first is None else max(0, first.start() - width // 4)
    if start > 0:
        space = content.rfind(" ", 0, start)
        start = space + 1 if space >= 0 and start - space < 40 else start
    snippet = content[start : start + width]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + width < len(content) else ""
    text = f"{prefix}{snippet}{suffix}"
    marks = (
        [[m.start(), m.end()] for m in pattern.finditer(text) if m.end() <= len(prefix) + len(snippet)]
        if pattern
        else []
    )
    return text, marks


def search_knowledge(
    lib: Librarian, principal: Principal, query: str, filters: KnowledgeFilters | None = None, limit: int = 10
) -> list[dict[str, Any]]:
    """The ``limit`` documents best matching ``query`` that ``principal`` may read.

    Raises:
        InvalidInputError: an empty query, a limit outside 1-50, an unknown filter value.
        ForbiddenError: a token without the ``read`` scope.
    """
    principal.require(Scope.READ, "searching knowledge")
    filters = filters or KnowledgeFilters()
    filters.check()
    if not 1 <= limit <= 50:
        raise InvalidInputError(f"limit: use 1 to 50, not {limit}")
    for kind in filters.document_type:
        if kind not in DOCUMENT_TYPES and kind not in ("sdk_reference", "document"):
            raise InvalidInputError(
                f"filters.document_type: unknown type {kind!r}",
                hint=f"use {', '.join((*DOCUMENT_TYPES, 'sdk_reference', 'document'))}",
            )
    hits = lib.search(
        query,
        sdk_name=filters.sdk_name,
        category=filters.category,
        tags=filters.tags,
        document_types=filters.document_type,
        fetched_after=filters.created_after,
        fetched_before=filters.created_before,
        top_k=_pool(filters, limit),
        principal=principal,
    )
    if not hits:
        return []
    query_vector = lib.cache.embed_query(query).reshape(-1)
    # One query reads each hit's document and, for keyword-only hits (the vector side scored the
    # rest), its stored vector: a separate embedding-cache lookup and document query each cost a
    # round trip (the lookup a second pooled connection too) on every search.
    keyword_only = [hit.chunk_id for hit in hits if hit.vector_score is None]
    stored = and_(
        EmbeddingCacheEntry.content_hash == Chunk.content_hash,
        EmbeddingCacheEntry.model_version == lib.cache.embedder.model_version,
        Chunk.id.in_(keyword_only),
    )
    with lib.sessions() as session:
        rows = session.execute(
            select(Chunk.id, Document, EmbeddingCacheEntry.vector)
            .join(Document, Document.id == Chunk.document_id)
            .outerjoin(EmbeddingCacheEntry, stored)
            .where(Chunk.id.in_([hit.chunk_id for hit in hits]))
        ).all()
        owners = {row[0]: (row[1].id, row[2]) for row in rows}
        # Access is checked again on the document itself (the source of truth) before it is shown.
        documents = {
            row[1].id: row[1]
            for row in rows
            if row[1].deleted_at is None and can_read(principal, row[1].access_grants)
        }
        best: dict[int, tuple[float, str]] = {}
        keyword_matched: set[int] = set()
        for hit in hits:
            owner = owners.get(hit.chunk_id)
            if owner is None:
                continue
            document_id, blob = owner
            cosine = hit.vector_score
            if cosine is None:
                vector = stored_vector(blob) if blob is not None else None
                cosine = float(np.dot(vector, query_vector)) if vector is not None else 0.0
            if hit.lexical_score is not None:
                keyword_matched.add(document_id)
            if document_id not in best or cosine > best[document_id][0]:
                best[document_id] = (cosine, hit.content)
        ranked = []
        for document_id, (cosine, content) in best.items():
            relevance = cosine + (KEYWORD_BONUS if document_id in keyword_matched else 0.0)
            document = documents.get(document_id)
            if document is None or not _passes(document, filters):
                continue
            score = relevance * usefulness_factor(document.usefulness_score)
            ranked.append((score, document_id, relevance, content, document))
        ranked.sort(key=lambda item: (-item[0], item[1]))
        flags = flags_for(session, [item[4] for item in ranked[:limit]])
        results = []
        for score, _, relevance, content, document in ranked[:limit]:
            snippet, marks = highlight(content, query)
            view = document_view(session, document, flags[document.id])
            results.append(
                {
                    "id": document.id,
                    "title": document.title,
                    "document_type": document.document_type,
                    "category": document.category,
                    "tags": view["tags"],
                    "severity": view["severity"],
                    "relevance_score": round(relevance, 6),
                    "score": round(score, 6),
                    "snippet": snippet,
                    "highlights": marks,
                    "last_used": view["last_used_at"],
                    "usefulness_score": view["usefulness_score"],
                    "feedback_count": view["feedback_count"],
                    "version": document.current_version_no,
                    "updated_at": view["updated_at"],
                    "flags": view["flags"],
                    "visibility": document.visibility,
                    "url": view["url"],
                    "source_url": document.source_url,
                }
            )
    return results


def _pool(filters: KnowledgeFilters, limit: int) -> int:
    """How many chunks to retrieve: three per document wanted, eight when filters apply afterwards."""
    if filters.severity or filters.min_usefulness_score is not None:
        return min(1000, max(60, limit * _POOL_FACTOR))
    return min(1000, max(30, limit * 3))


def _passes(document: Document, filters: KnowledgeFilters) -> bool:
    if filters.severity and (document.attributes or {}).get("severity") not in filters.severity:
        return False
    return filters.min_usefulness_score is None or document.usefulness_score >= filters.min_usefulness_score
