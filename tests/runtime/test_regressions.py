"""Regressions: NUL bytes in task output on PostgreSQL, and corrective task keys that collide or grow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from librarian.runtime import attempt_claims, attempt_results, attempts, store
from librarian.runtime.contracts import TaskStatus
from librarian.runtime.evaluator import Evaluation
from librarian.runtime.models import Task
from librarian.runtime.plan import validate_plan
from librarian.runtime.sandbox import EnvironmentManager
from librarian.runtime.spec import WorkflowBuilder
from librarian.runtime.surgery import perform_surgery
from librarian.storage.database import open_database
from tests.runtime.conftest import RuntimeFactory
from tests.runtime.test_surgery import FAILURE

NUL_OUTPUT = ["printf", "a\\0b"]


def test_nul_bytes_in_output_become_replacement_characters(tmp_path: Path) -> None:
    manager = EnvironmentManager(tmp_path / "workspaces")
    outcome = manager.run(NUL_OUTPUT, manager.workspace_for("wf"))
    assert outcome.stdout == "a\ufffdb" and outcome.stdout_bytes == 3


def test_a_task_printing_nul_bytes_completes_on_postgresql(
    open_runtime: RuntimeFactory, postgres_url: str
) -> None:
    """PostgreSQL text and jsonb refuse NUL: storing the result used to fail and requeue it forever."""
    runtime = open_runtime(database_url=postgres_url)
    spec = WorkflowBuilder("nul", goal="print binary").task("bin", "command_executor", {"argv": NUL_OUTPUT})
    report = runtime.run(spec.build(), timeout=30)
    assert report.status == "success", report.failure_report
    assert report.task("bin").status == "success" and report.task("bin").attempt == 1


def _failed_read(sessions: sessionmaker[Session], read_key: str, *, declare_fix_key: bool) -> Task:
    """A workflow whose task ``read_key`` failed; with ``declare_fix_key`` it also has ``read.fix1.dir``."""
    builder = WorkflowBuilder("w", goal="read the input").task(
        read_key, "command_executor", {"argv": ["cat", "data/in.txt"]}
    )
    if declare_fix_key:
        builder = builder.task("read.fix1.dir", "command_executor", {"argv": ["true"]}, depends_on=[read_key])
    with sessions.begin() as session:
        store.create_workflow(session, builder.build(), actor="test")
    with sessions.begin() as session:
        attempt = attempts.dispatch(session, attempts.ready_tasks(session)[0], owner="o", lease_seconds=30)
        assert attempt is not None
        assert attempt_claims.mark_in_progress(session, attempt, worker="e", lease_seconds=30)
        verdict = Evaluation(TaskStatus.FAILED, -1.0, FAILURE)
        attempt_results.apply_result(session, attempt, verdict, actor="v")
    with sessions() as session:
        return next(iter(store.failed_tasks(session)))


def _repair_with_step_dir(sessions: sessionmaker[Session], failed: Task) -> list[str]:
    """The scripted corrector's plan: step ``dir`` (mkdir), then retry; returns the inserted keys."""
    plan = validate_plan(
        {
            "steps": [
                {
                    "id": "dir",
                    "description": "mkdir data",
                    "executor_type": "command_executor",
                    "payload": {"argv": ["mkdir", "-p", "data"]},
                    "rationale": "data/ is missing",
                },
                {
                    "description": "retry",
                    "executor_type": "command_executor",
                    "payload": {"argv": ["cat", "data/in.txt"]},
                    "rationale": "the directory exists now",
                    "retry_failed_task": True,
                },
            ]
        },
        known_executor_types={"command_executor"},
        failed_executor_type="command_executor",
    )
    with sessions.begin() as session:
        target = session.get(Task, failed.task_id)
        assert target is not None
        inserted = perform_surgery(
            session, target, plan, strategy="scripted", category="missing_path", rationale="r", actor="orch"
        )
        assert inserted is not None
        return [task.task_key for task in inserted]


@pytest.fixture
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    _, factory = open_database(f"sqlite:///{tmp_path / 'runtime.db'}")
    return factory


def test_a_corrective_key_the_workflow_already_uses_gets_a_digest(sessions: sessionmaker[Session]) -> None:
    failed = _failed_read(sessions, "read", declare_fix_key=True)
    [key] = _repair_with_step_dir(sessions, failed)
    assert re.fullmatch(r"read\.fix1\.dir~[0-9a-f]{8}", key), key
    with sessions() as session:
        keys = [task.task_key for task in store.workflow_tasks(session, failed.workflow_id)]
    assert sorted(keys) == sorted(["read", "read.fix1.dir", key])


@pytest.mark.parametrize("length", [200, 250])
def test_a_corrective_key_of_a_long_task_key_fits_the_column(
    sessions: sessionmaker[Session], length: int
) -> None:
    failed = _failed_read(sessions, "read", declare_fix_key=False)
    # Specs allow 128 characters; nested repairs make longer keys (``read.fix1.x.fix2.y...``).
    with sessions.begin() as session:
        task = session.get(Task, failed.task_id)
        assert task is not None
        task.task_key = "r" * length
    [key] = _repair_with_step_dir(sessions, failed)
    assert len(key) <= 255
    if length + len(".fix1.dir") <= 255:
        assert key == "r" * length + ".fix1.dir"
    else:  # cut, with a digest keeping it unique
        assert re.fullmatch(r"r{120}\.fix1\.dir~[0-9a-f]{8}", key), key
