"""Finding the runbook for a problem: trigger patterns, meaning and effectiveness, with reasons.

Every active runbook the caller may read is scored by meaning at once (one matrix product over the
runbooks' text vectors, the caller's grants applied as a mask before ranking). Trigger patterns are
checked for the best of those and for runbooks sharing a word with the problem through an inverted
list (symptom words, services, the literal words of error patterns), so a runbook whose error
pattern matches is found even when its text is far from the problem's wording.

    score = (0.55 x meaning + 0.45 x triggers) x (0.85 + 0.3 x effectiveness)
    triggers = 0.45 x [an error pattern matches] + 0.40 x min(1, symptoms found / 2)
             + 0.15 x [a service is named]

The matrix is reloaded when runbooks are added, edited or retired (count, largest id and latest
update change); statistics are read fresh for the candidates of each query.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from librarian.embeddings.cache import EmbeddingCache
from librarian.index.grant_masks import GrantMasks
from librarian.runbooks.models import RunbookRow

# Runbooks whose triggers are checked: the best by meaning, and those sharing the most words with the
# problem (words shared by more runbooks than MAX_POSTING say little and are skipped).
MEANING_CANDIDATES = 50
TERM_CANDIDATES = 50
MAX_POSTING = 2000
_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]{2,}")
_LITERAL = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")


@dataclass(frozen=True)
class Triggers:
    """One runbook's trigger patterns in matching form."""

    symptoms: tuple[str, ...]
    services: tuple[str, ...]
    error_patterns: tuple[str, ...]

    @cached_property
    def compiled(self) -> tuple[re.Pattern[str], ...]:
        """The error patterns, compiled case-insensitively (invalid ones were refused on save)."""
        return tuple(re.compile(pattern, re.IGNORECASE) for pattern in self.error_patterns)

    def terms(self) -> set[str]:
        """Inverted-list keys: symptom words, services, literal words of error patterns."""
        terms = {word for symptom in self.symptoms for word in _WORD.findall(symptom)}
        terms.update(self.services)
        terms.update(word.lower() for pattern in self.error_patterns for word in _LITERAL.findall(pattern))
        return terms

    def explain(self, problem: str) -> tuple[float, list[str]]:
        """The trigger score (0-1) of ``problem`` and the reasons behind it."""
        reasons: list[str] = []
        found = 0.0
        words = set(_WORD.findall(problem))
        for symptom in self.symptoms:
            phrase_words = _WORD.findall(symptom)
            if symptom in problem:
                found += 1
                reasons.append(f"symptom {symptom!r} in the problem")
            elif phrase_words and all(word in words for word in phrase_words):
                found += 0.8
                reasons.append(f"the words of symptom {symptom!r} in the problem")
        errors = [pattern.pattern for pattern in self.compiled if pattern.search(problem)]
        reasons += [f"error pattern {pattern!r} matches" for pattern in errors[:3]]
        services = [service for service in self.services if service in words or service in problem]
        reasons += [f"service {service!r} named" for service in services[:3]]
        score = 0.45 * bool(errors) + 0.40 * min(1.0, found / 2) + 0.15 * bool(services)
        return score, reasons


@dataclass
class RunbookMatrix:
    """Every runbook's id, text vector, grants, activity and triggers, row-aligned."""

    fingerprint: tuple[int, int, str]
    ids: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    grants: list[frozenset[str]]
    active: npt.NDArray[np.bool_]
    triggers: list[Triggers]
    postings: dict[str, npt.NDArray[np.int64]]

    def __post_init__(self) -> None:
        self._masks = GrantMasks(self.grants)

    def mask(self, grants: tuple[str, ...] | None) -> npt.NDArray[np.bool_]:
        """Active rows a holder of ``grants`` may read."""
        readable: npt.NDArray[np.bool_] = self._masks.mask(grants) & self.active
        return readable


@dataclass(frozen=True)
class Candidate:
    """A runbook that matched, before its statistics are applied."""

    runbook_id: int
    meaning: float
    triggers: float
    reasons: list[str]


