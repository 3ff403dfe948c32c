"""The contract every vector index backend fulfils.

Vector indexes are derived data: everything they hold can be rebuilt from the relational store. A
:class:`VectorStore` holds named collections; one collection holds the vectors of one embedding
model. Reindexing builds a new collection and switches to it only when it is complete, so searches
keep working from the old one meanwhile.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt

from librarian.errors import InvalidInputError

Vector = npt.NDArray[np.float32]

# Chroma's rule for collection names; every backend applies it so names are portable between them.
_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")


def validate_collection_name(name: str) -> str:
    """Return ``name`` if every backend accepts it as a collection name, else raise InvalidInputError."""
    if not _COLLECTION_NAME.fullmatch(name) or ".." in name:
        raise InvalidInputError(
            f"invalid vector collection name {name!r}",
            hint="use 3-512 characters from a-z, A-Z, 0-9, '.', '_', '-', starting and ending with a "
            "letter or digit",
        )
    return name


@dataclass(frozen=True)
class SearchFilter:
    """Restricts a search. ``None`` fields do not filter; every listed tag must be present.

    ``document_types`` keeps chunks of any of the listed types. ``access`` holds the caller's grants
    (knowledge/access.py): a chunk passes when it carries at least one of them; ``None`` means the
    caller may see everything. Every backend applies ``access`` inside its query.
    """

    sdk_name: str | None = None
    sdk_version: str | None = None
    document_type: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    fetched_after: datetime | None = None
    fetched_before: datetime | None = None
    document_types: tuple[str, ...] = ()
    access: tuple[str, ...] | None = None

    def is_empty(self) -> bool:
        """True when the filter lets every chunk through."""
        return self == SearchFilter()


@dataclass(frozen=True)
class VectorMetadata:
    """The filterable fields of one chunk, copied into the vector index."""

    sdk_name: str | None = None
    sdk_version: str | None = None
    document_type: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    fetched_at: datetime | None = None
    access_grants: tuple[str, ...] = ()


@dataclass(frozen=True)
class VectorRecord:
    """One chunk's vector. ``id`` is the chunk's primary key in the relational store."""

    id: int
    vector: Vector
    metadata: VectorMetadata = field(default_factory=VectorMetadata)


class VectorIndex(Protocol):
    """One collection of vectors of a fixed dimension, compared by cosine similarity.

    An index may set a class attribute ``filters_in_scan = True`` when it evaluates a filter inside
    the same scan that finds neighbours (pgvector); the hybrid retriever then passes the caller's
    access filter straight to it instead of over-fetching unfiltered neighbours (which is what suits
    Chroma, whose filtered queries scan metadata). It is optional, so it is not a protocol member.
    """

    @property
    def name(self) -> str:
        """The collection's name."""
        ...

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by id."""
        ...

    def delete(self, ids: Sequence[int]) -> None:
        """Remove records by id; unknown ids are ignored."""
        ...

    def query(self, vector: Vector, k: int, where: SearchFilter | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest records passing ``where`` as ``(id, cosine similarity)``, best first."""
        ...

    def count(self) -> int:
        """How many records the collection holds."""
        ...


class VectorStore(Protocol):
    """A backend holding named collections (embedded Chroma, Chroma server, pgvector)."""

    def open(self, name: str, dimension: int) -> VectorIndex:
        """Open the collection ``name``, creating it for vectors of ``dimension`` if needed."""
        ...

    def exists(self, name: str) -> bool:
        """True when a collection called ``name`` exists."""
        ...

    def drop(self, name: str) -> None:
        """Delete the collection ``name`` and all its vectors; a missing one is ignored."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...
