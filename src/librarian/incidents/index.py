"""An in-memory exact index of incidents' problem vectors, with access masks and inverted lists.

Finding similar incidents scores every incident the caller may read: the text similarity of all of
them is one matrix product (50,000 incidents x 384 dimensions is about 5 ms on two cores), and the
structured signature only for the best candidates and for incidents sharing a service, a symptom
word or an error term (the inverted lists). Exact scoring means no approximate index can miss an
incident a filter hides, and the caller's grants are applied as a mask *before* ranking.

The matrix is read from the embedding cache (every incident's problem text was embedded when it was
stored) and kept while the recent end of the table is as it was read: the count and largest id of
the rows above a floor :data:`RECENT_IDS` below the largest id read. An incident's problem never
changes under its id and ids are never reused, so a new incident raises the largest id, and one whose
transaction committed after a later id's (PostgreSQL hands out ids before commit) raises the count.
One indexed range read of at most a few thousand ids; the whole table's ``count(*)``, compared
before, is a scan on PostgreSQL (3-4 ms at 50,000 incidents, growing with the table). An incident
deleted by hand below the floor stays in the matrix until it is next read, and is never answered
meanwhile: the fields read fresh for each answer (outcome, recurrence, related incidents) come from
the table, and a candidate missing there is skipped.
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

# How far below the largest id read the freshness check looks: a transaction that commits after this
# many later ids did is not expected (imports and investigations commit within seconds).
RECENT_IDS = 5_000


@dataclass
class IncidentMatrix:
    """Every incident's id, problem vector, grants and normal forms, row-aligned."""

    # Every id read from the table, ascending (rows without a stored vector included).
    read_ids: npt.NDArray[np.int64]
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

    def floor(self) -> int:
        """The id above which the freshness check compares the table with what was read."""
        return max(0, int(self.read_ids[-1]) - RECENT_IDS) if len(self.read_ids) else 0

    def recent(self, floor: int) -> tuple[int, int]:
        """How many ids above ``floor`` were read, and the largest (0 when none)."""
        above = self.read_ids[np.searchsorted(self.read_ids, floor, side="right") :]
        return len(above), int(above[-1]) if len(above) else 0


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
        """The current matrix, reloaded when incidents were added (or removed near the end)."""
        with self._lock:
            cached = self._matrix
        with self._sessions() as session:
            if cached is not None:
                floor = cached.floor()
                count, largest = session.execute(
                    select(func.count(), func.max(Incident.id)).where(Incident.id > floor)
                ).one()
                if cached.recent(floor) == (int(count), int(largest or 0)):
                    return cached
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
            read_ids=np.fromiter((row.id for row in rows), dtype=np.int64, count=len(rows)),
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
