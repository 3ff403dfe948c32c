"""Vector index on Chroma: an embedded persistent client or a Chroma server.

Both modes share one class because ``chromadb.PersistentClient`` and ``chromadb.HttpClient`` return
the same client interface. Collections use the cosine space; Chroma reports cosine *distances*,
which are turned into similarities (``1 - distance``) before they leave this module.

Metadata layout in Chroma (which has no list values one can filter on, and rejects ``None``):

* ``sdk_name``, ``sdk_version``, ``document_type``, ``category``: strings, omitted when unknown;
* one boolean key per tag, ``tag:<name>`` = ``True``;
* one boolean key per access grant, ``grant:<grant>`` = ``True`` (knowledge/access.py);
* ``fetched_at``: integer seconds since the Unix epoch (naive datetimes are taken as UTC), so the
  ``fetched_after`` / ``fetched_before`` bounds are exact to the second only.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import chromadb
import chromadb.errors
import httpx
import numpy as np
import numpy.typing as npt
from chromadb.api import ClientAPI
from chromadb.api.client import Client
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings

from librarian.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidInputError,
    LibrarianError,
    NotFoundError,
)
from librarian.index.base import SearchFilter, Vector, VectorMetadata, VectorRecord, validate_collection_name

TAG_PREFIX: Final = "tag:"
GRANT_PREFIX: Final = "grant:"
FETCHED_AT_KEY: Final = "fetched_at"
DIMENSION_KEY: Final = "dimension"
_EQUALITY_FIELDS: Final = ("sdk_name", "sdk_version", "document_type", "category")

# Chroma (1.x, local and server) evaluates a ``where`` filter by scanning metadata, which costs
# tens of milliseconds at 100k records even when few records match, while an unfiltered query
# costs one or two. A filtered query therefore first over-fetches unfiltered candidates and filters
# them here (3 x k: enough when a third of the records pass, as for a caller's access grants);
# when too few survive it asks once more for as many as the share that passed suggests, and only
# when that would exceed the cap (the filter is selective) does it ask Chroma to filter.
_OVERFETCH_FACTOR: Final = 3
_OVERFETCH_MIN: Final = 100
_OVERFETCH_MAX: Final = 1200

Op = Literal["$eq", "$gte", "$lte", "$any"]
Scalar = str | int | bool
# ``(key, "$any", ((key, value), ...))`` holds when any of the alternatives' key equals its value.
Alternatives = tuple[tuple[str, Scalar], ...]
Clause = tuple[str, Op, Scalar | Alternatives]


def epoch_seconds(moment: datetime) -> int:
    """Whole seconds since the Unix epoch; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return math.floor(moment.timestamp())


def encode_metadata(metadata: VectorMetadata) -> dict[str, Scalar]:
    """The Chroma metadata for ``metadata``: unknown fields omitted, one boolean key per tag."""
    encoded: dict[str, Scalar] = {}
    for field in _EQUALITY_FIELDS:
        value = getattr(metadata, field)
        if value is not None:
            encoded[field] = value
    for tag in metadata.tags:
        encoded[TAG_PREFIX + tag] = True
    for grant in metadata.access_grants:
        encoded[GRANT_PREFIX + grant] = True
    if metadata.fetched_at is not None:
        encoded[FETCHED_AT_KEY] = epoch_seconds(metadata.fetched_at)
    return encoded


def filter_clauses(where: SearchFilter | None) -> list[Clause]:
    """The conditions ``where`` puts on the Chroma metadata, all of which must hold."""
    if where is None:
        return []
    clauses: list[Clause] = []
    for field in _EQUALITY_FIELDS:
        value = getattr(where, field)
        if value is not None:
            clauses.append((field, "$eq", value))
    clauses.extend((TAG_PREFIX + tag, "$eq", True) for tag in dict.fromkeys(where.tags))
    if where.fetched_after is not None:
        clauses.append((FETCHED_AT_KEY, "$gte", epoch_seconds(where.fetched_after)))
    if where.fetched_before is not None:
        clauses.append((FETCHED_AT_KEY, "$lte", epoch_seconds(where.fetched_before)))
    if where.document_types:
        types = tuple(("document_type", value) for value in dict.fromkeys(where.document_types))
        clauses.append(("document_type", "$any", types))
    if where.access is not None:
        # No grants at all must match nothing: a key no record carries keeps the clause false.
        grants = tuple((GRANT_PREFIX + grant, True) for grant in dict.fromkeys(where.access))
        clauses.append(("access", "$any", grants or ((GRANT_PREFIX, True),)))
    return clauses


