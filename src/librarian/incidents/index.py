"""An in-memory exact index of incidents' problem vectors, with access masks and inverted lists.

Finding similar incidents scores every incident the caller may read: the text similarity of all of
them is one matrix product (50,000 incidents x 384 dimensions is about 5 ms on two cores), and the
structured signature only for the best candidates and for incidents sharing a service, a symptom
word or an error term (the inverted lists). Exact scoring means no approximate index can miss an
incident a filter hides, and the caller's grants are applied as a mask *before* ranking.

The matrix is read from the embedding cache (every incident's problem text was embedded when it was
stored) and kept while the table's largest id is unchanged: an incident's problem never changes under
its id and ids are never reused, so every new incident raises it. It is read from the primary key's
index in one round trip on any store; a row count was also compared once, but PostgreSQL answers
``count(*)`` by scanning (3-4 ms at 50,000 incidents, growing with the table). Nothing in Librarian
deletes incidents; one deleted by hand stays in the matrix until the next new incident, and is never
answered meanwhile: the fields read fresh for each answer (outcome, recurrence, related incidents)
come from the table, and a candidate missing there is skipped.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from librarian.embeddings.cache import EmbeddingCache
from librarian.incidents.models import Incident
from librarian.incidents.similarity import error_terms
from librarian.index.grant_masks import GrantMasks
from librarian.research.error_signature import terms_of_normalized

# The largest incident id when the matrix was read.
Fingerprint = int


@dataclass
class IncidentMatrix:
    """Every incident's id, problem vector, grants and normal forms, row-aligned."""

    fingerprint: Fingerprint
    ids: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    grants: list[frozenset[str]]
    normalized: list[dict[str, object]]
    # Each incident's normalised errors with their terms, parsed once at load.
    errors: list[list[tuple[str, frozenset[str]]]]
    # term -> rows: "service:x", "symptom:word", "error:term", "infra:x"
    postings: dict[str, list[int]]

    def __post_init__(self) -> None:
        self._masks = GrantMasks(self.grants)

    def mask(self, grants: tuple[str, ...] | None) -> npt.NDArray[np.bool_]:
        """Which rows a holder of ``grants`` may read (cached per grant set)."""
        return self._masks.mask(grants)


def posting_terms(normalized: dict[str, object]) -> set[str]:
    """The inverted-list keys of one incident's (or one query's) normal forms."""
    terms = {f"service:{service}" for service in normalized.get("services") or []}  # type: ignore[attr-defined]
    for words in normalized.get("symptoms") or []:  # type: ignore[attr-defined]
        terms.update(f"symptom:{word}" for word in words)
    for error in normalized.get("errors") or []:  # type: ignore[attr-defined]
        terms.update(f"error:{term}" for term in terms_of_normalized(str(error)) if not term.startswith("<"))
    infrastructure = normalized.get("infrastructure")
    if infrastructure:
        terms.add(f"infra:{infrastructure}")
    return terms


class IncidentIndex:
    """Loads and caches the :class:`IncidentMatrix` of the store."""

    def __init__(self, sessions: sessionmaker[Session], cache: EmbeddingCache) -> None:
        self._sessions = sessions
        self._cache = cache
        self._matrix: IncidentMatrix | None = None
        self._lock = threading.Lock()

    def matrix(self) -> IncidentMatrix:
        """The current matrix, reloaded when incidents were added."""
        with self._sessions() as session:
            fingerprint = int(session.scalar(select(func.max(Incident.id))) or 0)
            with self._lock:
                if self._matrix is not None and self._matrix.fingerprint == fingerprint:
                    return self._matrix
            rows = session.execute(
                select(
                    Incident.id, Incident.problem_hash, Incident.access_grants, Incident.normalized
                ).order_by(Incident.id)
            ).all()
        vectors = self._cache.lookup([row.problem_hash for row in rows])
        dimension = self._cache.embedder.dimension
        kept = [row for row in rows if row.problem_hash in vectors]
        matrix = (
            np.vstack([vectors[row.problem_hash].reshape(1, -1) for row in kept]).astype(np.float32)
            if kept
            else np.zeros((0, dimension), dtype=np.float32)
        )
        postings: dict[str, list[int]] = defaultdict(list)
        for position, row in enumerate(kept):
            for term in posting_terms(dict(row.normalized or {})):
                postings[term].append(position)
        built = IncidentMatrix(
            fingerprint=fingerprint,
            ids=np.fromiter((row.id for row in kept), dtype=np.int64, count=len(kept)),
            vectors=matrix,
            grants=[frozenset(row.access_grants or ()) for row in kept],
            normalized=[dict(row.normalized or {}) for row in kept],
            errors=[error_terms(list((row.normalized or {}).get("errors") or [])) for row in kept],
            postings=dict(postings),
        )
        with self._lock:
            self._matrix = built
        return built
