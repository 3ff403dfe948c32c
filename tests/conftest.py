"""Fixtures shared by the whole suite: the embedding model, settings, real PostgreSQL databases."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import OperationalError

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from tests.skipping import unavailable

pytest_plugins = ["tests.service_fixtures"]


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (``@pytest.mark.anyio``) run on asyncio, as the MCP SDK and the servers do."""
    return "asyncio"


# The research acceptance's corpus: all of ``s3`` and the ``s3api`` commands near an upload with tags.
AWS_ACCEPTANCE_SCOPES = (
    "s3",
    *(
        f"s3api {command}"
        for command in (
            "put-object",
            "put-object-tagging",
            "get-object-tagging",
            "delete-object-tagging",
            "put-bucket-tagging",
            "get-bucket-tagging",
            "delete-bucket-tagging",
            "copy-object",
            "create-multipart-upload",
            "upload-part",
            "complete-multipart-upload",
            "create-bucket",
            "get-object",
            "head-object",
            "put-object-acl",
            "put-object-retention",
            "put-object-legal-hold",
            "list-objects-v2",
            "restore-object",
            "put-bucket-policy",
        )
    ),
)

POSTGRES_URL = os.environ.get(
    "LIBRARIAN_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(autouse=True)
def _fresh_cli_options() -> Iterator[None]:
    """The CLI keeps ``--home``/``--config`` in a module global; no test may see another's."""
    from librarian.cli.common import OPTIONS

    OPTIONS.home = OPTIONS.config = OPTIONS.token = None
    yield
    OPTIONS.home = OPTIONS.config = OPTIONS.token = None


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


def _fresh_postgres_database(server_url: str = POSTGRES_URL) -> Iterator[str]:
    """Create a uniquely named database on the server of ``server_url``; drop it afterwards."""
    name = f"librarian_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        unavailable(f"PostgreSQL at {server_url} unreachable: {exc.orig}")
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
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


@pytest.fixture(
    params=[
        "sqlite+chroma",
        pytest.param("postgresql+chroma", marks=pytest.mark.postgres),
        pytest.param("sqlite+chroma-server", marks=pytest.mark.chroma_server),
        pytest.param("postgresql+pgvector", marks=pytest.mark.pgvector),
    ]
)
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """Settings for each backend combination of the facade contract suite.

    ``sqlite+chroma`` is the embedded default; ``postgresql+chroma`` uses the machine's PostgreSQL;
    ``sqlite+chroma-server`` a ``chroma run`` server (a namespace per test, since the server is
    shared); ``postgresql+pgvector`` the PostgreSQL of ``pgserver`` for both truth and vectors.
    """
    home = tmp_path / "home"
    if request.param == "sqlite+chroma":
        yield Settings(home=home)
    elif request.param == "postgresql+chroma":
        yield from (Settings(home=home, database_url=url) for url in _fresh_postgres_database())
    elif request.param == "sqlite+chroma-server":
        server = str(request.getfixturevalue("chroma_server_url"))
        yield Settings(home=home, vector_url=server, index_namespace=f"t{uuid.uuid4().hex[:12]}")
    else:
        server = str(request.getfixturevalue("pgvector_url")).removeprefix("pgvector+")
        server = server.replace("postgresql://", "postgresql+psycopg://", 1)
        for url in _fresh_postgres_database(server):
            yield Settings(home=home, database_url=url, vector_url="pgvector")


@pytest.fixture
def library(store_settings: Settings, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    """A facade on each backend of the contract suite, sharing the loaded model."""
    with Librarian(store_settings, embedder=embedder) as lib:
        yield lib


@pytest.fixture(scope="session")
def aws_cli_home(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Path:
    """A Librarian home holding the real AWS CLI's help, walked once per session: all of ``s3`` and
    the ``s3api`` commands an upload with tags could be confused with.

    The full ``s3``/``s3api`` walk runs the installed ``aws`` (the ``demo`` extra) about 130 times
    (three minutes of a 2-core machine); these commands keep every look-alike that takes
    ``--tagging`` or a tag structure. Whole groups are walked in ``tests/ingest/test_cli_help.py``.
    """
    home = tmp_path_factory.mktemp("aws-cli-home")
    with Librarian(Settings(home=home), embedder=embedder) as lib:
        report = lib.ingest_cli("aws", sdk_name="aws-cli", scopes=AWS_ACCEPTANCE_SCOPES)
    assert report.status == "ok", report
    return home
