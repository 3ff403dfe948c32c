"""Fixtures shared by the whole suite: the embedding model, settings, real PostgreSQL databases."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from tests.services import service_unavailable

POSTGRES_URL = os.environ.get(
    "LIBRARIAN_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="session")
def embedder() -> LocalMiniLMEmbedder:
    """The real offline MiniLM model, loaded once for the session."""
    model = LocalMiniLMEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    model.embed(["warm up"])
    return model


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Embedded-default settings in a fresh data directory."""
    return Settings(home=tmp_path / "home")


def _fresh_postgres_database() -> Iterator[str]:
    name = f"librarian_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        service_unavailable(f"PostgreSQL at {POSTGRES_URL} unreachable: {exc.orig}")
    url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A new, empty database on the real PostgreSQL server, dropped afterwards."""
    yield from _fresh_postgres_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """Settings for each relational backend of the contract suite (vectors: embedded Chroma)."""
    if request.param == "sqlite":
        yield Settings(home=tmp_path / "home")
    else:
        for url in _fresh_postgres_database():
            yield Settings(home=tmp_path / "home", database_url=url)


@pytest.fixture
def library(store_settings: Settings, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    """A facade on each backend of the contract suite, sharing the loaded model."""
    with Librarian(store_settings, embedder=embedder) as lib:
        yield lib
