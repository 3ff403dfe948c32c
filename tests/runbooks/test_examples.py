"""The shipped example runbooks, run end to end against real software on this machine: PostgreSQL
(values extracted from psql, branches taken on them), a git repository, and the disk."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from tests.correction.tool_env import git_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "runbooks"


def _runbook_id(lib: Librarian, name: str) -> int:
    imported = lib.runbooks.catalog.import_path(lib.default_principal, EXAMPLES)
    assert imported["errors"] == []
    return int(next(entry["id"] for entry in imported["created"] if entry["name"] == name))


def _path(run: dict[str, Any]) -> list[int]:
    return [int(step["step"]) for step in run["steps"]]


@pytest.fixture
def held_lock(postgres_url: str) -> Iterator[str]:
    """A table locked by one session while another session waits for it (a real lock wait)."""
    engine = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    holder = engine.connect()
    holder.execute(text("CREATE TABLE rb_lock_probe (id int)"))
    holder.execute(text("BEGIN"))
    holder.execute(text("LOCK TABLE rb_lock_probe IN ACCESS EXCLUSIVE MODE"))
    waiter = engine.connect()
    blocked = threading.Thread(
        target=lambda: waiter.execute(text("SELECT count(*) FROM rb_lock_probe")), daemon=True
    )
    blocked.start()
    try:
        yield make_url(postgres_url).database or "test"
    finally:
        holder.execute(text("ROLLBACK"))
        blocked.join(10)
        waiter.close()
        holder.close()
        engine.dispose()


def test_postgresql_investigation_extracts_from_psql_and_branches(
    lib: Librarian, held_lock: str, postgres_url: str
) -> None:
    url = make_url(postgres_url)
    runbook_id = _runbook_id(lib, "PostgreSQL health investigation")
    variables = {
        "pg_host": url.host or "127.0.0.1",
        "pg_port": str(url.port or 5432),
        "pg_user": url.username or "postgres",
        "database": held_lock,
        "connection_alarm_ratio": "0",  # any connection count is "near the limit": step 3 runs
    }

    run = lib.runbooks.start(
        lib.default_principal, runbook_id, variables=variables, problem="queries hanging"
    )

    assert run["status"] == "waiting", run  # the summary (an agent_prompt) waits: no LLM here
    assert _path(run) == [1, 2, 3, 4, 5, 6, 7, 8]
    first = run["steps"][0]["extracted"]
    assert int(first["connections"]) >= 2 and int(first["max_connections"]) >= 10
    assert int(run["steps"][3]["extracted"]["waiting_locks"]) >= 1
    assert "rb_lock_probe" in run["steps"][5]["output"]  # the blocked query, found by pg_blocking_pids
    assert "rb_lock_probe" in run["waiting_for"]["prompt"]

    done = lib.runbooks.answer(
        lib.default_principal, run["id"], "A session holds an exclusive lock: terminate it."
    )
    assert done["status"] == "completed"


def test_postgresql_investigation_of_a_quiet_server_skips_the_branches(
    lib: Librarian, postgres_url: str
) -> None:
    url = make_url(postgres_url)
    runbook_id = _runbook_id(lib, "PostgreSQL health investigation")
    variables = {
        "pg_host": url.host or "127.0.0.1",
        "pg_port": str(url.port or 5432),
        "pg_user": url.username or "postgres",
        "database": url.database or "test",
    }
    run = lib.runbooks.start(lib.default_principal, runbook_id, variables=variables)
    assert _path(run) == [1, 2, 4, 5, 7, 8]
    assert run["steps"][2]["extracted"] == {"waiting_locks": "0"}


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repos" / "project"
    repo.mkdir(parents=True)
    env = git_env(tmp_path)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, env=env, check=True)
    for number in range(3):
        (repo / f"file{number}.txt").write_text(f"content {number}\n")
        subprocess.run(["git", "add", "."], cwd=repo, env=env, check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"commit {number}"], cwd=repo, env=env, check=True)
    (repo / "file0.txt").write_text("changed\n")
    return repo


def test_git_health_check_on_a_real_repository(
    tmp_path: Path, repository: Path, embedder: LocalMiniLMEmbedder
) -> None:
    # The repository is shown to tasks read-only, as an operator would configure it.
    settings = Settings(home=tmp_path / "home", runtime_sandbox_read_only_paths=[repository.parent])
    with Librarian(settings, embedder=embedder) as lib:
        runbook_id = _runbook_id(lib, "Git repository health check")
        run = lib.runbooks.start(
            lib.default_principal, runbook_id, variables={"repo": str(repository), "max_loose_objects": "0"}
        )
        assert run["status"] == "waiting", run
        assert _path(run) == [1, 2, 3, 4, 5]
        loose = int(run["steps"][2]["extracted"]["loose_objects"])
        assert loose >= 9  # three commits: a commit, a tree and a blob each, all loose
        assert f"has {loose} loose objects" in run["waiting_for"]["prompt"]

        done = lib.runbooks.answer(lib.default_principal, run["id"], "ran git gc")

    assert done["status"] == "completed", done
    assert _path(done) == [1, 2, 3, 4, 5, 7, 8]
    assert done["steps"][-1]["output"].strip().endswith("1 changed files")


def test_disk_usage_investigation_asks_for_approval_over_the_threshold(lib: Librarian) -> None:
    runbook_id = _runbook_id(lib, "Disk usage investigation")
    me = lib.default_principal

    fine = lib.runbooks.start(me, runbook_id, variables={"threshold_percent": "101"})
    assert fine["status"] == "completed" and _path(fine) == [1, 2, 5]
    used = int(fine["steps"][0]["extracted"]["used_percent"])
    assert fine["steps"][-1]["output"].strip() == f"/usr is {used}% full (alarm at 101%)"

    full = lib.runbooks.start(me, runbook_id, variables={"threshold_percent": "0", "top": "3"})
    assert full["status"] == "waiting" and full["waiting_for"]["kind"] == "approval"
    largest = full["steps"][2]["output"].strip().splitlines()
    assert 1 <= len(largest) <= 3 and all(line.split()[0].isdigit() for line in largest)
    approved = lib.runbooks.approve(me, full["id"], comment="cleaned /usr/share/doc")
    assert approved["status"] == "completed" and _path(approved) == [1, 2, 3, 4, 5]
