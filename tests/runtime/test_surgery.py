"""DAG surgery in one transaction: the failed task pauses, corrective tasks go in front of it, limits hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from librarian.runtime import attempt_claims, attempt_results, attempts, store
from librarian.runtime.contracts import TaskStatus
from librarian.runtime.evaluator import Evaluation
from librarian.runtime.models import Task
from librarian.runtime.plan import validate_plan
from librarian.runtime.spec import WorkflowBuilder
from librarian.runtime.surgery import Limits, fail_workflow, limit_reached, perform_surgery
from librarian.storage.database import open_database

FAILURE = {
    "status": "failed",
    "error_type": "CommandFailedError",
    "error_message": "cat: data/in.txt: No such file or directory",
    "traceback": "",
    "details": {"exit_code": 1, "argv": ["cat", "data/in.txt"]},
}
PLAN = {
    "steps": [
        {
            "id": "dir",
            "description": "mkdir data",
            "executor_type": "command_executor",
            "payload": {"argv": ["mkdir", "-p", "data"]},
            "rationale": "data/ is missing",
        },
        {
            "id": "file",
            "description": "write data/in.txt",
            "executor_type": "file_writer",
            "payload": {"path": "data/in.txt", "content": "x"},
            "rationale": "the input is missing",
        },
        {
            "description": "retry",
            "executor_type": "command_executor",
            "payload": {"argv": ["cat", "data/in.txt"]},
            "rationale": "input exists now",
            "retry_failed_task": True,
        },
    ]
}


@pytest.fixture
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    _, factory = open_database(f"sqlite:///{tmp_path / 'runtime.db'}")
    return factory


def failed_task(sessions: sessionmaker[Session]) -> Task:
    spec = (
        WorkflowBuilder("w", goal="read the input")
        .task("start", "command_executor", {"argv": ["true"]})
        .task("read", "command_executor", {"argv": ["cat", "data/in.txt"]}, depends_on=["start"])
        .task("use", "command_executor", {"argv": ["true"]}, depends_on=["read"])
        .build()
    )
    ok = Evaluation(TaskStatus.SUCCESS, 1.0, {"status": "success", "notes": ""})
    bad = Evaluation(TaskStatus.FAILED, -1.0, FAILURE)
    with sessions.begin() as session:
        store.create_workflow(session, spec, actor="test")
    for verdict in (ok, bad):
        with sessions.begin() as session:
            attempt = attempts.dispatch(
                session, attempts.ready_tasks(session)[0], owner="o", lease_seconds=30
            )
            assert attempt is not None
            assert attempt_claims.mark_in_progress(session, attempt, worker="e", lease_seconds=30)
            attempt_results.apply_result(session, attempt, verdict, actor="v")
    with sessions() as session:
        return next(task for task in store.failed_tasks(session))


def test_surgery_pauses_the_task_and_inserts_chained_corrective_tasks(
    sessions: sessionmaker[Session],
) -> None:
    task = failed_task(sessions)
    plan = validate_plan(
        PLAN,
        known_executor_types={"command_executor", "file_writer"},
        failed_executor_type="command_executor",
    )
    with sessions.begin() as session:
        target = session.get(Task, task.task_id)
        assert target is not None
        inserted = perform_surgery(
            session, target, plan, strategy="scripted", category="missing_path", rationale="r", actor="orch"
        )
    with sessions() as session:
        tasks = {t.task_key: t for t in store.workflow_tasks(session, task.workflow_id)}
        log = store.events(session, task.workflow_id)
    assert inserted is not None and len(inserted) == 2
    read, fix_dir, fix_file = tasks["read"], tasks["read.fix1.dir"], tasks["read.fix1.file"]
    assert read.status == "paused" and read.retries == 1
    assert read.dependencies == [tasks["start"].task_id, fix_file.task_id]
    assert read.correction_strategy == "scripted" and read.error_category == "missing_path"
    assert fix_dir.parent_id == read.task_id and fix_file.parent_id == read.task_id
    assert fix_dir.dependencies == [tasks["start"].task_id]
    assert fix_file.dependencies == [fix_dir.task_id]
    assert tasks["use"].status == "pending" and tasks["use"].dependencies == [read.task_id]
    surgery = next(event for event in log if event.kind == "surgery")
    assert (surgery.from_status, surgery.to_status) == ("failed", "paused")
    assert "No such file or directory" in surgery.reason and surgery.data["strategy"] == "scripted"
    inserted_events = [event for event in log if event.kind == "task_inserted"]
    assert {event.task_id for event in inserted_events} == {fix_dir.task_id, fix_file.task_id}
    # Only the corrective tasks are ready now; the paused task waits for them.
    with sessions() as session:
        assert [t.task_key for t in attempts.ready_tasks(session)] == ["read.fix1.dir"]


def test_a_second_surgery_on_the_same_failure_changes_nothing(sessions: sessionmaker[Session]) -> None:
    task = failed_task(sessions)
    plan = validate_plan(
        PLAN,
        known_executor_types={"command_executor", "file_writer"},
        failed_executor_type="command_executor",
    )
    with sessions() as first, sessions() as second:
        one = first.get(Task, task.task_id)
        two = second.get(Task, task.task_id)
        assert one is not None and two is not None
        kwargs = {"strategy": "s", "category": "c", "rationale": "r", "actor": "o"}
        assert perform_surgery(first, one, plan, **kwargs) is not None
        first.commit()
        assert perform_surgery(second, two, plan, **kwargs) is None
        second.commit()
    with sessions() as session:
        assert len(store.workflow_tasks(session, task.workflow_id)) == 5


def test_limits_end_the_workflow_with_a_report(sessions: sessionmaker[Session]) -> None:
    task = failed_task(sessions)
    with sessions.begin() as session:
        target = session.get(Task, task.task_id)
        assert target is not None
        assert limit_reached(session, target, Limits(max_retries=3, max_depth=3)) is None
        target.retries = 3
        reason = limit_reached(session, target, Limits(max_retries=3, max_depth=3))
        assert reason is not None and "after 3 retries (limit 3)" in reason
        assert "depth limit 0" in str(limit_reached(session, target, Limits(max_retries=9, max_depth=0)))
        assert fail_workflow(session, target, reason, actor="orch")
    with sessions() as session:
        workflow = store.get_workflow(session, task.workflow_id)
    assert workflow.final_status == "failed"
    assert workflow.failure_report is not None
    assert workflow.failure_report["task_key"] == "read"
    assert workflow.failure_report["failure"]["details"]["exit_code"] == 1
