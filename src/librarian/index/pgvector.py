"""Vector index on PostgreSQL with the pgvector extension.

Each collection is a table of its own (``vec_<name>``) with the vector, the filterable fields as
plain columns, an HNSW index with ``vector_cosine_ops`` and B-tree / GIN indexes on the filter
columns. Searches order by the cosine distance operator ``<=>`` and filter in ``WHERE``.

An HNSW index scan visits only ``hnsw.ef_search`` candidates and filters them afterwards, so a
selective filter can leave fewer than ``k`` rows although more match. Queries therefore raise
``ef_search``, use ``hnsw.iterative_scan`` where the server's pgvector has it (0.8.0 and later), and
when a filtered query still comes back short, run it again as an exact scan, which is cheap
precisely because the filter is selective and the filter columns are indexed.

Without iterative scans the first read is sized by what the filter holds: ``10 x k`` candidates for
field filters (which may be selective), ``3 x k`` for the access filter (a typical caller reads a
third or more of the store) and ``30 x k`` for both; a short read of ``3 x k`` is repeated with
``10 x k``. The filter, the caller's grants included, is always part of the one scan
(:attr:`PgVectorIndex.filters_in_scan`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np
from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Connection,
    DateTime,
    Engine,
    Index,
    MetaData,
    Row,
    Select,
    Table,
    Text,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from librarian.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidInputError,
    LibrarianError,
    NotFoundError,
)
from librarian.index.base import SearchFilter, Vector, VectorMetadata, VectorRecord, validate_collection_name

# PostgreSQL truncates identifiers at 63 bytes; index names add up to 13 characters to the table's.
_MAX_TABLE_NAME: Final = 50
_WRITE_BATCH: Final = 1000
# pgvector refuses hnsw.ef_search above 1000.
_MAX_EF_SEARCH: Final = 1000
_DEFAULT_EF_SEARCH: Final = 40
# Candidates an HNSW scan visits per wanted result when a filter may discard most of them.
_FILTERED_EF_FACTOR: Final = 10
# Without iterative scans, the candidates per wanted result an access filter adds to a scan: it
# passes a third or more of the store for a typical caller (its organisation's and the public
# documents), so 3 x k usually yields k rows, at a third of the cost of reading 10 x k.
_ACCESS_EF_FACTOR: Final = 3
# A short first read is not repeated wider when the share of candidates that passed it says that
# even this many times _MAX_EF_SEARCH candidates would be needed (a selective filter): the exact
# scan that would follow the wider read comes at once. The margin allows for the share to vary.
_HOPELESS_MARGIN: Final = 2

# SQLSTATEs that say what went wrong, independent of the driver's exception classes.
_UNDEFINED_TABLE: Final = "42P01"
# A missing extension is feature_not_supported since PostgreSQL 15, undefined_file before.
_EXTENSION_MISSING: Final = frozenset({"0A000", "58P01"})
_INSUFFICIENT_PRIVILEGE: Final = "42501"
_DATA_EXCEPTION_CLASS: Final = "22"


def table_name(name: str) -> str:
    """The table holding collection ``name``: ``vec_`` and the name in lower case, ``_`` for others.

    When that mapping loses information (upper case, ``-`` or ``.``) or the name is long, a short
    hash of the exact name is appended so that two different names never share a table.

    Example:
        >>> table_name("chunks")
        'vec_chunks'
    """
    base = re.sub(r"[^a-z0-9_]", "_", name.lower())
    table = f"vec_{base}"
    if base != name or len(table) > _MAX_TABLE_NAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        table = f"vec_{base[: _MAX_TABLE_NAME - len('vec__') - len(digest)]}_{digest}"
    return table


def _utc(moment: datetime) -> datetime:
    # Naive datetimes are UTC throughout Librarian; the session time zone must not reinterpret them.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _define_table(name: str, dimension: int | None) -> Table:
    table = table_name(name)
    return Table(
        table,
        MetaData(),
        Column("id", BigInteger, primary_key=True, autoincrement=False),
        Column("embedding", VECTOR(dimension), nullable=False),
        Column("sdk_name", Text),
        Column("sdk_version", Text),
        Column("document_type", Text),
        Column("category", Text),
        Column("tags", ARRAY(Text), nullable=False, server_default="{}"),
        Column("fetched_at", DateTime(timezone=True)),
        Column("access_grants", ARRAY(Text), nullable=False, server_default="{}"),
        Index(
            f"{table}_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        Index(f"{table}_sdk", "sdk_name", "sdk_version"),
        Index(f"{table}_doctype", "document_type"),
        Index(f"{table}_category", "category"),
        Index(f"{table}_tags", "tags", postgresql_using="gin"),
        Index(f"{table}_fetched", "fetched_at"),
        Index(f"{table}_grants", "access_grants", postgresql_using="gin"),
    )


def _sqlstate(exc: DBAPIError) -> str:
    return str(getattr(exc.orig, "sqlstate", "") or "")


@contextmanager
def _db_errors(action: str, where: str) -> Iterator[None]:
    """Translate SQLAlchemy errors raised while doing ``action`` into Librarian errors."""
    try:
        yield
    except LibrarianError:
        raise
    except OperationalError as exc:
        raise BackendUnavailableError(
            f"cannot {action}: the PostgreSQL server at {where} failed: {exc.orig}",
            hint="check that the server is running and the vector URL is right",
        ) from exc
    except DBAPIError as exc:
        state = _sqlstate(exc)
        if state == _UNDEFINED_TABLE:
            raise NotFoundError(
                f"cannot {action}: its table does not exist in {where}",
                hint="the collection was probably dropped; open it again",
            ) from exc
        if state.startswith(_DATA_EXCEPTION_CLASS):
            raise InvalidInputError(f"cannot {action}: {exc.orig}") from exc
        raise BackendUnavailableError(f"cannot {action}: {exc.orig}") from exc
    except SQLAlchemyError as exc:
        raise BackendUnavailableError(f"cannot {action}: {exc}") from exc


def _check_vector(vector: Vector, dimension: int, what: str) -> Vector:
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (dimension,):
        raise InvalidInputError(
            f"{what} has shape {array.shape}, but the collection holds vectors of dimension {dimension}"
        )
    return array


def _first_ef_factor(where: SearchFilter | None, conditions: Sequence[ColumnElement[bool]]) -> int:
    """Candidates a filtered scan without iterative scans first reads per wanted result.

    Field filters (SDK, type, tags, dates) may keep a small share of the store, hence ``10 x k``;
    the access filter keeps a third or more, hence ``3 x k``; with both the shares multiply. These
    are the reads the hybrid retriever's over-fetch used to make before it checked grants itself,
    so the same candidates are found.
    """
    with_access = where is not None and where.access is not None
    factor = _ACCESS_EF_FACTOR if with_access else 1
    if len(conditions) > (1 if with_access else 0):
        factor *= _FILTERED_EF_FACTOR
    return factor


class PgVectorIndex:
    """One collection, stored in its own table; obtain it from :meth:`PgVectorStore.open`."""

    # The filter, access grants included, is evaluated inside the index scan on the table's own
    # columns, so a filtered query costs about what an over-fetching one does, without the second
    # round trip that checking grants elsewhere needs (see HybridRetriever).
    filters_in_scan: Final = True

    def __init__(self, engine: Engine, name: str, dimension: int, *, iterative_scan: bool) -> None:
        self._engine = engine
        self._name = name
        self._dimension = dimension
        self._table = _define_table(name, dimension)
        self._iterative_scan = iterative_scan
        self._where = engine.url.render_as_string(hide_password=True)

    @property
    def name(self) -> str:
        """The collection's name."""
        return self._name

    @property
    def dimension(self) -> int:
        """The dimension of every vector in the collection."""
        return self._dimension

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by id, in one transaction.

        Raises:
            InvalidInputError: a vector does not have the collection's dimension.
            NotFoundError: the collection was dropped.
            BackendUnavailableError: the database failed.
        """
        # One statement may not touch a row twice; the last record for an id wins, as in a loop.
        latest = list({record.id: record for record in records}.values())
        rows = [self._row(record) for record in latest]
        if not rows:
            return
        statement = insert(self._table)
        statement = statement.on_conflict_do_update(
            index_elements=[self._table.c.id],
            set_={
                column.name: statement.excluded[column.name]
                for column in self._table.c
                if column.name != "id"
            },
        )
        with (
            _db_errors(f"write to the vector collection {self._name!r}", self._where),
            self._engine.begin() as connection,
        ):
            for start in range(0, len(rows), _WRITE_BATCH):
                connection.execute(statement, rows[start : start + _WRITE_BATCH])

    def _row(self, record: VectorRecord) -> dict[str, Any]:
        vector = _check_vector(record.vector, self._dimension, f"the vector of record {record.id}")
        metadata: VectorMetadata = record.metadata
        return {
            "id": record.id,
            "embedding": vector,
            "sdk_name": metadata.sdk_name,
            "sdk_version": metadata.sdk_version,
            "document_type": metadata.document_type,
            "category": metadata.category,
            "tags": list(dict.fromkeys(metadata.tags)),
            "fetched_at": None if metadata.fetched_at is None else _utc(metadata.fetched_at),
            "access_grants": list(dict.fromkeys(metadata.access_grants)),
        }

    def delete(self, ids: Sequence[int]) -> None:
        """Remove records by id; unknown ids are ignored."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return
        with (
            _db_errors(f"delete from the vector collection {self._name!r}", self._where),
            self._engine.begin() as connection,
        ):
            for start in range(0, len(unique), _WRITE_BATCH):
                batch = unique[start : start + _WRITE_BATCH]
                connection.execute(self._table.delete().where(self._table.c.id.in_(batch)))

    def query(self, vector: Vector, k: int, where: SearchFilter | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest records passing ``where`` as ``(id, cosine similarity)``, best first.

        Raises:
            InvalidInputError: ``k`` is below 1 or the vector has the wrong dimension.
            NotFoundError: the collection was dropped.
            BackendUnavailableError: the database failed.
        """
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, not {k}")
        query = _check_vector(vector, self._dimension, "the query vector")
        conditions = self._conditions(where)
        distance = self._table.c.embedding.cosine_distance(query)
        statement = (
            select(self._table.c.id, distance.label("distance"))
            .where(*conditions)
            .order_by(distance)
            .limit(k)
        )
        with (
            _db_errors(f"search the vector collection {self._name!r}", self._where),
            self._engine.begin() as connection,
        ):
            if not conditions:
                ef_search = max(_DEFAULT_EF_SEARCH, k)
                if ef_search > _DEFAULT_EF_SEARCH:
                    # The common unfiltered top-k needs no tuning, which saves a round trip.
                    self._tune(connection, min(ef_search, _MAX_EF_SEARCH), iterate=False)
                rows = connection.execute(statement).all()
            elif self._iterative_scan:
                self._tune(connection, min(k * _FILTERED_EF_FACTOR, _MAX_EF_SEARCH), iterate=True)
                rows = connection.execute(statement).all()
            else:
                rows = self._filtered_scan(connection, statement, k, _first_ef_factor(where, conditions))
            if len(rows) < k and (conditions or k > _MAX_EF_SEARCH):
                # The index scan gave up before finding k matches; HNSW cannot be used as a bitmap,
                # so without plain index scans the planner filters first, then sorts exactly.
                connection.execute(text("SELECT set_config('enable_indexscan', 'off', true)"))
                rows = connection.execute(statement).all()
        # relaxed_order iterative scans may return rows slightly out of order.
        return sorted(((int(row.id), 1.0 - float(row.distance)) for row in rows), key=lambda hit: -hit[1])

    def _filtered_scan(
        self, connection: Connection, statement: Select[Any], k: int, factor: int
    ) -> Sequence[Row[Any]]:
        """A filtered HNSW scan on a server without iterative scans: ``factor x k`` candidates first.

        Such a scan reads exactly ``ef_search`` candidates and drops those the filter rejects. A
        short first read narrower than ``10 x k`` is repeated with ``10 x k``, unless the share of
        candidates that passed says that even :data:`_MAX_EF_SEARCH` would come back short: then the
        caller's exact scan follows directly, as it would after the wider read.
        """
        ef_search = min(max(_DEFAULT_EF_SEARCH, k * factor), _MAX_EF_SEARCH)
        self._tune(connection, ef_search, iterate=False)
        rows = connection.execute(statement).all()
        wider = min(k * _FILTERED_EF_FACTOR, _MAX_EF_SEARCH)
        if len(rows) >= k or wider <= ef_search:
            return rows
        if not rows or k * ef_search / len(rows) > _MAX_EF_SEARCH * _HOPELESS_MARGIN:
            return rows
        self._tune(connection, wider, iterate=False)
        return connection.execute(statement).all()

    def _tune(self, connection: Connection, ef_search: int, *, iterate: bool) -> None:
        # set_config(..., true) is SET LOCAL: it ends with this transaction, so pooled connections
        # go back to the pool with their defaults.
        calls = ["set_config('hnsw.ef_search', :ef_search, true)"]
        if iterate and self._iterative_scan:
            # Keep scanning the graph until k rows pass the filter (pgvector 0.8.0 and later).
            calls.append("set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        connection.execute(text(f"SELECT {', '.join(calls)}"), {"ef_search": str(ef_search)})

    def _conditions(self, where: SearchFilter | None) -> list[ColumnElement[bool]]:
        if where is None:
            return []
        columns = self._table.c
        conditions: list[ColumnElement[bool]] = []
        for field in ("sdk_name", "sdk_version", "document_type", "category"):
            value = getattr(where, field)
            if value is not None:
                conditions.append(columns[field] == value)
        if where.tags:
            conditions.append(columns.tags.contains(list(dict.fromkeys(where.tags))))
        if where.fetched_after is not None:
            conditions.append(columns.fetched_at >= _utc(where.fetched_after))
        if where.fetched_before is not None:
            conditions.append(columns.fetched_at <= _utc(where.fetched_before))
        if where.document_types:
            conditions.append(columns.document_type.in_(sorted(set(where.document_types))))
        if where.access is not None:
            conditions.append(columns.access_grants.overlap(sorted(set(where.access))))
        return conditions

    def count(self) -> int:
        """How many records the collection holds."""
        with (
            _db_errors(f"count the vector collection {self._name!r}", self._where),
            self._engine.connect() as connection,
        ):
            return int(connection.execute(select(func.count()).select_from(self._table)).scalar_one())


class PgVectorStore:
    """Named vector collections in PostgreSQL tables, using the ``vector`` extension (pgvector).

    Args:
        engine: a SQLAlchemy engine on PostgreSQL with psycopg 3 (usually Librarian's own database).
        dispose_engine: dispose of ``engine`` on :meth:`close`; for an engine made only for this store.

    Raises:
        InvalidInputError: ``engine`` is not a PostgreSQL engine.

    Example:
        >>> store = PgVectorStore(create_engine("postgresql+psycopg://localhost/librarian"))  # doctest: +SKIP
        >>> index = store.open("chunks-minilm", 384)  # doctest: +SKIP
    """

    def __init__(self, engine: Engine, *, dispose_engine: bool = False) -> None:
        if engine.dialect.name != "postgresql":
            raise InvalidInputError(
                f"pgvector needs a PostgreSQL database, not {engine.dialect.name}",
                hint="use a postgresql+psycopg:// database URL, or a chroma:// vector store",
            )
        self._engine = engine
        self._dispose_engine = dispose_engine
        self._where = engine.url.render_as_string(hide_password=True)
        self._iterative_scan: bool | None = None

    def _prepare(self, connection: Connection) -> bool:
        """Create the extension if needed; True when the server's pgvector has iterative scans."""
        if self._iterative_scan is not None:
            return self._iterative_scan
        try:
            connection.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        except DBAPIError as exc:
            state = _sqlstate(exc)
            if state in _EXTENSION_MISSING:
                raise BackendUnavailableError(
                    f"the PostgreSQL server at {self._where} does not have the 'vector' extension (pgvector)",
                    hint="install pgvector on the server (https://github.com/pgvector/pgvector), "
                    "or use a chroma:// vector store",
                ) from exc
            if state == _INSUFFICIENT_PRIVILEGE:
                raise BackendUnavailableError(
                    f"not allowed to create the 'vector' extension in {self._where}",
                    hint="ask a superuser to run CREATE EXTENSION vector in that database",
                ) from exc
            raise
        # A vector value loads the extension's library, which registers its settings; only then does
        # current_setting tell whether this pgvector knows hnsw.iterative_scan.
        connection.execute(text("SELECT '[1]'::vector"))
        setting = connection.execute(text("SELECT current_setting('hnsw.iterative_scan', true)")).scalar()
        self._iterative_scan = setting is not None
        return self._iterative_scan

    def open(self, name: str, dimension: int) -> PgVectorIndex:
        """Open the collection ``name``, creating its table for ``dimension`` if needed.

        Raises:
            InvalidInputError: the name is not a valid collection name or ``dimension`` < 1.
            ConflictError: the collection exists with another dimension.
            BackendUnavailableError: the database or the ``vector`` extension is unavailable.
        """
        validate_collection_name(name)
        if dimension < 1:
            raise InvalidInputError(f"a vector dimension must be at least 1, not {dimension}")
        table = _define_table(name, dimension)
        with (
            _db_errors(f"open the vector collection {name!r}", self._where),
            self._engine.begin() as connection,
        ):
            # Two processes creating the extension or one table at once would collide on the
            # catalogs' unique indexes; the lock makes them take turns until this commit.
            connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('librarian.vector_ddl'))"))
            iterative_scan = self._prepare(connection)
            table.create(connection, checkfirst=True)
            # Collections made before access control lack the grants column; their records are
            # re-upserted with grants by the migration that queued every chunk again.
            connection.execute(
                text(
                    f'ALTER TABLE "{table.name}" ADD COLUMN IF NOT EXISTS access_grants text[] '
                    "NOT NULL DEFAULT '{}'"
                )
            )
            connection.execute(
                text(
                    f'CREATE INDEX IF NOT EXISTS "{table.name}_grants" ON "{table.name}" '
                    "USING gin (access_grants)"
                )
            )
            stored = self._stored_dimension(connection, table.name)
        if stored is not None and stored != dimension:
            raise ConflictError(
                f"the vector collection {name!r} holds vectors of dimension {stored}, not {dimension}",
                hint="reindex into a new collection, or drop this one",
            )
        return PgVectorIndex(self._engine, name, dimension, iterative_scan=iterative_scan)

    @staticmethod
    def _stored_dimension(connection: Connection, table: str) -> int | None:
        # For a vector column the type modifier is its dimension (-1 when it has none).
        typmod = connection.execute(
            text(
                "SELECT atttypmod FROM pg_attribute "
                "WHERE attrelid = to_regclass(:table) AND attname = 'embedding' AND NOT attisdropped"
            ),
            {"table": table},
        ).scalar()
        return None if typmod is None or typmod < 0 else int(typmod)

    def exists(self, name: str) -> bool:
        """True when a collection called ``name`` exists."""
        validate_collection_name(name)
        with (
            _db_errors(f"look up the vector collection {name!r}", self._where),
            self._engine.connect() as connection,
        ):
            return bool(inspect(connection).has_table(table_name(name)))

    def drop(self, name: str) -> None:
        """Delete the collection ``name`` and its vectors; a missing one is ignored."""
        validate_collection_name(name)
        with (
            _db_errors(f"drop the vector collection {name!r}", self._where),
            self._engine.begin() as connection,
        ):
            _define_table(name, None).drop(connection, checkfirst=True)

    def close(self) -> None:
        """Release the engine's connections if this store owns the engine."""
        if self._dispose_engine:
            self._engine.dispose()