def _operand(key: str, op: Op, value: Scalar | Alternatives) -> dict[str, Any]:
    if op != "$any":
        return {key: {op: value}}
    assert isinstance(value, tuple)
    alternatives = [{alt_key: {"$eq": alt_value}} for alt_key, alt_value in value]
    return alternatives[0] if len(alternatives) == 1 else {"$or": alternatives}


def to_chroma_where(clauses: Sequence[Clause]) -> dict[str, Any] | None:
    """The Chroma ``where`` document for ``clauses`` (``$and`` needs at least two operands)."""
    operands = [_operand(key, op, value) for key, op, value in clauses]
    if not operands:
        return None
    if len(operands) == 1:
        return operands[0]
    return {"$and": operands}


def passes(metadata: Mapping[str, Any] | None, clauses: Sequence[Clause]) -> bool:
    """True when ``metadata`` satisfies every clause, exactly as Chroma would judge it."""
    for key, op, expected in clauses:
        if op == "$any":
            assert isinstance(expected, tuple)
            if not any(passes(metadata, [(alt_key, "$eq", alt)]) for alt_key, alt in expected):
                return False
            continue
        if isinstance(expected, tuple):
            return False
        actual = None if metadata is None else metadata.get(key)
        if actual is None:
            return False
        if op == "$eq":
            # bool is an int in Python; Chroma keeps them apart, so must we.
            if type(actual) is not type(expected) or actual != expected:
                return False
            continue
        numeric = not isinstance(actual, bool) and isinstance(actual, int | float)
        if not numeric or isinstance(expected, str):
            return False
        if (op == "$gte" and actual < expected) or (op == "$lte" and actual > expected):
            return False
    return True


@contextmanager
def _chroma_errors(action: str) -> Iterator[None]:
    """Translate Chroma and transport errors raised while doing ``action`` into Librarian errors."""
    try:
        yield
    except LibrarianError:
        raise
    except chromadb.errors.NotFoundError as exc:
        raise NotFoundError(
            f"cannot {action}: {exc}", hint="the collection was probably dropped; open it again"
        ) from exc
    except chromadb.errors.InvalidArgumentError as exc:
        raise InvalidInputError(f"cannot {action}: {exc}") from exc
    except (chromadb.errors.ChromaError, httpx.HTTPError) as exc:
        raise BackendUnavailableError(
            f"cannot {action}: {exc}", hint="check that the Chroma server or directory is usable"
        ) from exc


def _check_vector(vector: Vector, dimension: int, what: str) -> Vector:
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (dimension,):
        raise InvalidInputError(
            f"{what} has shape {array.shape}, but the collection holds vectors of dimension {dimension}"
        )
    return array


def _stack(records: Sequence[VectorRecord]) -> npt.NDArray[np.float32]:
    return np.stack([np.asarray(record.vector, dtype=np.float32) for record in records])


