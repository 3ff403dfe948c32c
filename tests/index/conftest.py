"""Fixtures running the vector store contract against every backend.

The services themselves (a Chroma server, PostgreSQL with pgvector) come from
``tests/service_fixtures.py``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from librarian.index.base import VectorStore
from librarian.index.factory import create_vector_store
from tests.skipping import unavailable


@pytest.fixture(scope="session")
def postgres_without_pgvector_url() -> str:
    """``pgvector+`` URL of the PostgreSQL at LIBRARIAN_TEST_POSTGRES_URL when it lacks pgvector."""
    url = os.environ.get("LIBRARIAN_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            available = connection.execute(
                text("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
            ).scalar_one()
    except SQLAlchemyError as exc:
        unavailable(f"no PostgreSQL at {url} (set LIBRARIAN_TEST_POSTGRES_URL): {exc}")
    finally:
        engine.dispose()
    if available:
        pytest.skip(f"the PostgreSQL at {url} has the vector extension, so it cannot show its absence")
    return "pgvector+" + url


@pytest.fixture(
    params=[
        pytest.param("chroma-embedded"),
        pytest.param("chroma-server", marks=pytest.mark.chroma_server),
        pytest.param("pgvector", marks=pytest.mark.pgvector),
    ]
)
def vector_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of one backend; every contract test runs once per backend."""
    if request.param == "chroma-embedded":
        return f"chroma://{tmp_path / 'chroma'}"
    if request.param == "chroma-server":
        return str(request.getfixturevalue("chroma_server_url"))
    return str(request.getfixturevalue("pgvector_url"))


@pytest.fixture
def open_store(vector_url: str) -> Iterator[Callable[[], VectorStore]]:
    """Opens new store instances on the backend under test; all are closed at the end."""
    stores: list[VectorStore] = []

    def make() -> VectorStore:
        store = create_vector_store(vector_url)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(open_store: Callable[[], VectorStore]) -> VectorStore:
    """A store on the backend under test."""
    return open_store()


@pytest.fixture
def collection_name(open_store: Callable[[], VectorStore]) -> Iterator[str]:
    """A collection name no other test uses (the servers are shared); dropped afterwards."""
    name = f"contract-{uuid.uuid4().hex[:12]}"
    yield name
    # A fresh store, because the test may have closed its own.
    open_store().drop(name)
