"""Standard ranking metrics over one query's ranked document ids and its relevant set."""

from __future__ import annotations

import math
from collections.abc import Sequence


def hit_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """1.0 when any relevant document is in the top ``k``."""
    return 1.0 if any(doc in relevant for doc in ranked[:k]) else 0.0


def recall_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """Share of the relevant documents found in the top ``k``."""
    if not relevant:
        return 0.0
    return len(set(ranked[:k]) & relevant) / len(relevant)


def mrr_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """Reciprocal rank of the first relevant document within the top ``k`` (0 when none)."""
    for position, doc in enumerate(ranked[:k], start=1):
        if doc in relevant:
            return 1.0 / position
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """Normalised discounted cumulative gain with binary relevance."""
    dcg = sum(
        1.0 / math.log2(position + 1) for position, doc in enumerate(ranked[:k], start=1) if doc in relevant
    )
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(len(relevant), k) + 1))
    return dcg / ideal if ideal else 0.0


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of ``values`` (nearest-rank with linear interpolation)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)
