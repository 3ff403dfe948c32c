"""A calibrated confidence for a research answer.

The confidence is the probability that the top snippet is the right entity, estimated by a logistic
model over features of the ranking (not a raw similarity): the top hit's cosine similarity, how far it
leads the runner-up, whether the keyword retriever found it too, and whether the option or entity
names in the question and error text match it. The weights are fitted by
``bench/calibrate_confidence.py`` on a labelled set built from the AWS CLI's own documentation; its
reliability table is in docs/research.md. Refit after changing ranking or features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Fitted by bench/calibrate_confidence.py on 1,126 labelled questions, checked on 1,060 others
# (expected calibration error 0.026; docs/research.md). Error texts naming options do not occur in
# that data, so ``option_match`` got no weight of its own: the option boost acts through ``margin``.
WEIGHTS = {
    "cosine": 5.001,
    "margin": 4.901,
    "lexical": -0.228,
    "option_match": 0.0,
    "entity_match": -0.723,
}
BIAS = -3.23


@dataclass(frozen=True)
class RankingFeatures:
    """What the ranking tells about how sure the top answer is."""

    cosine: float
    margin: float
    lexical: float
    option_match: float
    entity_match: float


def confidence(features: RankingFeatures) -> float:
    """Probability (0..1) that the top snippet answers the question, rounded to 3 decimals."""
    z = BIAS + sum(WEIGHTS[name] * getattr(features, name) for name in WEIGHTS)
    return round(1.0 / (1.0 + math.exp(-z)), 3)