class ChromaVectorIndex:
    """One Chroma collection; obtain it from :meth:`ChromaVectorStore.open`."""

    def __init__(self, collection: Collection, dimension: int, max_batch_size: int) -> None:
        self._collection = collection
        self._dimension = dimension
        self._max_batch_size = max_batch_size

    @property
    def name(self) -> str:
        """The collection's name."""
        return str(self._collection.name)

    @property
    def dimension(self) -> int:
        """The dimension of every vector in the collection."""
        return self._dimension

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by id, metadata included.

        Raises:
            InvalidInputError: a vector does not have the collection's dimension.
            BackendUnavailableError: Chroma failed.
        """
        # Chroma rejects duplicate ids in one call; the last record for an id wins, as in a loop.
        latest = list({record.id: record for record in records}.values())
        for record in latest:
            _check_vector(record.vector, self._dimension, f"the vector of record {record.id}")
        for start in range(0, len(latest), self._max_batch_size):
            self._upsert_batch(latest[start : start + self._max_batch_size])

    def _upsert_batch(self, batch: Sequence[VectorRecord]) -> None:
        ids = [str(record.id) for record in batch]
        with _chroma_errors(f"write to the vector collection {self.name!r}"):
            stored = self._collection.get(ids=ids, include=["metadatas"])
            old_keys = {
                stored_id: set(meta or ())
                for stored_id, meta in zip(stored["ids"], stored["metadatas"] or [], strict=False)
            }
            with_metadata: list[tuple[str, VectorRecord, dict[str, Scalar | None]]] = []
            bare: list[tuple[str, VectorRecord]] = []
            for chroma_id, record in zip(ids, batch, strict=True):
                metadata: dict[str, Scalar | None] = dict(encode_metadata(record.metadata))
                # Chroma's upsert merges the new metadata into the stored one, so a tag or field the
                # record no longer has would keep matching filters; None makes Chroma delete a key.
                for key in old_keys.get(chroma_id, set()) - metadata.keys():
                    metadata[key] = None
                if metadata:
                    with_metadata.append((chroma_id, record, metadata))
                else:
                    # Chroma refuses an empty metadata dict, so these go in a call without metadata.
                    bare.append((chroma_id, record))
            if with_metadata:
                self._collection.upsert(
                    ids=[chroma_id for chroma_id, _, _ in with_metadata],
                    embeddings=_stack([record for _, record, _ in with_metadata]),
                    metadatas=[metadata for _, _, metadata in with_metadata],
                )
            if bare:
                self._collection.upsert(
                    ids=[chroma_id for chroma_id, _ in bare],
                    embeddings=_stack([record for _, record in bare]),
                )

    def delete(self, ids: Sequence[int]) -> None:
        """Remove records by id; unknown ids are ignored."""
        chroma_ids = list(dict.fromkeys(str(record_id) for record_id in ids))
        with _chroma_errors(f"delete from the vector collection {self.name!r}"):
            for start in range(0, len(chroma_ids), self._max_batch_size):
                self._collection.delete(ids=chroma_ids[start : start + self._max_batch_size])

    def query(self, vector: Vector, k: int, where: SearchFilter | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest records passing ``where`` as ``(id, cosine similarity)``, best first.

        Raises:
            InvalidInputError: ``k`` is below 1 or the vector has the wrong dimension.
            BackendUnavailableError: Chroma failed.
        """
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, not {k}")
        query = _check_vector(vector, self._dimension, "the query vector")
        clauses = filter_clauses(where)
        with _chroma_errors(f"search the vector collection {self.name!r}"):
            if not clauses:
                return self._nearest(query, k, None)
            candidates = max(_OVERFETCH_MIN, _OVERFETCH_FACTOR * k)
            while candidates <= _OVERFETCH_MAX:
                result = self._collection.query(
                    query_embeddings=query[np.newaxis, :],
                    n_results=candidates,
                    include=["distances", "metadatas"],
                )
                ids = result["ids"][0]
                distances = (result["distances"] or [[]])[0]
                metadatas = (result["metadatas"] or [[]])[0]
                hits = [
                    (int(chroma_id), 1.0 - float(distance))
                    for chroma_id, distance, metadata in zip(ids, distances, metadatas, strict=True)
                    if passes(metadata, clauses)
                ]
                # Fewer candidates than asked for means they were the whole collection.
                if len(hits) >= k or len(ids) < candidates:
                    return hits[:k]
                # Too few passed: ask once more for as many as the share that passed suggests.
                share = max(len(hits), 1) / max(len(ids), 1)
                wanted = int(k / share * 1.5) + 1
                if wanted <= candidates:
                    break
                candidates = wanted
            return self._nearest(query, k, to_chroma_where(clauses))

    def _nearest(self, query: Vector, k: int, where: dict[str, Any] | None) -> list[tuple[int, float]]:
        result = self._collection.query(
            query_embeddings=query[np.newaxis, :], n_results=k, where=where, include=["distances"]
        )
        distances = (result["distances"] or [[]])[0]
        return [
            (int(chroma_id), 1.0 - float(distance))
            for chroma_id, distance in zip(result["ids"][0], distances, strict=True)
        ]

    def count(self) -> int:
        """How many records the collection holds."""
        with _chroma_errors(f"count the vector collection {self.name!r}"):
            return int(self._collection.count())


