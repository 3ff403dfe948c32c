"""One-shot ``librarian search`` and ``research`` answered by a running ``librarian serve`` of the same
data directory: the same output as in process, and the in-process command whenever the server cannot
answer (stopped, or refusing without a token)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.server_file import FILE_NAME, running_server
from tests.catalog.test_catalog import write_docs
from tests.mcp.test_mcp import free_port

FAST = [sys.executable, "-m", "librarian.cli.fast"]
# Only the variables the fast path accepts: another LIBRARIAN_* setting sends it to the in-process path.
ENV = {
    **{name: value for name, value in os.environ.items() if not name.startswith("LIBRARIAN_")},
    "HF_HUB_OFFLINE": "1",
    "NO_COLOR": "1",
    "COLUMNS": "200",
}


def run(home: Path, *args: str, no_server: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**ENV, **({"LIBRARIAN_NO_SERVER": "1"} if no_server else {})}
    env.pop("LIBRARIAN_HOME", None)
    result = subprocess.run(
        [*FAST, "--home", str(home), *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def served(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Iterator[Path]:
    home = tmp_path / "home"
    with Librarian(Settings(home=home), embedder=embedder) as lib:
        lib.ingest(str(write_docs(tmp_path / "docs", "2.0")), sdk_name="aws-cli", sdk_version="2.0")
    server = subprocess.Popen(
        [*FAST, "--home", str(home), "serve", "--port", str(free_port()), "--no-mcp"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while running_server(home) is None:
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        assert time.monotonic() < deadline, "the server never wrote its address"
        time.sleep(0.2)
    try:
        yield home
    finally:
        server.terminate()
        server.wait(30)


def test_search_and_research_are_answered_by_the_server_as_in_process(served: Path) -> None:
    home = served
    for args in (
        ("search", "create a FIFO queue", "--sdk", "aws", "--top-k", "3", "--json"),
        ("research", "upload an object with tags", "--sdk", "aws", "--json"),
    ):
        fast = run(home, *args)
        local = run(home, *args, no_server=True)
        assert "answered by librarian serve" in fast.stderr
        assert "answered by librarian serve" not in local.stderr
        assert json.loads(fast.stdout) == json.loads(local.stdout)
    human = run(home, "search", "create a FIFO queue")
    assert "create-queue" in human.stdout and "answered by librarian serve" in human.stderr


def test_without_a_server_or_past_its_refusal_the_cli_answers_itself(served: Path) -> None:
    home = served
    since = run(home, "search", "queue", "--since", "2020-01-01", "--json")  # an option it does not send
    assert "answered by librarian serve" not in since.stderr and json.loads(since.stdout)
    configured = subprocess.run(  # a setting of this shell the server may not share
        [*FAST, "--home", str(home), "search", "queue", "--json"],
        capture_output=True,
        text=True,
        env={**ENV, "LIBRARIAN_HYBRID_VECTOR_WEIGHT": "0.5"},
        timeout=300,
    )
    assert configured.returncode == 0 and "answered by librarian serve" not in configured.stderr
    with Librarian(Settings(home=home)) as lib:  # a token now exists: the server refuses the anonymous CLI
        lib.identity.create_organization(lib.default_principal, "acme")
        lib.identity.create_user(lib.default_principal, "acme", "alice")
        lib.identity.create_token(lib.default_principal, "acme", "alice")
    refused = run(home, "search", "create a FIFO queue", "--json")
    assert "answered by librarian serve" not in refused.stderr and json.loads(refused.stdout)


def test_the_server_file_goes_with_the_server(tmp_path: Path, served: Path) -> None:
    assert (served / FILE_NAME).stat().st_mode & 0o077 == 0  # only its user may read where it listens
    record = json.loads((served / FILE_NAME).read_text())
    os.kill(record["pid"], 15)
    deadline = time.monotonic() + 30
    while (served / FILE_NAME).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (served / FILE_NAME).exists() and running_server(served) is None


def test_an_unexpected_failure_is_one_line_on_stderr_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import librarian.cli.main
    from librarian.cli import fast

    def broken() -> None:
        raise TypeError("'ChunkedIteratorResult' object is not subscriptable")

    monkeypatch.setenv("LIBRARIAN_NO_SERVER", "1")
    monkeypatch.delenv("LIBRARIAN_TRACEBACK", raising=False)
    monkeypatch.setattr(librarian.cli.main, "app", broken)

    with pytest.raises(SystemExit) as exited:
        fast.main()

    err = capsys.readouterr().err
    assert exited.value.code == 1
    assert err.startswith("error: unexpected failure (TypeError: 'ChunkedIteratorResult'")
    assert "LIBRARIAN_TRACEBACK=1" in err and "Traceback" not in err
    monkeypatch.setenv("LIBRARIAN_TRACEBACK", "1")
    with pytest.raises(TypeError):
        fast.main()
