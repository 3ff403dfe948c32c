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

from packaging.version import InvalidVersion, Version

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


# Error-driven questions (options named in the question or error) are ranked differently (absolute
# cosine plus the option fit; research/error_evidence.py), so they have their own model, fitted by
# `bench/calibrate_confidence.py --cli-store` on 216 questions built from the AWS CLI's own worked
# examples (8 services) and checked on 222 others: expected calibration error 0.073 (docs/research.md).
# Here ``option_match`` is the option fit (0.5-1.0), not a 0/1 flag.
ERROR_WEIGHTS = {
    "cosine": 0.864,
    "margin": 8.723,
    "lexical": -1.021,
    "option_match": -0.506,
    "entity_match": -2.146,
}
ERROR_BIAS = 2.389

MODELS = {"plain": (WEIGHTS, BIAS), "error_driven": (ERROR_WEIGHTS, ERROR_BIAS)}


def confidence(features: RankingFeatures, kind: str = "plain") -> float:
    """Probability (0..1) that the top snippet answers the question, rounded to 3 decimals.

    ``kind`` is ``plain`` or ``error_driven`` (the question or error named options).
    """
    weights, bias = MODELS[kind]
    z = bias + sum(weights[name] * getattr(features, name) for name in weights)
    return round(1.0 / (1.0 + math.exp(-z)), 3)


# The model above is fitted on questions asked of the version that answers them. When the version
# asked for is not indexed and another answers, the snippet can be right for the wrong version: the
# answer's confidence can then only go down. These factors are a rule, not a fit (issue 17 asks for a
# calibration set with such questions; until then the rule keeps a far version from scoring 0.95).
SAME_MAJOR_FACTOR = 0.8
OTHER_MAJOR_FACTOR = 0.4


def version_adjusted(
    score: float, requested: str | None, resolved: str | None, exact: bool
) -> tuple[float, str | None]:
    """``score`` lowered when ``resolved`` stands in for a ``requested`` version, and why."""
    if exact or resolved is None or requested is None:
        return score, None
    wanted, answered = _version(requested), _version(resolved)
    if wanted is not None and answered is not None and wanted.major == answered.major:
        factor, why = (
            SAME_MAJOR_FACTOR,
            f"{resolved} answers for {requested}, which is not indexed (same major)",
        )
    else:
        factor, why = (
            OTHER_MAJOR_FACTOR,
            (
                f"{resolved} answers for {requested}, which is not indexed and not the same major version: "
                "the command may differ there"
            ),
        )
    return round(score * factor, 3), f"confidence x{factor}: {why}"


def _version(text: str) -> Version | None:
    try:
        return Version(text.strip().lstrip("v"))
    except InvalidVersion:
        return None
