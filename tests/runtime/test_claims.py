"""An executor's claims: one autocommit statement on PostgreSQL, a session on SQLite, stale ones logged."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import BackendUnavailableError
from librarian.runtime import attempts, store
from librarian.runtime.claims import Claims
from librarian.runtime.contracts import TaskSpec, TaskStatus, WorkflowStatus
from librarian.runtime.models import Task
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
