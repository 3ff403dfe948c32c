"""An executor's claims: one autocommit statement on PostgreSQL, a session on SQLite, stale ones logged."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import BackendUnavailableError
from librarian.runtime import attempts, store
from librarian.runtime.claims import BatchClaims, Claims
from librarian.runtime.contracts import TaskSpec, TaskStatus, WorkflowStatus
from librarian.runtime.models import Task
from librarian.runtime.spec import WorkflowBuilder
from librarian.storage.database import open_database
from tests.runtime.test_store import two_step_spec


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runtime.db'}"
    return str(request.getfixturevalue("postgres_url"))


def dispatched(sessions: sessionmaker[Session]) -> tuple[uuid.UUID, TaskSpec]:
    """A fresh workflow whose first task is dispatched: its id and the dispatch message."""
    with sessions.begin() as session:
        workflow_id = store.create_workflow(session, two_step_spec(), actor="test").workflow_id
        spec = attempts.dispatch(session, attempts.ready_tasks(session)[0], owner="orch", lease_seconds=30)
    assert spec is not None
    return workflow_id, spec


def test_a_claim_starts_the_attempt_once_and_a_duplicate_is_logged(database_url: str) -> None:
    engine, sessions = open_database(database_url)
    claims = Claims(sessions, lease_seconds=30)
    workflow_id, spec = dispatched(sessions)

    first = claims.claim(spec, worker="exec-1")
    second = claims.claim(spec, worker="exec-2")

    with sessions() as session:
        task = session.get(Task, uuid.UUID(spec.task_id))
        events = store.events(session, workflow_id, uuid.UUID(spec.task_id))
    claims.close()
    engine.dispose()
    assert first and not second
    assert task is not None and task.status == TaskStatus.IN_PROGRESS.value and task.lease_owner == "exec-1"
    assert [(event.kind, event.actor) for event in events] == [
        ("task_created", "test"),
        ("dispatched", "orch"),
        ("started", "exec-1"),
        ("stale_dispatch_ignored", "exec-2"),
    ]
    assert "duplicate or superseded" in events[-1].reason


def test_a_claim_for_a_cancelled_workflow_is_refused_with_the_reason(database_url: str) -> None:
    engine, sessions = open_database(database_url)
    claims = Claims(sessions, lease_seconds=30)
    workflow_id, spec = dispatched(sessions)
    with sessions.begin() as session:
        workflow = store.get_workflow(session, workflow_id)
        store.finish_workflow(
            session, workflow, WorkflowStatus.CANCELLED, actor="user", reason="cancelled by request"
        )

    claimed = claims.claim(spec, worker="exec")

    with sessions() as session:
        last = store.events(session, workflow_id, uuid.UUID(spec.task_id))[-1]
    claims.close()
    engine.dispose()
    assert not claimed
    assert (last.kind, last.reason) == (
        "stale_dispatch_ignored",
        "attempt 1 not started: the workflow is cancelled",
    )


def terminate_idle_connections(engine: Engine) -> int:
    """End every idle connection to the database but this one; how many there were."""
    with engine.begin() as connection:
        return int(
            connection.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'"
                )
            ).scalar_one()
        )


@pytest.mark.postgres
def test_a_claim_survives_its_kept_connection_being_killed(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine, sessions = open_database(postgres_url)
    claims = Claims(sessions, lease_seconds=30)
    _, first = dispatched(sessions)
    assert claims.claim(first, worker="exec")
    # What a PostgreSQL restart or an idle-connection reaper does to the connection the claims keep.
    killed = terminate_idle_connections(engine)
    _, second = dispatched(sessions)

    claimed = claims.claim(second, worker="exec")

    with sessions() as session:
        task = session.get(Task, uuid.UUID(second.task_id))
    claims.close()
    engine.dispose()
    assert killed >= 1
    assert "connection lost; retrying" in caplog.text  # the kept connection was the one killed
    assert claimed and task is not None and task.status == TaskStatus.IN_PROGRESS.value


@pytest.mark.postgres
def test_a_claim_retried_after_a_lost_answer_is_still_the_claimers(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The claim committed, then the connection died before its answer came back: the retry finds the
    # attempt already held by this worker and reports it claimed, not superseded.
    engine, sessions = open_database(postgres_url)
    claims = Claims(sessions, lease_seconds=30)
    workflow_id, spec = dispatched(sessions)
    assert claims.claim(spec, worker="exec")  # what the first try did before the answer was lost
    terminate_idle_connections(engine)

    again = claims.claim(spec, worker="exec")
    other = claims.claim(spec, worker="exec-2")

    with sessions() as session:
        kinds = [event.kind for event in store.events(session, workflow_id, uuid.UUID(spec.task_id))]
    claims.close()
    engine.dispose()
    assert "connection lost; retrying" in caplog.text
    assert again and not other
    assert kinds.count("started") == 1 and kinds[-1] == "stale_dispatch_ignored"


@pytest.mark.postgres
def test_a_claim_after_close_is_refused_as_unavailable(postgres_url: str) -> None:
    # What an executor thread still running when its worker stops meets: a clear error (the message
    # is redelivered to another worker), not a crash on a closed connection.
    engine, sessions = open_database(postgres_url)
    claims = Claims(sessions, lease_seconds=30)
    _, first = dispatched(sessions)
    assert claims.claim(first, worker="exec")  # this thread now keeps a connection
    _, second = dispatched(sessions)
    claims.close()

    with pytest.raises(BackendUnavailableError, match="claims are closed"):
        claims.claim(second, worker="exec")
    engine.dispose()


def dispatched_batch(sessions: sessionmaker[Session], tasks: int) -> tuple[uuid.UUID, list[TaskSpec]]:
    """A fresh workflow of ``tasks`` independent tasks, all dispatched: its id and the messages."""
    builder = WorkflowBuilder("batch")
    for index in range(tasks):
        builder.task(f"t{index}", "command_executor", {"argv": ["true"]})
    with sessions.begin() as session:
        workflow_id = store.create_workflow(session, builder.build(), actor="test").workflow_id
        specs = [
            spec
            for ready in attempts.ready_tasks(session)
            if (spec := attempts.dispatch(session, ready, owner="orch", lease_seconds=30)) is not None
        ]
    return workflow_id, specs


class DispatchedBatch(NamedTuple):
    sessions: sessionmaker[Session]
    claims: Claims
    workflow_id: uuid.UUID
    specs: list[TaskSpec]


@contextmanager
def dispatched_for_claims(
    database_url: str, tasks: int, lease_seconds: float = 30
) -> Iterator[DispatchedBatch]:
    """A :func:`dispatched_batch` of ``tasks`` and the :class:`Claims` to claim them; closed after."""
    engine, sessions = open_database(database_url)
    claims = Claims(sessions, lease_seconds=lease_seconds)
    workflow_id, specs = dispatched_batch(sessions, tasks)
    try:
        yield DispatchedBatch(sessions, claims, workflow_id, specs)
    finally:
        claims.close()
        engine.dispose()


def test_a_batch_is_claimed_in_one_go_and_what_is_not_claimable_is_logged(database_url: str) -> None:
    with dispatched_for_claims(database_url, 4) as (sessions, claims, workflow_id, specs):
        assert claims.claim(specs[3], worker="exec-0")  # another executor got the last one first

        claimed = claims.claim_many(specs, worker="exec-1")
        batch_reason = "with a batch of 4" if database_url.startswith("postgresql") else "started by exec-1"

        with sessions() as session:
            tasks = {str(task.task_id): task for task in store.workflow_tasks(session, workflow_id)}
            events = {
                spec.task_id: store.events(session, workflow_id, uuid.UUID(spec.task_id)) for spec in specs
            }
    assert claimed == {(spec.task_id, spec.attempt) for spec in specs[:3]}
    for spec in specs[:3]:
        assert (tasks[spec.task_id].status, tasks[spec.task_id].lease_owner) == ("in_progress", "exec-1")
        started = events[spec.task_id][-1]
        assert (started.kind, started.actor) == ("started", "exec-1")
        # PostgreSQL claims the batch in one statement; SQLite claims one task at a time.
        assert batch_reason in started.reason
    assert tasks[specs[3].task_id].lease_owner == "exec-0"
    assert [event.kind for event in events[specs[3].task_id]][-2:] == ["started", "stale_dispatch_ignored"]


def test_batch_claims_answer_once_per_attempt_and_hand_back_what_never_started(database_url: str) -> None:
    with dispatched_for_claims(database_url, 3) as (sessions, claims, workflow_id, specs):
        batch = BatchClaims(claims, worker="exec-1")
        batch.claim_batch(specs)

        assert batch.claim(specs[0], worker="exec-1")
        assert not batch.claim(specs[0], worker="exec-1"), "a duplicate message in the batch runs nothing"
        batch.release_unstarted()  # the executor stops before specs[1] and specs[2] start
        assert not batch.claim(specs[1], worker="exec-1")
        assert claims.claim(specs[1], worker="exec-2"), "handed back: another executor takes it at once"

        with sessions() as session:
            tasks = {str(task.task_id): task for task in store.workflow_tasks(session, workflow_id)}
            released = store.events(session, workflow_id, uuid.UUID(specs[2].task_id))[-1]
    assert [tasks[spec.task_id].status for spec in specs] == ["in_progress", "in_progress", "dispatched"]
    assert (tasks[specs[2].task_id].attempt, released.kind, released.actor) == (1, "released", "exec-1")
    assert "exec-1 is stopping" in released.reason


def test_a_batch_task_that_waited_long_renews_its_lease_before_it_runs(database_url: str) -> None:
    with dispatched_for_claims(database_url, 2, lease_seconds=3.0) as (sessions, claims, _, specs):
        batch = BatchClaims(claims, worker="exec-1")
        batch.claim_batch(specs)
        claimed_until = lease_of(sessions, specs[0])
        time.sleep(1.1)  # the first task ran long: more than a third of the lease has passed...
        redispatched(sessions, specs[1])  # ...and the orchestrator dispatched the second one again

        assert batch.claim(specs[0], worker="exec-1"), "still held (nobody took it): its lease is renewed"
        assert not batch.claim(specs[1], worker="exec-1"), "superseded: attempt 2 runs elsewhere"
        renewed_until = lease_of(sessions, specs[0])
    assert renewed_until > claimed_until, "the first task's lease was renewed before it ran"


def test_a_batch_task_whose_lease_ran_out_does_not_start(database_url: str) -> None:
    # Even before the orchestrator noticed: it may be dispatching the task again at this moment.
    with dispatched_for_claims(database_url, 1, lease_seconds=0.3) as (_, claims, _, specs):
        batch = BatchClaims(claims, worker="exec-1")
        batch.claim_batch(specs)
        time.sleep(0.4)
        started = batch.claim(specs[0], worker="exec-1")
    assert not started


def redispatched(sessions: sessionmaker[Session], spec: TaskSpec) -> TaskSpec:
    """What the orchestrator does once ``spec``'s lease ran out: the next attempt, dispatched."""
    with sessions.begin() as session:
        task = session.get(Task, uuid.UUID(spec.task_id))
        assert task is not None
        again = attempts.redispatch_expired(session, task, owner="orch", lease_seconds=30)
    assert again is not None
    return again


def lease_of(sessions: sessionmaker[Session], spec: TaskSpec) -> datetime:
    with sessions() as session:
        task = session.get(Task, uuid.UUID(spec.task_id))
        assert task is not None and task.lease_expires_at is not None
        return task.lease_expires_at


def test_of_two_attempts_of_one_task_in_a_batch_only_the_current_one_is_claimed(database_url: str) -> None:
    with dispatched_for_claims(database_url, 2) as (sessions, claims, _, specs):
        second = redispatched(sessions, specs[0])  # the first attempt's lease ran out
        assert second.attempt == 2
        # The stale message of attempt 1 and its re-dispatch arrive in one batch (with another task).
        claimed = claims.claim_many([specs[0], second, specs[1]], worker="exec-1")
    assert claimed == {(second.task_id, 2), (specs[1].task_id, specs[1].attempt)}
