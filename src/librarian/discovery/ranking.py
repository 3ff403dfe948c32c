"""Ranking tools and verbs for a request, with a score, a confidence and the reasons.

    meaning  = cos(request, tool text)
    profile  = cos(request, tool text + the requests it served)     (= meaning when it served none)
    nearest  = the best cos(request, a request it served)           (0 when it served none)
    score    = 0.5 x meaning + 0.5 x profile + 0.3 x nearest  (+ 0.15 when the request names the tool)

The weights were chosen on a development split of MetaTool's queries that the reported figures never
see (docs/discovery.md). Only requests served for the caller's own organisation count: one team's
use never steers another's results. ``confidence`` maps the score onto 0-1 so that a caller can
threshold it (at 0.5 a novel verb is substituted); it is measured against precision in
``librarian eval tools``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from librarian.discovery.index import _WORD, LearnedRequests, ToolMatrix, VerbMatrix

MEANING_WEIGHT = 0.5
PROFILE_WEIGHT = 0.5
NEAREST_WEIGHT = 0.3
NAME_BONUS = 0.15
# Scores map to confidence linearly between these (measured on MetaTool, see docs/discovery.md).
CONFIDENCE_FLOOR = 0.30
CONFIDENCE_CEILING = 0.70


def confidence_of(score: float) -> float:
    """A 0-1 confidence for a ranking score."""
    span = CONFIDENCE_CEILING - CONFIDENCE_FLOOR
    return round(float(min(1.0, max(0.0, (score - CONFIDENCE_FLOOR) / span))), 3)


@dataclass(frozen=True)
class ToolFilters:
    """Which tools a search may return. ``None`` fields do not filter."""

    tool_type: str | None = None
    category: str | None = None
    capability: str | None = None
    health: str | None = None
    verb: str | None = None
    # Review: by default only active tools; an administrator reviewing imports asks for quarantined.
    statuses: tuple[str, ...] = ("active",)
    # By default a tool whose circuit breaker is open is left out; health="open" lists exactly those.
    include_open_circuits: bool = False


@dataclass(frozen=True)
class Ranked:
    """One ranked tool or verb with the parts of its score and why it matched."""

    entry_id: int
    score: float
    confidence: float
    meaning: float
    reasons: tuple[str, ...]


def _filter_mask(
    matrix: ToolMatrix, grants: tuple[str, ...] | None, filters: ToolFilters
) -> npt.NDArray[np.bool_]:
    """Rows a holder of ``grants`` may get through ``filters`` (cached per pair in the matrix)."""
    key = (grants, filters)
    found = matrix.filter_masks.get(key)
    if found is None:
        if len(matrix.filter_masks) > 256:
            matrix.filter_masks.clear()
        found = matrix.filter_masks[key] = _build_filter_mask(matrix, grants, filters)
    return found


def _build_filter_mask(
    matrix: ToolMatrix, grants: tuple[str, ...] | None, filters: ToolFilters
) -> npt.NDArray[np.bool_]:
    mask = matrix.readable(grants).copy()
    mask &= np.isin(matrix.statuses, list(filters.statuses))
    if filters.health is not None:
        mask &= matrix.health == filters.health
    elif not filters.include_open_circuits:
        mask &= matrix.health != "open"
    if filters.tool_type is not None:
        mask &= matrix.types == filters.tool_type
    if filters.category is not None:
        wanted = filters.category.lower()
        mask &= np.fromiter(((c or "").lower() == wanted for c in matrix.categories), bool, len(matrix.ids))
    if filters.capability is not None:
        wanted = filters.capability.lower()
        mask &= np.fromiter((wanted in c for c in matrix.capabilities), bool, len(matrix.ids))
    if filters.verb is not None:
        mask &= np.fromiter((filters.verb in v for v in matrix.verbs), bool, len(matrix.ids))
    return mask


def rank_tools(
    matrix: ToolMatrix,
    learned: LearnedRequests,
    query: npt.NDArray[np.float32],
    request: str,
    *,
    grants: tuple[str, ...] | None,
    organization_id: int,
    filters: ToolFilters,
    top_k: int,
) -> list[Ranked]:
    """The ``top_k`` best tools for ``request`` among those ``grants`` and ``filters`` let through."""
    if not len(matrix.ids):
        return []
    mask = _filter_mask(matrix, grants, filters)
    allowed = int(mask.sum())
    if not allowed:
        return []
    vector = query.reshape(-1).astype(np.float32)
    meaning = matrix.vectors @ vector
    profile = meaning.copy()
    nearest = np.zeros_like(meaning)
    served = np.zeros(len(meaning), dtype=np.int32)
    request_rows, request_vectors = learned.requests_of(organization_id)
    if len(request_rows):
        np.maximum.at(nearest, request_rows, request_vectors @ vector)
    profile_rows, profiles, counts = learned.profiles_of(organization_id)
    if len(profile_rows):
        profile[profile_rows] = profiles @ vector
        served[profile_rows] = counts
    score = MEANING_WEIGHT * meaning + PROFILE_WEIGHT * profile + NEAREST_WEIGHT * np.maximum(nearest, 0)
    named = _named_rows(matrix, request)
    for row in named:
        score[row] += NAME_BONUS
    score = np.where(mask, score, -np.inf)
    count = min(top_k, allowed)
    best = np.argpartition(-score, count - 1)[:count]
    best = best[np.argsort(-score[best], kind="stable")]
    ranked = []
    for row in best:
        reasons = [f"description matches by meaning ({meaning[row]:.2f})"]
        if served[row]:
            reasons.append(f"served {served[row]} similar request(s) before (closest {nearest[row]:.2f})")
        if row in named:
            reasons.append("the request names the tool")
        ranked.append(
            Ranked(
                int(matrix.ids[row]),
                round(float(score[row]), 4),
                confidence_of(float(score[row])),
                round(float(meaning[row]), 4),
                tuple(reasons),
            )
        )
    return ranked


def _named_rows(matrix: ToolMatrix, request: str) -> set[int]:
    """Rows whose every name word is in the request (an agent typing ``get_current_time``)."""
    words = set(_WORD.findall(request.lower().replace("_", " ")))
    if not words:
        return set()
    counts: dict[int, int] = {}
    for word in words:
        for row in matrix.names.get(word, ()):
            counts[row] = counts.get(row, 0) + 1
    return {row for row, hits in counts.items() if hits >= 2}


def rank_verbs(
    matrix: VerbMatrix,
    query: npt.NDArray[np.float32],
    *,
    grants: tuple[str, ...] | None,
    top_k: int,
    statuses: tuple[str, ...] = ("active",),
) -> list[Ranked]:
    """The ``top_k`` verbs closest in meaning to the query among those the caller may read."""
    if not len(matrix.ids):
        return []
    held = None if grants is None else set(grants)
    mask = np.fromiter(
        (
            (held is None or not held.isdisjoint(g)) and status in statuses
            for g, status in zip(matrix.grants, matrix.statuses, strict=True)
        ),
        dtype=bool,
        count=len(matrix.ids),
    )
    if not mask.any():
        return []
    meaning = matrix.vectors @ query.reshape(-1).astype(np.float32)
    meaning = np.where(mask, meaning, -np.inf)
    count = min(top_k, int(mask.sum()))
    best = np.argpartition(-meaning, count - 1)[:count]
    best = best[np.argsort(-meaning[best], kind="stable")]
    return [
        Ranked(
            int(matrix.ids[row]),
            round(float(meaning[row]), 4),
            confidence_of(float(meaning[row])),
            round(float(meaning[row]), 4),
            (f"description matches by meaning ({meaning[row]:.2f})",),
        )
        for row in best
    ]
