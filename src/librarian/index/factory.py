"""Pick the vector store backend from a URL.

Accepted forms:

* ``chroma:///abs/path`` or ``chroma://relative/path``: embedded Chroma persisted in that directory;
* ``chroma+http://host:port`` (or ``chroma+https://``): a Chroma server started with ``chroma run``;
* ``pgvector``: pgvector in the PostgreSQL database Librarian already uses (pass its engine);
* ``pgvector+postgresql+psycopg://user@host:port/db``: pgvector in another PostgreSQL database.

Backends are imported only when chosen, so the optional ``postgres`` extra is needed only for
pgvector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import ArgumentError

from librarian.errors import InvalidInputError, MissingExtraError
from librarian.index.base import VectorStore

if TYPE_CHECKING:
    from librarian.index.pgvector import PgVectorStore

ACCEPTED_FORMS: Final = (
    "chroma:///abs/path, chroma://relative/path, chroma+http://host:port, pgvector, "
    "pgvector+postgresql+psycopg://user@host:port/db"
)
_DEFAULT_CHROMA_PORT: Final = 8000


def create_vector_store(url: str, engine: Engine | None = None) -> VectorStore:
    """Open the vector store that ``url`` names.

    Args:
        url: one of the forms in this module's docstring.
        engine: the relational store's engine; required by (and only used for) ``pgvector``.

    Raises:
        InvalidInputError: the URL has an unknown form, or ``pgvector`` was asked for without a
            PostgreSQL engine.
        MissingExtraError: pgvector was asked for without the ``postgres`` extra installed.
        BackendUnavailableError: the Chroma directory or server cannot be used.

    Example:
        >>> store = create_vector_store("chroma:///var/lib/librarian/chroma")  # doctest: +SKIP
    """
    scheme, separator, rest = url.partition("://")
    if url == "pgvector":
        return _shared_pgvector(engine)
    if separator and scheme == "chroma":
        return _embedded_chroma(url, rest)
    if separator and scheme in ("chroma+http", "chroma+https"):
        return _chroma_server(url, ssl=scheme == "chroma+https")
    if separator and scheme.startswith("pgvector+postgresql"):
        return _own_pgvector(url.removeprefix("pgvector+"))
    raise InvalidInputError(f"unsupported vector store URL {url!r}", hint=f"use one of: {ACCEPTED_FORMS}")


def _embedded_chroma(url: str, path: str) -> VectorStore:
    if not path:
        raise InvalidInputError(
            f"the vector store URL {url!r} names no directory",
            hint="use chroma:///absolute/path or chroma://relative/path",
        )
    from librarian.index.chroma import ChromaVectorStore

    return ChromaVectorStore.embedded(path)


def _chroma_server(url: str, *, ssl: bool) -> VectorStore:
    parts = urlsplit(url)
    try:
        port = parts.port or _DEFAULT_CHROMA_PORT
    except ValueError as exc:
        raise InvalidInputError(f"the vector store URL {url!r} has an invalid port") from exc
    if not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise InvalidInputError(
            f"the vector store URL {url!r} must name only a host and a port",
            hint="use chroma+http://host:port",
        )
    from librarian.index.chroma import ChromaVectorStore

    return ChromaVectorStore.server(parts.hostname, port, ssl=ssl)


def _pgvector_store_class() -> type[PgVectorStore]:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("psycopg", "postgres") from exc
    try:
        from librarian.index.pgvector import PgVectorStore
    except ImportError as exc:
        raise MissingExtraError("pgvector", "postgres") from exc
    return PgVectorStore


def _shared_pgvector(engine: Engine | None) -> VectorStore:
    if engine is None or engine.dialect.name != "postgresql":
        found = "no database engine" if engine is None else f"a {engine.dialect.name} database"
        raise InvalidInputError(
            f"the vector store 'pgvector' lives in Librarian's PostgreSQL database, but there is {found}",
            hint="set the database URL to postgresql+psycopg://..., use "
            "pgvector+postgresql+psycopg://... for a separate database, or use chroma:// instead",
        )
    return _pgvector_store_class()(engine)


def _own_pgvector(database_url: str) -> VectorStore:
    if database_url.startswith("postgresql://"):
        database_url = "postgresql+psycopg://" + database_url.removeprefix("postgresql://")
    if not database_url.startswith("postgresql+psycopg://"):
        raise InvalidInputError(
            f"unsupported PostgreSQL driver in the vector store URL {'pgvector+' + database_url!r}",
            hint="use pgvector+postgresql+psycopg://user@host:port/db (psycopg 3)",
        )
    store_class = _pgvector_store_class()
    try:
        engine = create_engine(database_url, pool_pre_ping=True)
    except ArgumentError as exc:
        raise InvalidInputError(f"invalid PostgreSQL URL in the vector store URL: {exc}") from exc
    return store_class(engine, dispose_engine=True)
