"""An ingest killed with SIGKILL leaves a consistent store that the next run completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.exc import OperationalError

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.storage.models import Chunk, Document, VectorOutboxEntry


def stored_documents(database: Path) -> int:
    if not database.exists():
        return 0
    engine = create_engine(f"sqlite:///{database}")
    try:
        with engine.connect() as connection:
            return int(connection.execute(text("SELECT count(*) FROM documents")).scalar_one())
    except OperationalError:  # the schema may not exist yet while the child starts
        return 0
    finally:
        engine.dispose()


def test_kill_9_mid_ingest_then_rerun_completes(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for number in range(400):
        body = "\n\n".join(f"Paragraph {p} about topic {number} and its option --flag-{p}." for p in range(6))
        (docs / f"page{number:03}.md").write_text(f"# command-{number}\n\n{body}\n")
    home = tmp_path / "home"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LIBRARIAN_EMBEDDING_BATCH_SIZE": "16"}
    child = subprocess.Popen(
        [sys.executable, "-m", "librarian.cli.main", "--home", str(home), "ingest", str(docs)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while stored_documents(home / "librarian.db") == 0:
        assert child.poll() is None, "the ingest finished before it could be interrupted"
        assert time.monotonic() < deadline, "no document was stored in time"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    interrupted = stored_documents(home / "librarian.db")
    assert 0 < interrupted < 400

    with Librarian(Settings(home=home), embedder=embedder) as lib:
        report = lib.ingest(str(docs))
        with lib.sessions() as session:
            documents = session.scalar(select(func.count()).select_from(Document))
            chunks = session.scalar(select(func.count()).select_from(Chunk))
            pending = session.scalar(select(func.count()).select_from(VectorOutboxEntry))
        vectors = lib.vectors.active().count()
        found = lib.search("topic 399 option", top_k=3)

    assert report.unchanged == interrupted and report.added == 400 - interrupted
    assert documents == 400 and pending == 0 and vectors == chunks
    assert found[0].entity_name == "command-399"
