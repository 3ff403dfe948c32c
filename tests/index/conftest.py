"""Fixtures running the vector store contract against every backend.

The Chroma server and the PostgreSQL server (``pgserver``, which bundles pgvector) start once per
session. When one cannot start, its tests skip with the reason, except under CI (``CI=true``),
where they fail: a CI run must not pass by testing nothing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from librarian.index.base import VectorStore
from librarian.index.factory import create_vector_store

_SERVICE_START_SECONDS = 60.0


def unavailable(reason: str) -> NoReturn:
    """Skip the test because a service is missing, or fail it when running under CI."""
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason} (CI is set, so a missing service is a failure)", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _heartbeat(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/v2/heartbeat", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass(frozen=True)
class ChromaServer:
    """A running ``chroma run`` subprocess and the vector store URL that reaches it."""

    url: str
    process: subprocess.Popen[bytes]


@contextmanager
def running_chroma_server(directory: Path) -> Iterator[ChromaServer]:
    """Run a Chroma server on a free port with its data in ``directory``; stop it on exit."""
    executable = Path(sys.executable).with_name("chroma")
    if not executable.exists():
        unavailable(f"the chroma command is not installed next to {sys.executable}")
    port = _free_port()
    http_url = f"http://127.0.0.1:{port}"
    log_path = directory / "server.log"
    command = [
        str(executable),
        "run",
        "--path",
        str(directory / "data"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + _SERVICE_START_SECONDS
        while not _heartbeat(http_url):
            if time.monotonic() > deadline:
                unavailable(
                    f"the Chroma server did not answer within {_SERVICE_START_SECONDS:.0f}s; see {log_path}"
                )
            try:
                # Waiting on the process doubles as the pause between polls and notices an early exit.
                code = process.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                continue
            unavailable(
                f"the Chroma server exited with code {code}: {log_path.read_text(errors='replace')[-2000:]}"
            )
        yield ChromaServer(f"chroma+http://127.0.0.1:{port}", process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def chroma_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``chroma+http://`` URL of a Chroma server run from this virtualenv's ``chroma`` command."""
    with running_chroma_server(tmp_path_factory.mktemp("chroma-server")) as server:
        yield server.url


@pytest.fixture
def chroma_server_launcher() -> Callable[[Path], AbstractContextManager[ChromaServer]]:
    """Starts a private Chroma server, for tests that stop it on purpose."""
    return running_chroma_server


@pytest.fixture(scope="session")
def pgvector_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``pgvector+postgresql://`` URL of a PostgreSQL started by ``pgserver`` (pgvector bundled)."""
    try:
        from pgserver.postgres_server import get_server
    except ImportError:
        unavailable("the pgserver package is not installed (pip install 'librarian[test]')")
    try:
        server = get_server(tmp_path_factory.mktemp("pgserver") / "data", cleanup_mode="delete")
    except (OSError, subprocess.SubprocessError) as exc:
        unavailable(f"pgserver could not start PostgreSQL: {exc}")
    try:
        # get_uri() gives postgresql://postgres:@/postgres?host=<socket dir>
        yield "pgvector+" + server.get_uri()
    finally:
        server.cleanup()


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
