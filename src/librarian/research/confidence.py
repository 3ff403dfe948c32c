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

# Fitted by bench/calibrate_confidence.py on 957 labelled questions, checked on 1,078 others
# (docs/research.md): the gorilla-torchhub and metatool questions, asked of an index missing a fifth
# of their records, and the AWS CLI questions whose options no indexed command declares
# (``coverage_gap``). Questions whose missing answer leaves no trace are checked, not fitted: their
# share is the benchmark's choice, and fitting it would lower every answer by that prior.
# ``option_match`` got no weight: no question of this model names an option that is declared.
WEIGHTS = {
    "cosine": 4.62,
    "margin": 4.992,
    "lexical": -0.605,
    "option_match": 0.0,
    "entity_match": -1.203,
    "coverage_gap": -3.293,
}
BIAS = -2.604


@dataclass(frozen=True)
class RankingFeatures:
    """What the ranking tells about how sure the top answer is."""

    cosine: float
    margin: float
    lexical: float
    option_match: float
    entity_match: float
    # The share of options and commands the question names that the index lacks (research/coverage.py).
    coverage_gap: float = 0.0


# Error-driven questions (options named in the question or error) are ranked differently (absolute
# cosine plus the option fit; research/error_evidence.py), so they have their own model, fitted by
# `bench/calibrate_confidence.py --cli aws` on 167 questions built from the AWS CLI's own worked
# examples (8 services) and checked on 204 others, asked of an index without two of the services and
# a fifth of the other commands (44 checked questions have no answer indexed; as above, those that
# leave no trace are not fitted). Here ``option_match`` is the option fit (0.5-1.0), not a 0/1 flag.
ERROR_WEIGHTS = {
    "cosine": 2.037,
    "margin": 8.319,
    "lexical": -0.951,
    "option_match": -0.553,
    "entity_match": -2.445,
    "coverage_gap": -3.353,
}
ERROR_BIAS = 1.331

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
# answer's confidence can then only go down. These factors are a rule, not a fit: whether a command is
# the same in a version that is not indexed cannot be labelled from the index (docs/research.md).
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
