"""The runtime's tables and store: migration from 0003, compare-and-set transitions, the event log."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.orm import Session, sessionmaker

from librarian.runtime import attempt_claims, attempt_results, attempts, store
from librarian.runtime.contracts import TaskSpec, TaskStatus
from librarian.runtime.evaluator import Evaluation
from librarian.runtime.models import Task
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec
from librarian.storage.database import create_database_engine, migrate, open_database


def two_step_spec() -> WorkflowSpec:
    return (
        WorkflowBuilder("pair", goal="two steps")
        .task("first", "command_executor", {"argv": ["true"]})
        .task("second", "command_executor", {"argv": ["true"]}, depends_on=["first"])
        .build()
    )


def test_a_revision_0003_store_upgrades_to_the_runtime_tables_with_its_data(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = create_database_engine(url)
    migrate(old, "0003")
    with old.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO sources (id, source_key, uri, kind, tags, created_at, last_errors, last_stats) "
                "VALUES (1, 'k', '/docs', 'local', '[]', '2026-01-01', '[]', '{}')"
            )
        )
    old.dispose()

    engine, sessions = open_database(url)

    tables = set(inspect(engine).get_table_names())
    with engine.connect() as connection:
        revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        kept = connection.execute(text("SELECT uri FROM sources")).scalar_one()
    with sessions.begin() as session:
        workflow = store.create_workflow(session, two_step_spec(), actor="test")
        workflow_id = workflow.workflow_id
    with sessions() as session:
        tasks = store.workflow_tasks(session, workflow_id)
    engine.dispose()
    assert {"workflows", "tasks", "task_events", "strategy_stats"} <= tables
    assert revision >= "0004" and kept == "/docs"
    assert tasks[1].dependencies == [tasks[0].task_id]


def test_postgres_uses_uuid_array_and_jsonb_with_the_indexes(postgres_url: str) -> None:
    engine, sessions = open_database(postgres_url)
    with engine.connect() as connection:
        types: dict[str, str] = dict(
            connection.execute(
                text(
                    "SELECT column_name, udt_name FROM information_schema.columns WHERE table_name = 'tasks'"
                )
            ).all()
        )
    indexes = {index["name"]: index["column_names"] for index in inspect(engine).get_indexes("tasks")}
    with sessions.begin() as session:
        workflow = store.create_workflow(session, two_step_spec(), actor="test")
        workflow_id = workflow.workflow_id
    with sessions() as session:
        first, second = store.workflow_tasks(session, workflow_id)
        ready = attempts.ready_tasks(session)
    engine.dispose()
    assert types["task_id"] == "uuid" and types["dependencies"] == "_uuid"
    assert types["feedback_notes"] == "jsonb"
    assert indexes["ix_tasks_status"] == ["status"]
    assert indexes["ix_tasks_workflow_status"][0] == "workflow_id"  # the index on workflow_id
    assert second.dependencies == [first.task_id]
    assert [task.task_key for task in ready] == ["first"]


def fan_spec() -> WorkflowSpec:
    """Three independent no-op tasks, ``a``, ``b`` and ``c``."""
    builder = WorkflowBuilder("fan", goal="three at once")
    for key in ("a", "b", "c"):
        builder.task(key, "command_executor", {"argv": ["true"]})
    return builder.build()


def sqlite_sessions(tmp_path: Path) -> sessionmaker[Session]:
    _, sessions = open_database(f"sqlite:///{tmp_path / 'runtime.db'}")
    return sessions


def test_a_task_is_dispatched_once_even_when_two_orchestrators_race(tmp_path: Path) -> None:
    sessions = sqlite_sessions(tmp_path)
    with sessions.begin() as session:
        workflow_id = store.create_workflow(session, two_step_spec(), actor="test").workflow_id
    with sessions() as one, sessions() as two:
        task_one = attempts.ready_tasks(one)[0]
        task_two = attempts.ready_tasks(two)[0]  # both saw the task pending
        first = attempts.dispatch(one, task_one, owner="orch-1", lease_seconds=30)
        one.commit()
        second = attempts.dispatch(two, task_two, owner="orch-2", lease_seconds=30)
        two.commit()
    with sessions() as session:
        task = store.workflow_tasks(session, workflow_id)[0]
    assert first is not None and first.attempt == 1
    assert second is None
    assert task.status == TaskStatus.DISPATCHED.value and task.lease_owner == "orch-1"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each runtime database: the claim is one statement on PostgreSQL and two on SQLite."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runtime.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_a_claim_and_a_result_are_applied_once_and_duplicates_are_logged(database_url: str) -> None:
    engine, sessions = open_database(database_url)
    with sessions.begin() as session:
        workflow_id = store.create_workflow(session, two_step_spec(), actor="test").workflow_id
        spec = attempts.dispatch(session, attempts.ready_tasks(session)[0], owner="orch", lease_seconds=30)
    assert spec is not None
    verdict = Evaluation(
        TaskStatus.SUCCESS, 1.0, {"status": "success", "notes": "ok", "stdout": "", "stderr": ""}
    )
    with sessions.begin() as session:
        assert attempt_claims.mark_in_progress(session, spec, worker="exec", lease_seconds=30)
    with sessions.begin() as session:
        assert not attempt_claims.mark_in_progress(session, spec, worker="exec2", lease_seconds=30)
    with sessions.begin() as session:
        applied = attempt_results.apply_result(session, spec, verdict, actor="eval")
    with sessions.begin() as session:
        duplicate = attempt_results.apply_result(session, spec, verdict, actor="eval")
    with sessions() as session:
        workflow = store.get_workflow(session, workflow_id)
        task = session.get(Task, uuid.UUID(spec.task_id))
        events = store.events(session, workflow_id, task.task_id if task else None)
    engine.dispose()
    assert applied and not duplicate
    assert task is not None and task.status == "success" and task.reward == 1.0
    assert workflow.total_reward == 1.0
    assert [event.kind for event in events] == [
        "task_created",
        "dispatched",
        "started",
        "stale_dispatch_ignored",
        "result_applied",
        "stale_result_ignored",
    ]
    started = events[2]
    assert (started.from_status, started.to_status, started.actor) == ("dispatched", "in_progress", "exec")
    assert started.reason == "attempt 1 started by exec" and started.data == {}


def test_a_duplicate_inside_one_batch_is_applied_once_and_logged_after(database_url: str) -> None:
    _, sessions = open_database(database_url)
    with sessions.begin() as session:
        workflow_id = store.create_workflow(session, two_step_spec(), actor="test").workflow_id
        spec = attempts.dispatch(session, attempts.ready_tasks(session)[0], owner="orch", lease_seconds=30)
    assert spec is not None
    verdict = Evaluation(
        TaskStatus.SUCCESS, 1.0, {"status": "success", "notes": "ok", "stdout": "", "stderr": ""}
    )
    with sessions.begin() as session:
        assert attempt_claims.mark_in_progress(session, spec, worker="exec", lease_seconds=30)
    with sessions.begin() as session:
        flags = attempt_results.apply_results(session, [(spec, verdict), (spec, verdict)], actor="eval")
    with sessions() as session:
        workflow = store.get_workflow(session, workflow_id)
        kinds = [event.kind for event in store.events(session, workflow_id, uuid.UUID(spec.task_id))]
    assert flags == [True, False]
    assert workflow.total_reward == 1.0
    assert kinds[-2:] == ["result_applied", "stale_result_ignored"]


def test_a_batch_applies_current_results_and_logs_stale_ones_the_same_on_both_databases(
    database_url: str,
) -> None:
    # On PostgreSQL a batch is one statement; its outcome must be the per-result path's, row for row.
    _, sessions = open_database(database_url)
    spec = (
        WorkflowBuilder("trio", goal="three at once")
        .task("a", "command_executor", {"argv": ["true"]})
        .task("b", "command_executor", {"argv": ["true"]})
        .task("c", "command_executor", {"argv": ["false"]})
        .build()
    )
    with sessions.begin() as session:
        workflow_id = store.create_workflow(session, spec, actor="test").workflow_id
        messages = [
            message
            for task in attempts.ready_tasks(session)
            if (message := attempts.dispatch(session, task, owner="orch", lease_seconds=30)) is not None
        ]
    a, b, c = sorted(messages, key=lambda message: message.description)
    success = Evaluation(
        TaskStatus.SUCCESS, 1.0, {"status": "success", "notes": "ok", "stdout": "", "stderr": ""}
    )
    failure = Evaluation(TaskStatus.FAILED, -1.0, {"status": "failure", "error_type": "CommandFailedError"})
    stale_b = TaskSpec(b.task_id, b.workflow_id, b.executor_type, b.payload, b.description, attempt=0)

    with sessions.begin() as session:
        flags = attempt_results.apply_results(
            session, [(a, success), (stale_b, success), (c, failure)], actor="eval"
        )

    with sessions() as session:
        workflow = store.get_workflow(session, workflow_id)
        tasks = {task.task_key: task for task in store.workflow_tasks(session, workflow_id)}
        last_events = {
            key: store.events(session, workflow_id, task.task_id)[-1] for key, task in tasks.items()
        }
        events = {key: (event.kind, event.from_status, event.to_status) for key, event in last_events.items()}
    assert flags == [True, False, True]
    assert (tasks["a"].status, tasks["a"].reward, tasks["a"].lease_owner) == ("success", 1.0, None)
    assert tasks["a"].feedback_notes == success.feedback
    assert (tasks["b"].status, tasks["b"].reward) == ("dispatched", None)
    assert (tasks["c"].status, tasks["c"].reward) == ("failed", -1.0)
    assert workflow.total_reward == 0.0
    assert events == {
        "a": ("result_applied", "dispatched", "success"),
        "b": ("stale_result_ignored", None, None),
        "c": ("result_applied", "dispatched", "failed"),
    }
    assert (last_events["a"].actor, last_events["a"].reason) == ("eval", "attempt 1 success (reward +1.00)")
    assert last_events["a"].data == {"attempt": 1, "reward": 1.0}


def test_a_pass_dispatches_each_ready_task_once_when_two_orchestrators_race(database_url: str) -> None:
    # On PostgreSQL a pass's pending tasks are leased by one statement, each still a compare-and-set.
    _, sessions = open_database(database_url)
    with sessions.begin() as session:
        workflow_id = store.create_workflow(session, fan_spec(), actor="test").workflow_id
    with sessions() as one, sessions() as two:
        ready_one = attempts.ready_tasks(one)
        ready_two = attempts.ready_tasks(two)  # both saw every task pending
        first = attempts.dispatch_ready(one, ready_one, owner="orch-1", lease_seconds=30)
        one.commit()
        second = attempts.dispatch_ready(two, ready_two, owner="orch-2", lease_seconds=30)
        two.commit()
    with sessions() as session:
        tasks = store.workflow_tasks(session, workflow_id)
        dispatched = [
            (event.actor, event.from_status, event.to_status, event.reason, event.data)
            for task in tasks
            for event in store.events(session, workflow_id, task.task_id)
            if event.kind == "dispatched"
        ]
    assert [message.description for message in first] == ["a", "b", "c"]
    assert {message.attempt for message in first} == {1} and second == []
    assert {(task.status, task.lease_owner, task.attempt) for task in tasks} == {("dispatched", "orch-1", 1)}
    assert {task.idempotency_key for task in tasks} == {f"{task.task_id.hex}:1" for task in tasks}
    reason = "dependencies succeeded; dispatching attempt 1"
    assert dispatched == [("orch-1", "pending", "dispatched", reason, {"attempt": 1})] * 3


def test_only_results_that_give_the_orchestrator_work_wake_it(database_url: str) -> None:
    _, sessions = open_database(database_url)
    with sessions.begin() as session:
        fan_id = store.create_workflow(session, fan_spec(), actor="test").workflow_id
        chain_id = store.create_workflow(session, two_step_spec(), actor="test").workflow_id
        solo = WorkflowBuilder("solo", goal="one").task("only", "command_executor", {"argv": ["true"]})
        solo_id = store.create_workflow(session, solo.build(), actor="test").workflow_id
        messages = attempts.dispatch_ready(
            session, attempts.ready_tasks(session), owner="o", lease_seconds=30
        )
    fan = sorted((m for m in messages if m.workflow_id == str(fan_id)), key=lambda m: m.description)
    [first] = [m for m in messages if m.workflow_id == str(chain_id)]
    [only] = [m for m in messages if m.workflow_id == str(solo_id)]
    success = Evaluation(
        TaskStatus.SUCCESS, 1.0, {"status": "success", "notes": "ok", "stdout": "", "stderr": ""}
    )
    failure = Evaluation(TaskStatus.FAILED, -1.0, {"status": "failure", "error_type": "CommandFailedError"})

    def apply(spec: TaskSpec, evaluation: Evaluation) -> bool:
        with sessions.begin() as session:
            assert attempt_results.apply_results(session, [(spec, evaluation)], actor="eval") == [True]
            workflow_id = uuid.UUID(spec.workflow_id)
            return attempt_results.orchestrator_needed(session, [(workflow_id, evaluation)])

    assert apply(first, success)  # "second" waits on it: now it can be dispatched
    assert not apply(fan[0], success)  # nothing waits on it, and the fan-out is not done
    assert apply(fan[1], failure)  # a failure is always corrected
    assert apply(only, success)  # its workflow has wholly succeeded: it can be finished
    with sessions() as session:
        assert not attempt_results.orchestrator_needed(session, [])


def test_postgres_event_log_takes_no_lock_on_its_workflow(postgres_url: str) -> None:
    # Revision 0007: appending an event must not check (and lock) the workflow row.
    engine, _ = open_database(postgres_url)
    foreign_keys = inspect(engine).get_foreign_keys("task_events")
    indexes = {index["name"] for index in inspect(engine).get_indexes("task_events")}
    engine.dispose()
    assert foreign_keys == []
    assert "ix_task_events_workflow_id" in indexes
