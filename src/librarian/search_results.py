"""Search results as the facade returns them: a chunk with its provenance and its scores."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from librarian.storage.models import Chunk, as_utc


@dataclass(frozen=True)
class SearchResult:
    """One search hit with its provenance."""

    chunk_id: int
    content: str
    score: float
    sdk_name: str | None
    sdk_version: str | None
    entity_name: str | None
    entity_type: str
    section_path: str
    source_url: str
    last_fetched_at: str
    embedding_model_version: str
    document_type: str | None
    category: str | None
    tags: list[str]
    attributes: dict[str, Any]
    vector_score: float | None
    lexical_score: float | None
    # The closest query this chunk's document was marked helpful for, when that raised it.
    learned_similarity: float | None = None
    # The stored document the chunk belongs to: what feedback (record_knowledge_feedback) names.
    document_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)


def search_result(
    chunk: Chunk,
    score: float,
    vector_score: float | None,
    lexical_score: float | None,
    learned_similarity: float | None = None,
) -> SearchResult:
    """A :class:`SearchResult` for a stored chunk with the scores a retriever gave it."""
    return SearchResult(
        chunk_id=chunk.id,
        content=chunk.content,
        score=round(score, 6),
        sdk_name=chunk.sdk_name,
        sdk_version=chunk.sdk_version,
        entity_name=chunk.entity_name,
        entity_type=chunk.entity_type,
        section_path=chunk.section_path,
        source_url=chunk.source_url,
        last_fetched_at=as_utc(chunk.last_fetched_at).isoformat(),
        embedding_model_version=chunk.embedding_model_version,
        document_type=chunk.document_type,
        category=chunk.category,
        tags=list(chunk.tags or []),
        attributes=dict(chunk.attributes or {}),
        vector_score=vector_score,
        lexical_score=lexical_score,
        learned_similarity=None if learned_similarity is None else round(learned_similarity, 2),
        document_id=chunk.document_id,
    )
