"""Fusing the vector and lexical retrievers' candidates into one ranking.

Fusion is relative-score fusion: each retriever's scores are min-max normalised over its own
candidates, then combined as ``w * vector + (1 - w) * lexical`` (a candidate missing from one list
gets 0 there). Unlike reciprocal-rank fusion it keeps how decisively a retriever prefers its top
hit, which matters for documentation where an exact entity name match is strong evidence
(measured in docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class FusedHit:
    """One fused candidate: the chunk id, the fused score and each retriever's raw score."""

    chunk_id: int
    score: float
    vector_score: float | None
    lexical_score: float | None
    # How close the query is to one this chunk's document answered before (knowledge/learned_search.py).
    learned_similarity: float | None = None


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
