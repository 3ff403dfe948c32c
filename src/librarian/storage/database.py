"""Engine creation and schema migration for SQLite and PostgreSQL.

The schema is owned by Alembic (``storage/migrations``); :func:`open_database` upgrades it to the
newest revision on every start, so a data directory made by an older release keeps working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import BackendUnavailableError, InvalidInputError, MissingExtraError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def create_database_engine(url: str) -> Engine:
    """Create an engine for ``url`` with the pragmas and pool settings Librarian relies on.

    Raises:
        InvalidInputError: the URL names a database Librarian does not support.
        MissingExtraError: PostgreSQL was asked for without the ``postgres`` extra installed.
    """
    if url.startswith("sqlite"):
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        event.listen(engine, "connect", _configure_sqlite)
        return engine
    if url.startswith("postgresql"):
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise MissingExtraError("psycopg", "postgres") from exc
        return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)
    raise InvalidInputError(
        f"unsupported database URL {url!r}",
        hint="use sqlite:///PATH or postgresql+psycopg://user@host:port/db",
    )


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets searches read while an ingest writes; foreign keys make cascades real.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrade the schema of ``engine``'s database to ``revision`` (default: the newest).

    Raises:
        BackendUnavailableError: the database cannot be reached.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    except OperationalError as exc:
        raise BackendUnavailableError(
            f"cannot reach the database at {engine.url.render_as_string(hide_password=True)}: {exc.orig}",
            hint="check LIBRARIAN_DATABASE_URL and that the server is running",
        ) from exc
    except SQLAlchemyError as exc:
        raise BackendUnavailableError(f"schema migration failed: {exc}") from exc


def open_database(url: str) -> tuple[Engine, sessionmaker[Session]]:
    """Create the engine, migrate the schema and return it with a session factory."""
    engine = create_database_engine(url)
    migrate(engine)
    return engine, sessionmaker(engine, expire_on_commit=False)
