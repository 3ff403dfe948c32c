"""Real services for tests: a Chroma server (``chroma run``) and PostgreSQL with pgvector (``pgserver``).

Each starts once per session. When one cannot start, its tests skip with the reason, except under CI
(``CI=true``), where they fail: a CI run must not pass by testing nothing.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.skipping import unavailable

_SERVICE_START_SECONDS = 60.0


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
def pgvector_url() -> Iterator[str]:
    """``pgvector+postgresql://`` URL of a PostgreSQL started by ``pgserver`` (pgvector bundled).

    Its data lives outside pytest's rotating temporary folders: a second pytest session started
    meanwhile would otherwise delete the folder of a server that is still running.
    """
    try:
        from pgserver.postgres_server import get_server
    except ImportError:
        unavailable("the pgserver package is not installed (pip install 'librarian[test]')")
    try:
        server = get_server(
            Path(tempfile.mkdtemp(prefix="librarian-pgserver-")) / "data", cleanup_mode="delete"
        )
    except (OSError, subprocess.SubprocessError) as exc:
        unavailable(f"pgserver could not start PostgreSQL: {exc}")
    try:
        # get_uri() gives postgresql://postgres:@/postgres?host=<socket dir>
        yield "pgvector+" + server.get_uri()
    finally:
        server.cleanup()
