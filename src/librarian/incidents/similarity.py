"""Scoring how similar a past incident is to the problem at hand.

``score = weighted mean of the parts the query has``, with weights text 0.40, errors 0.25, symptoms
0.20, services 0.10, infrastructure 0.05 (a part the query leaves out drops out of the mean):

* text: cosine similarity of the problem texts (title, description, symptoms, errors, services);
* errors: the share of the query's error messages that match one of the incident's, both normalised
  as research normalises error text (equal, or near by research's error-similarity threshold);
* symptoms: the share of the query's symptoms matching one of the incident's (word sets, stemmed);
* services: the share of the query's services the incident affected (when the query lists none, 1
  if its error lines name one of the incident's services, as in ``pod checkout-7f9c``, else 0);
  infrastructure: equal or not.

Then what happened: an incident whose solution worked and did not recur is preferred (x1.05), one
that recurred is not (x0.90), one whose fix failed less so (x0.97). Finally users' verdicts: each
feature that matched (a service, a symptom word, an error) carries ``(1 + similar) / (1 + similar +
not similar)`` from the organisation's verdicts on pairs that shared it; their geometric mean ``p``
scales the score by ``0.7 + 0.3 p``, so pairs like ones marked "not similar" sink.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from librarian.incidents.signature import symptoms_match
from librarian.research.error_signature import NEAR_THRESHOLD, terms_of_normalized, terms_similarity

WEIGHTS = {"text": 0.40, "errors": 0.25, "symptoms": 0.20, "services": 0.10, "infrastructure": 0.05}
WORKED_AND_HELD = 1.05
RECURRED = 0.90
FIX_FAILED = 0.97


@dataclass
class Match:
    """How one incident matched a query: the score, its parts and what matched."""

    score: float
    parts: dict[str, float]
    matching_symptoms: list[str] = field(default_factory=list)
    matching_errors: list[str] = field(default_factory=list)
    matching_services: list[str] = field(default_factory=list)
    infrastructure: bool = False
    features: list[str] = field(default_factory=list)


def error_terms(errors: Sequence[str]) -> list[tuple[str, frozenset[str]]]:
    """Normalised errors with their terms, parsed once for many comparisons."""
    return [(error, terms_of_normalized(error)) for error in errors]


def _errors_match(first: tuple[str, frozenset[str]], second: tuple[str, frozenset[str]]) -> bool:
    """Equal normal forms, or near ones (research's error-similarity threshold)."""
    return first[0] == second[0] or terms_similarity(first[1], second[1]) >= NEAR_THRESHOLD


def structured_parts(
    query: Mapping[str, object],
    incident: Mapping[str, object],
    signature: Mapping[str, object],
    *,
    query_errors: list[tuple[str, frozenset[str]]] | None = None,
    incident_errors: list[tuple[str, frozenset[str]]] | None = None,
) -> Match:
    """The structured parts (errors, symptoms, services, infrastructure) of one incident's match.

    ``query`` and ``incident`` are normal forms (``ProblemSignature.normalized()``); ``signature`` is
    the incident's signature as given, to report its matching symptoms in its own words. The errors
    may come already parsed (:func:`error_terms`), as the similarity search passes them.
    """
    parts: dict[str, float] = {}
    match = Match(0.0, parts)
    if query_errors is None:
        query_errors = error_terms(list(query.get("errors") or []))  # type: ignore[call-overload]
    if incident_errors is None:
        incident_errors = error_terms(list(incident.get("errors") or []))  # type: ignore[call-overload]
    if query_errors:
        hits = [
            error
            for error, terms in query_errors
            if any(_errors_match((error, terms), o) for o in incident_errors)
        ]
        parts["errors"] = len(hits) / len(query_errors)
        match.matching_errors = hits
        match.features += [f"error:{error}" for error in hits]
    query_symptoms: Sequence[Sequence[str]] = query.get("symptoms") or []  # type: ignore[assignment]
    incident_symptoms: Sequence[Sequence[str]] = incident.get("symptoms") or []  # type: ignore[assignment]
    if query_symptoms:
        words = [frozenset(terms) for terms in incident_symptoms]
        matched_query = 0
        matched_incident: set[int] = set()
        for terms in query_symptoms:
            wanted = frozenset(terms)
            found = [index for index, theirs in enumerate(words) if symptoms_match(wanted, theirs)]
            if found:
                matched_query += 1
                matched_incident.update(found)
                match.features += [f"symptom:{word}" for word in sorted(wanted)]
        parts["symptoms"] = matched_query / len(query_symptoms)
        given: Sequence[str] = signature.get("symptoms") or []  # type: ignore[assignment]
        match.matching_symptoms = [given[index] for index in sorted(matched_incident) if index < len(given)]
    query_services: Sequence[str] = query.get("services") or []  # type: ignore[assignment]
    theirs: Sequence[str] = incident.get("services") or []  # type: ignore[assignment]
    if query_services:
        shared = [service for service in query_services if service in set(theirs)]
        parts["services"] = len(shared) / len(query_services)
        match.matching_services = shared
        match.features += [f"service:{service}" for service in shared]
    elif theirs and query.get("mentions"):
        # Nobody listed the affected services, but the error lines may name one of the incident's.
        mentioned = set(query.get("mentions") or [])  # type: ignore[call-overload]
        named = [service for service in theirs if service in mentioned]
        parts["services"] = 1.0 if named else 0.0
        match.matching_services = named
        match.features += [f"service:{service}" for service in named]
    if query.get("infrastructure"):
        match.infrastructure = query.get("infrastructure") == incident.get("infrastructure")
        parts["infrastructure"] = 1.0 if match.infrastructure else 0.0
    return match


def combine(match: Match, text: float, *, was_successful: bool | None, recurred: bool) -> float:
    """The final score of a match: weighted parts, then the outcome factor (see module doc)."""
    match.parts["text"] = max(0.0, text)
    total = sum(WEIGHTS[name] for name in match.parts)
    score = sum(WEIGHTS[name] * value for name, value in match.parts.items()) / total
    if recurred:
        score *= RECURRED
    elif was_successful is True:
        score *= WORKED_AND_HELD
    elif was_successful is False:
        score *= FIX_FAILED
    return score


def verdict_factor(features: Sequence[str], verdicts: Mapping[str, tuple[int, int]]) -> float:
    """``0.7 + 0.3 p`` with ``p`` the geometric mean of each matched feature's verdict ratio."""
    ratios = []
    for feature in features:
        similar, not_similar = verdicts.get(feature, (0, 0))
        if similar or not_similar:
            ratios.append((1 + similar) / (1 + similar + not_similar))
    if not ratios:
        return 1.0
    mean = math.exp(sum(math.log(ratio) for ratio in ratios) / len(ratios))
    return 0.7 + 0.3 * mean
