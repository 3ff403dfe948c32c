"""Access masks of in-memory matrices: which rows a holder of some grants may read.

Incidents, runbooks and tools are each ranked over one in-memory matrix; the caller's grants become a
boolean mask applied *before* ranking (knowledge/access.py explains grants). A mask is computed once
per grant set and kept, since a server answers the same few callers again and again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

# Distinct grant sets kept before the cache starts over (a mask is one byte per row).
MAX_CACHED = 256


class GrantMasks:
    """Row-aligned grants, and the mask of each grant set asked for, cached."""

    def __init__(self, grants: Sequence[frozenset[str]]) -> None:
        self._grants = list(grants)
        self._masks: dict[tuple[str, ...] | None, npt.NDArray[np.bool_]] = {}
        self._lock = threading.Lock()

    def mask(self, held: tuple[str, ...] | None) -> npt.NDArray[np.bool_]:
        """True for rows sharing a grant with ``held``; ``None`` (sees everything): every row."""
        with self._lock:
            found = self._masks.get(held)
        if found is not None:
            return found
        if held is None:
            found = np.ones(len(self._grants), dtype=bool)
        else:
            wanted = set(held)
            found = np.fromiter(
                (not wanted.isdisjoint(row) for row in self._grants), dtype=bool, count=len(self._grants)
            )
        found.flags.writeable = False  # shared between callers: nobody may change it in place
        with self._lock:
            if len(self._masks) >= MAX_CACHED:
                self._masks.clear()
            self._masks[held] = found
        return found
