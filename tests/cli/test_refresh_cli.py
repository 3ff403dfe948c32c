"""``refresh``, ``refresh-interval`` and ``schedule`` as real subprocesses, the way operators run them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, select, update

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.storage.models import Source
from tests.cli.test_cli import LIBRARIAN, run


def ingested_docs(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> tuple[Path, Path]:
    """A data directory with a docs folder indexed as ``acme 1.0`` (in-process: the model is loaded)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "upload.md").write_text("# Uploading\n\nUse `acme upload FILE` to upload a file.\n")
    (folder / "queues.md").write_text("# Queues\n\nUse `acme send --queue URL` to send a message.\n")
    home = tmp_path / "home"
    with Librarian(Settings(home=home), embedder=embedder) as lib:
        assert lib.ingest(str(folder), sdk_name="acme", sdk_version="1.0").status == "ok"
    return home, folder


def test_refresh_reports_incremental_work_and_names_unknown_sources(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    home, docs = ingested_docs(tmp_path, embedder)
    (docs / "queues.md").write_text("# Queues\n\nUse `acme send --fifo` for ordered delivery.\n")

    (outcome,) = json.loads(run(home, "refresh", str(docs), "--json").stdout)
    text = run(home, "refresh").stdout
    unknown = run(home, "refresh", "gcloud", check=1)
    interval = json.loads(run(home, "refresh-interval", "acme", "3600", "--json").stdout)

    assert outcome["status"] == "ok" and outcome["sdk_version"] == "1.0"
    assert (outcome["report"]["updated"], outcome["report"]["unchanged"]) == (1, 1)
    assert "unchanged" in text and str(docs.resolve()) in text
    assert "no source matches 'gcloud'" in unknown.stderr and "librarian sources" in unknown.stderr
    assert interval[0]["refresh_interval_seconds"] == 3600 and interval[0]["own_interval"] is True


def backdate(home: Path, days: int) -> None:
    """Pretend every source was last ingested ``days`` ago (the store is a real SQLite file)."""
    engine = create_engine(Settings(home=home).resolved_database_url)
    with engine.begin() as connection:
        connection.execute(update(Source).values(last_ingested_at=datetime.now(UTC) - timedelta(days=days)))
    engine.dispose()


def wait_for(condition_text: str, log: Path, process: subprocess.Popen[bytes], seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while True:
        text = log.read_text(errors="replace")
        if condition_text in text:
            return text
        assert process.poll() is None, f"the scheduler exited early:\n{text}"
        assert time.monotonic() < deadline, f"{condition_text!r} not logged within {seconds} s:\n{text}"
        time.sleep(0.1)  # polling interval of a deadline-bounded wait


def test_schedule_refreshes_due_sources_and_stops_cleanly_on_sigterm(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    home, docs = ingested_docs(tmp_path, embedder)
    assert json.loads(run(home, "schedule", "--once", "--json").stdout) == []  # nothing due yet
    backdate(home, days=2)
    (docs / "upload.md").write_text("# Uploading\n\nUse `acme put --resumable FILE` to upload.\n")
    log = tmp_path / "schedule.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    env.pop("LIBRARIAN_HOME", None)

    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*LIBRARIAN, "--home", str(home), "schedule", "--poll-seconds", "0.5"],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
        )
        try:
            logged = wait_for("1 updated", log, process, seconds=120)
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    assert code == 0, log.read_text()
    assert f"source 1 {docs.resolve()} (acme 1.0): ok" in logged
    assert "SIGTERM received" in log.read_text() and "scheduler stopped" in log.read_text()
    engine = create_engine(Settings(home=home).resolved_database_url)
    with engine.connect() as connection:
        (status, stats) = connection.execute(select(Source.last_status, Source.last_stats)).one()
    engine.dispose()
    assert status == "ok" and stats["updated"] == 1
