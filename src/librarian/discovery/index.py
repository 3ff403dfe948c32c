"""In-memory exact indexes of tools, verbs and the requests tools were used for.

Every tool the caller may use is scored by meaning at once: one matrix product over the tools' text
vectors (10,000 tools x 384 dimensions is about 1 ms on two cores), with the caller's grants, the
filters (type, category, capability, health) and the review status applied as a mask *before*
ranking, so a filter never returns fewer than ``top_k`` results and nothing hidden leaks through a
count. The vectors were embedded when each entry was saved and are read from the embedding cache
(the relational store), so every server process of a deployment loads the same index.

Why not a vector-store collection, as the design sketches: measured on this machine with 10,000
tools, embedded Chroma answered a query with an access filter in 13.4 ms (p50) and with a type filter
in 64.6 ms, against the 15 ms budget for the whole search; the exact matrix answers in about 1 ms and
cannot miss an entry a filter hides. See docs/discovery.md.

Learned requests (the requests a tool was chosen for and served) are loaded incrementally: uses are
only ever appended, so a reload reads uses with ids above the last one seen.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from librarian.discovery.models import ToolRow, ToolUse, VerbRow
from librarian.discovery.search_text import words_of
from librarian.discovery.views import tool_summary
from librarian.embeddings.cache import EmbeddingCache
from librarian.index.grant_masks import GrantMasks

Fingerprint = tuple[int, int, str]
# How long a process trusts its matrices before asking the store whether another process changed the
# registry (its own changes invalidate them at once): the check is a query per search otherwise.
RECHECK_SECONDS = 1.0
# Uses re-read below the highest id seen, for ids that committed out of order.
USE_ID_WINDOW = 1000
_WORD = re.compile(r"[a-z0-9]{3,}")


@contextmanager
def writing(sessions: sessionmaker[Session], changed: Callable[[], None]) -> Iterator[Session]:
    """A write transaction of the registry; ``changed`` runs after it commits (the index of this
    process then reloads at its next search instead of up to RECHECK_SECONDS later)."""
    with sessions.begin() as session:
        yield session
    changed()


def _stack(vectors: list[npt.NDArray[np.float32]], dimension: int) -> npt.NDArray[np.float32]:
    if not vectors:
        return np.zeros((0, dimension), dtype=np.float32)
    return np.vstack([vector.reshape(1, -1) for vector in vectors]).astype(np.float32)


@dataclass
class LearnedRequests:
    """Requests tools were used for and succeeded at, with each tool's learned profile.

    A tool's profile in an organisation is its text vector plus the sum of the vectors of the
    requests it served there (normalised when read): a tool drifts towards the way that
    organisation actually asks for it. Arrays are rebuilt lazily after requests were appended.
    """

    last_use_id: int = 0
    # Use ids read in: the re-read window below may return them again.
    seen: set[int] = field(default_factory=set)
    # When the store was last asked for new uses (monotonic seconds).
    checked_at: float = 0.0
    rows: list[int] = field(default_factory=list)
    organizations: list[int] = field(default_factory=list)
    vectors: list[npt.NDArray[np.float32]] = field(default_factory=list)
    sums: dict[tuple[int, int], npt.NDArray[np.float32]] = field(default_factory=dict)
    counts: dict[tuple[int, int], int] = field(default_factory=dict)
    _arrays: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = field(default_factory=dict)
    _profiles: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], npt.NDArray[np.int64]]] = (
        field(default_factory=dict)
    )

    def append(
        self, row: int, organization_id: int, vector: npt.NDArray[np.float32], base: npt.NDArray[np.float32]
    ) -> None:
        """Add one served request of the tool at matrix ``row`` (``base``: its text vector)."""
        self.rows.append(row)
        self.organizations.append(organization_id)
        self.vectors.append(vector)
        key = (organization_id, row)
        self.sums[key] = self.sums.get(key, base) + vector
        self.counts[key] = self.counts.get(key, 0) + 1
        self._arrays.pop(organization_id, None)
        self._profiles.pop(organization_id, None)

    def requests_of(self, organization_id: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The matrix rows and vectors of the requests served in ``organization_id``."""
        found = self._arrays.get(organization_id)
        if found is None:
            keep = [i for i, org in enumerate(self.organizations) if org == organization_id]
            rows = np.asarray([self.rows[i] for i in keep], dtype=np.int64)
            vectors = (
                np.vstack([self.vectors[i].reshape(1, -1) for i in keep]).astype(np.float32)
                if keep
                else np.zeros((0, 1), dtype=np.float32)
            )
            found = self._arrays[organization_id] = (rows, vectors)
        return found

    def profiles_of(
        self, organization_id: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """The rows with a profile in ``organization_id``, their normalised profiles and use counts."""
        found = self._profiles.get(organization_id)
        if found is None:
            keys = [key for key in self.sums if key[0] == organization_id]
            rows = np.asarray([row for _, row in keys], dtype=np.int64)
            if keys:
                profiles = np.vstack([self.sums[key].reshape(1, -1) for key in keys]).astype(np.float32)
                profiles /= np.maximum(np.linalg.norm(profiles, axis=1, keepdims=True), 1e-9)
            else:
                profiles = np.zeros((0, 1), dtype=np.float32)
            counts = np.asarray([self.counts[key] for key in keys], dtype=np.int64)
            found = self._profiles[organization_id] = (rows, profiles, counts)
        return found


@dataclass
class ToolMatrix:
    """Every tool's id, text vector, grants and filterable fields, row-aligned."""

    fingerprint: Fingerprint
    ids: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    grants: list[frozenset[str]]
    organizations: npt.NDArray[np.int64]
    types: npt.NDArray[np.str_]
    categories: list[str | None]
    capabilities: list[frozenset[str]]
    verbs: list[frozenset[str]]
    statuses: npt.NDArray[np.str_]
    health: npt.NDArray[np.str_]
    # name word -> rows whose name or key holds it (exact names typed by agents)
    names: dict[str, list[int]]
    row_of: dict[int, int]
    # What a search result shows of each tool, so answering needs no query of the store.
    views: list[dict[str, Any]]
    # (grants, filters) -> rows a search may return; filters are a frozen, hashable dataclass.
    filter_masks: dict[tuple[Any, ...], npt.NDArray[np.bool_]] = field(default_factory=dict)
    # The requests its tools served, by row of this matrix (a new matrix learns them again).
    learned: LearnedRequests = field(default_factory=LearnedRequests)

    def __post_init__(self) -> None:
        self._masks = GrantMasks(self.grants)

    def readable(self, grants: tuple[str, ...] | None) -> npt.NDArray[np.bool_]:
        """Rows a holder of ``grants`` may read (cached per grant set; never change it in place)."""
        return self._masks.mask(grants)


@dataclass
class VerbMatrix:
    """Every verb's id, name, text vector, grants and status, row-aligned."""

    fingerprint: Fingerprint
    ids: npt.NDArray[np.int64]
    names: list[str]
    vectors: npt.NDArray[np.float32]
    grants: list[frozenset[str]]
    statuses: list[str]


class DiscoveryIndex:
    """Loads and caches the tool, verb and learned-request matrices of the store."""

    def __init__(self, sessions: sessionmaker[Session], cache: EmbeddingCache) -> None:
        self._sessions = sessions
        self._cache = cache
        self._tools: ToolMatrix | None = None
        self._verbs: VerbMatrix | None = None
        self._lock = threading.Lock()
        # When each matrix was last known current (monotonic seconds); 0 forces a check.
        self._checked = {"tools": 0.0, "verbs": 0.0}

    def invalidate(self, *, tools: bool = True) -> None:
        """This process changed the registry: the next search reloads tools and verbs (``tools``) or
        only reads new uses (a call that changed nothing else)."""
        with self._lock:
            if tools:
                self._tools = self._verbs = None
            elif self._tools is not None:
                self._tools.learned.checked_at = 0.0

    def _fresh(self, name: str) -> bool:
        """Whether ``name`` was checked against the store less than RECHECK_SECONDS ago."""
        with self._lock:
            return time.monotonic() - self._checked[name] < RECHECK_SECONDS

    def _checked_now(self, name: str) -> None:
        with self._lock:
            self._checked[name] = time.monotonic()

    def tools(self) -> ToolMatrix:
        """The current tool matrix, reloaded when tools were added, changed or removed."""
        if self._tools is not None and self._fresh("tools"):
            return self._tools
        self._checked_now("tools")
        with self._sessions() as session:
            count, id_max, updated = session.execute(
                select(func.count(), func.max(ToolRow.id), func.max(ToolRow.updated_at))
            ).one()
            fingerprint = (int(count or 0), int(id_max or 0), str(updated))
            with self._lock:
                if self._tools is not None and self._tools.fingerprint == fingerprint:
                    return self._tools
            rows = session.execute(
                select(
                    ToolRow.id,
                    ToolRow.organization_id,
                    ToolRow.tool_key,
                    ToolRow.name,
                    ToolRow.search_hash,
                    ToolRow.access_grants,
                    ToolRow.tool_type,
                    ToolRow.category,
                    ToolRow.capabilities,
                    ToolRow.action_verbs,
                    ToolRow.status,
                    ToolRow.health,
                    ToolRow.description,
                    ToolRow.version,
                    ToolRow.input_schema,
                ).order_by(ToolRow.id)
            ).all()
        vectors = self._cache.lookup([row.search_hash for row in rows])
        rows = [row for row in rows if row.search_hash in vectors]  # embedded by another model: skipped
        names: dict[str, list[int]] = defaultdict(list)
        for position, row in enumerate(rows):
            for word in set(_WORD.findall(f"{words_of(row.name)} {words_of(row.tool_key)}")):
                names[word].append(position)
        built = ToolMatrix(
            fingerprint=fingerprint,
            ids=np.fromiter((row.id for row in rows), dtype=np.int64, count=len(rows)),
            vectors=_stack([vectors[row.search_hash] for row in rows], self._cache.embedder.dimension),
            grants=[frozenset(row.access_grants or ()) for row in rows],
            organizations=np.fromiter((row.organization_id for row in rows), dtype=np.int64, count=len(rows)),
            types=np.array([row.tool_type for row in rows], dtype=str),
            categories=[row.category for row in rows],
            capabilities=[frozenset(c.lower() for c in row.capabilities or ()) for row in rows],
            verbs=[frozenset(row.action_verbs or ()) for row in rows],
            statuses=np.array([row.status for row in rows], dtype=str),
            health=np.array([row.health for row in rows], dtype=str),
            names=dict(names),
            row_of={int(row.id): position for position, row in enumerate(rows)},
            views=[{**tool_summary(row), "inputSchema": row.input_schema or {}} for row in rows],
        )
        with self._lock:
            self._tools = built
        return built

    def learned(self, tools: ToolMatrix) -> LearnedRequests:
        """The requests ``tools`` served, with the uses recorded since the last look read in."""
        learned = tools.learned
        with self._lock:
            if time.monotonic() - learned.checked_at < RECHECK_SECONDS:
                return learned
            learned.checked_at = time.monotonic()
        with self._sessions() as session:
            rows = session.execute(
                select(ToolUse.id, ToolUse.tool_id, ToolUse.organization_id, ToolUse.request_hash)
                .where(
                    # Ids of concurrent transactions may commit out of order (PostgreSQL sequences):
                    # a window below the highest id seen is read again.
                    ToolUse.id > learned.last_use_id - USE_ID_WINDOW,
                    ToolUse.succeeded.is_(True),
                    ToolUse.request_hash.is_not(None),
                )
                .order_by(ToolUse.id)
            ).all()
        if not rows:
            return learned
        rows = [row for row in rows if int(row.id) not in learned.seen]
        vectors = self._cache.lookup([row.request_hash for row in rows])
        with self._lock:
            for row in rows:
                if int(row.id) in learned.seen:  # another search read it in meanwhile
                    continue
                learned.seen.add(int(row.id))
                vector = vectors.get(row.request_hash)
                learned.last_use_id = max(learned.last_use_id, int(row.id))
                position = tools.row_of.get(int(row.tool_id))
                if vector is None or position is None:
                    continue
                learned.append(
                    position, int(row.organization_id), vector.astype(np.float32), tools.vectors[position]
                )
        return learned

    def verbs(self) -> VerbMatrix:
        """The current verb matrix, reloaded when verbs were added, changed or removed."""
        if self._verbs is not None and self._fresh("verbs"):
            return self._verbs
        self._checked_now("verbs")
        with self._sessions() as session:
            count, id_max, updated = session.execute(
                select(func.count(), func.max(VerbRow.id), func.max(VerbRow.updated_at))
            ).one()
            fingerprint = (int(count or 0), int(id_max or 0), str(updated))
            with self._lock:
                if self._verbs is not None and self._verbs.fingerprint == fingerprint:
                    return self._verbs
            rows = session.execute(
                select(
                    VerbRow.id, VerbRow.verb, VerbRow.search_hash, VerbRow.access_grants, VerbRow.status
                ).order_by(VerbRow.id)
            ).all()
        vectors = self._cache.lookup([row.search_hash for row in rows])
        rows = [row for row in rows if row.search_hash in vectors]
        built = VerbMatrix(
            fingerprint=fingerprint,
            ids=np.fromiter((row.id for row in rows), dtype=np.int64, count=len(rows)),
            names=[row.verb for row in rows],
            vectors=_stack([vectors[row.search_hash] for row in rows], self._cache.embedder.dimension),
            grants=[frozenset(row.access_grants or ()) for row in rows],
            statuses=[row.status for row in rows],
        )
        with self._lock:
            self._verbs = built
        return built