class RunbookIndex:
    """Loads and caches the :class:`RunbookMatrix`; ranks runbooks for a problem."""

    def __init__(self, sessions: sessionmaker[Session], cache: EmbeddingCache) -> None:
        self._sessions = sessions
        self._cache = cache
        self._matrix: RunbookMatrix | None = None
        self._lock = threading.Lock()

    def matrix(self) -> RunbookMatrix:
        """The current matrix, reloaded when runbooks were added, changed or removed."""
        with self._sessions() as session:
            count, id_max, updated = session.execute(
                select(func.count(), func.max(RunbookRow.id), func.max(RunbookRow.updated_at))
            ).one()
            fingerprint = (int(count or 0), int(id_max or 0), str(updated))
            with self._lock:
                if self._matrix is not None and self._matrix.fingerprint == fingerprint:
                    return self._matrix
            rows = session.execute(
                select(
                    RunbookRow.id,
                    RunbookRow.search_hash,
                    RunbookRow.access_grants,
                    RunbookRow.is_active,
                    RunbookRow.trigger_patterns,
                ).order_by(RunbookRow.id)
            ).all()
        vectors = self._cache.lookup([row.search_hash for row in rows])
        missing = [row.search_hash for row in rows if row.search_hash not in vectors]
        if missing:  # a runbook saved by a process that embedded with a different model: skip it
            rows = [row for row in rows if row.search_hash in vectors]
        dimension = self._cache.embedder.dimension
        matrix = (
            np.vstack([vectors[row.search_hash].reshape(1, -1) for row in rows]).astype(np.float32)
            if rows
            else np.zeros((0, dimension), dtype=np.float32)
        )
        triggers = [
            Triggers(
                tuple(s.lower() for s in (row.trigger_patterns or {}).get("symptoms") or ()),
                tuple(s.lower() for s in (row.trigger_patterns or {}).get("services") or ()),
                tuple((row.trigger_patterns or {}).get("error_patterns") or ()),
            )
            for row in rows
        ]
        postings: dict[str, list[int]] = defaultdict(list)
        for position, trigger in enumerate(triggers):
            for term in trigger.terms():
                postings[term].append(position)
        built = RunbookMatrix(
            fingerprint=fingerprint,
            ids=np.fromiter((row.id for row in rows), dtype=np.int64, count=len(rows)),
            vectors=matrix,
            grants=[frozenset(row.access_grants or ()) for row in rows],
            active=np.fromiter((bool(row.is_active) for row in rows), dtype=bool, count=len(rows)),
            triggers=triggers,
            postings={term: np.asarray(rows_of, dtype=np.int64) for term, rows_of in postings.items()},
        )
        with self._lock:
            self._matrix = built
        return built

    def candidates(self, text: str, grants: tuple[str, ...] | None) -> list[Candidate]:
        """Runbooks worth scoring for ``text``, with their meaning and trigger scores and reasons."""
        matrix = self.matrix()
        if not len(matrix.ids):
            return []
        mask = matrix.mask(grants)
        query = self._cache.embed_query(text)
        similarity = matrix.vectors @ query.reshape(-1).astype(np.float32)
        similarity = np.where(mask, similarity, -np.inf)
        count = min(MEANING_CANDIDATES, int(mask.sum()))
        rows: set[int] = set()
        if count:
            best = np.argpartition(-similarity, count - 1)[:count]
            rows.update(int(row) for row in best if np.isfinite(similarity[row]))
        problem = text.lower()
        shared = np.zeros(len(matrix.ids), dtype=np.int32)
        for term in set(_WORD.findall(problem)):
            posting = matrix.postings.get(term)
            if posting is not None and len(posting) <= MAX_POSTING:
                shared[posting] += 1
        shared[~mask] = 0
        hits = int(np.count_nonzero(shared))
        if hits:
            best_terms = np.argpartition(-shared, min(TERM_CANDIDATES, hits) - 1)[
                : min(TERM_CANDIDATES, hits)
            ]
            rows.update(int(row) for row in best_terms if shared[row] > 0)
        found = []
        for row in rows:
            trigger, reasons = matrix.triggers[row].explain(problem)
            found.append(Candidate(int(matrix.ids[row]), max(0.0, float(similarity[row])), trigger, reasons))
        return found


def score(candidate: Candidate, effectiveness: float | None) -> float:
    """The final score of a candidate given its runbook's effectiveness (none yet: one half)."""
    relevance = 0.55 * candidate.meaning + 0.45 * candidate.triggers
    return relevance * (0.85 + 0.3 * (0.5 if effectiveness is None else effectiveness))