class ChromaVectorStore:
    """Named vector collections in Chroma, embedded or behind a server.

    Build one with :meth:`embedded` or :meth:`server`; the constructor takes any Chroma client.

    Example:
        >>> store = ChromaVectorStore.embedded("/var/lib/librarian/chroma")  # doctest: +SKIP
        >>> index = store.open("chunks-minilm", 384)  # doctest: +SKIP
    """

    def __init__(self, client: ClientAPI, *, location: str) -> None:
        """Wrap ``client``; ``location`` names it in error messages (a path or a URL)."""
        self._client = client
        self._location = location
        self._max_batch_size: int | None = None

    @classmethod
    def embedded(cls, path: str | Path) -> ChromaVectorStore:
        """A store persisted in the directory ``path`` (created if needed), with no server.

        Raises:
            BackendUnavailableError: the directory cannot be used (permissions, another version).
        """
        directory = Path(path).expanduser()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            client = chromadb.PersistentClient(path=str(directory), settings=_settings())
        except (OSError, ValueError, chromadb.errors.ChromaError) as exc:
            raise BackendUnavailableError(
                f"cannot open the Chroma directory {str(directory)!r}: {exc}",
                hint="check that the directory is writable and not used by another Chroma version",
            ) from exc
        return cls(client, location=str(directory))

    @classmethod
    def server(cls, host: str, port: int, *, ssl: bool = False) -> ChromaVectorStore:
        """A store on the Chroma server at ``host:port`` (started with ``chroma run``).

        Raises:
            BackendUnavailableError: the server does not answer.
        """
        url = f"{'https' if ssl else 'http'}://{host}:{port}"
        try:
            # HttpClient checks the server as it is built, and reports a refusal as ValueError.
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=_settings())
        except (ValueError, httpx.HTTPError, chromadb.errors.ChromaError) as exc:
            raise BackendUnavailableError(
                f"cannot reach the Chroma server at {url}: {exc}",
                hint="start it with `chroma run --path DIR --port N` or fix LIBRARIAN_VECTOR_URL",
            ) from exc
        return cls(client, location=url)

    def _batch_size(self) -> int:
        if self._max_batch_size is None:
            with _chroma_errors(f"ask Chroma at {self._location} for its batch size"):
                self._max_batch_size = int(self._client.get_max_batch_size())
        return self._max_batch_size

    def open(self, name: str, dimension: int) -> ChromaVectorIndex:
        """Open the collection ``name``, creating it (cosine space) for ``dimension`` if needed.

        Raises:
            InvalidInputError: the name is not a valid collection name or ``dimension`` < 1.
            ConflictError: the collection exists with another dimension or distance.
            BackendUnavailableError: Chroma failed.
        """
        validate_collection_name(name)
        if dimension < 1:
            raise InvalidInputError(f"a vector dimension must be at least 1, not {dimension}")
        with _chroma_errors(f"open the vector collection {name!r} at {self._location}"):
            collection = self._client.get_or_create_collection(
                name,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={DIMENSION_KEY: dimension},
                # Vectors come from Librarian's embedders; Chroma must not load its own model.
                embedding_function=None,
            )
        stored_dimension = (collection.metadata or {}).get(DIMENSION_KEY)
        if stored_dimension is not None and stored_dimension != dimension:
            raise ConflictError(
                f"the vector collection {name!r} holds vectors of dimension {stored_dimension}, "
                f"not {dimension}",
                hint="reindex into a new collection, or drop this one",
            )
        # The raw JSON, because the parsed configuration warns about our embedding_function=None.
        space = ((collection.configuration_json or {}).get("hnsw") or {}).get("space")
        if space not in (None, "cosine"):
            raise ConflictError(
                f"the vector collection {name!r} compares vectors by {space!r}, not cosine",
                hint="it was not created by Librarian; drop it or choose another name",
            )
        return ChromaVectorIndex(collection, dimension, self._batch_size())

    def exists(self, name: str) -> bool:
        """True when a collection called ``name`` exists."""
        validate_collection_name(name)
        try:
            with _chroma_errors(f"look up the vector collection {name!r} at {self._location}"):
                self._client.get_collection(name, embedding_function=None)
        except NotFoundError:
            return False
        return True

    def drop(self, name: str) -> None:
        """Delete the collection ``name`` and its vectors; a missing one is ignored."""
        validate_collection_name(name)
        try:
            with _chroma_errors(f"drop the vector collection {name!r} at {self._location}"):
                self._client.delete_collection(name)
        except NotFoundError:
            pass

    def close(self) -> None:
        """Release the client; for an embedded store this closes its files."""
        if isinstance(self._client, Client):
            self._client.close()


def _settings() -> Settings:
    # Every client in a process must use equal settings for one path, so build them in one place.
    return Settings(anonymized_telemetry=False)
