"""Learning an organisation's fusion weight from the queries its readers found answered.

How much to trust the vector retriever against the keyword one depends on the corpus: on the
development sets, gorilla-torchhub's API records want a weight of about 0.3 and MetaTool's tool
descriptions about 0.7, and nothing a query looks like tells the two apart (docs/benchmarks.md). An
organisation's remembered verdicts (:mod:`librarian.knowledge.learned_search`) are labelled queries of its own
corpus, so each candidate weight can be scored on them: every remembered query is retrieved once by
both retrievers, the two lists are fused under each weight, and the weight whose fused ranking puts
the answered document highest (mean reciprocal rank in the top 10) wins, if it beats the configured
weight by a margin. Fewer than :data:`MIN_EXAMPLES` verdicts keep the configured weight.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from librarian.index.base import SearchFilter, Vector
from librarian.index.fusion import fuse

CANDIDATE_WEIGHTS = (0.2, 0.35, 0.5, 0.65, 0.8)
MIN_EXAMPLES = 30
# The most recent verdicts a fit reads (each costs one retrieval by both retrievers).
MAX_EXAMPLES = 300
# A weight must beat the configured one by this much mean reciprocal rank to replace it.
MARGIN = 0.01
DEPTH = 10

Hits = list[tuple[int, float]]
# Both retrievers' candidates for (query text, its vector, a filter): (vector hits, keyword hits).
Retrieve = Callable[[str, Vector, SearchFilter], tuple[Hits, Hits]]


@dataclass(frozen=True)
class Example:
    """One remembered query as both retrievers ranked it, and the chunks of the document it found."""

    vector_hits: list[tuple[int, float]]
    lexical_hits: list[tuple[int, float]]
    answer_chunks: frozenset[int]


def reciprocal_rank(example: Example, weight: float) -> float:
    """1 / the rank of the first answer chunk when the example's lists are fused at ``weight``."""
    for rank, hit in enumerate(fuse(example.vector_hits, example.lexical_hits, weight)[:DEPTH], start=1):
        if hit.chunk_id in example.answer_chunks:
            return 1.0 / rank
    return 0.0


def best_weight(examples: Sequence[Example], configured: float) -> float:
    """The candidate weight ranking the examples' answers best, or ``configured`` when none clearly does."""
    if len(examples) < MIN_EXAMPLES:
        return configured

    def mean_reciprocal_rank(weight: float) -> float:
        return sum(reciprocal_rank(example, weight) for example in examples) / len(examples)

    baseline = mean_reciprocal_rank(configured)
    scored = {weight: mean_reciprocal_rank(weight) for weight in CANDIDATE_WEIGHTS}
    best = max(scored, key=lambda weight: (scored[weight], -abs(weight - configured)))
    return best if scored[best] >= baseline + MARGIN else configured
