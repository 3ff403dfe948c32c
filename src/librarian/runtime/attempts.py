"""The life of one attempt in the database: ready, dispatched, lease expired.

A worker's claim of it (started) is in :mod:`librarian.runtime.attempt_claims`, its end (the evaluated
result applied) in :mod:`librarian.runtime.attempt_results`.

This is the hot path of the runtime: every task goes through it at least once, so each step is one
compare-and-set ``UPDATE`` (``... WHERE status = :expected AND attempt = :attempt``) plus an insert into
the event log, as Core statements built once at import (about a sixth of the CPU of building an ORM
statement per call) rather than ORM loads and refreshes. Two workers racing on one task
cannot both win; a message for an attempt that is no longer current changes nothing and takes the
slow path that writes *why* to the event log.

Readiness is decided in SQL (``NOT EXISTS`` a dependency that has not succeeded: ``= ANY(uuid[])`` on
PostgreSQL, ``json_each`` on SQLite), so a pass over a long chain loads only the tasks it dispatches.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Select,
    any_,
    bindparam,
    exists,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from librarian.runtime.contracts import TaskSpec, TaskStatus, WorkflowStatus
from librarian.runtime.models import TASK_EVENTS as _EVENTS
from librarian.runtime.models import TASKS as _TASKS
from librarian.runtime.models import WORKFLOWS as _WORKFLOWS
from librarian.runtime.models import Task
from librarian.runtime.store import (
    IN_FLIGHT,
    WAITING,
    as_uuid,
    event_row,
    idempotency_key,
    transition,
)
from librarian.storage.models import utcnow

_RUNNING = WorkflowStatus.RUNNING.value


class ReadyTask(NamedTuple):
    """A task whose dependencies all succeeded, as the dispatcher needs it."""

    task_id: uuid.UUID
    workflow_id: uuid.UUID
    task_key: str
    status: str
    attempt: int
    retries: int
    executor_type: str
    payload: dict[str, Any]
    description: str


_DISPATCH = (
    update(_TASKS)
    .where(
        _TASKS.c.task_id == bindparam("p_task_id"),
        _TASKS.c.status == bindparam("p_status"),
        _TASKS.c.attempt == bindparam("p_attempt"),
    )
    .values(
        status=TaskStatus.DISPATCHED.value,
        attempt=bindparam("p_new_attempt"),
        idempotency_key=bindparam("p_key"),
        lease_owner=bindparam("p_owner"),
        lease_expires_at=bindparam("p_expires"),
        last_update_timestamp=bindparam("p_now"),
    )
)

# PostgreSQL: lease a whole pass's pending tasks in one statement, with their ``dispatched`` events
# (the compare-and-set of _DISPATCH for each JSON row); the ids of the tasks won come back.
_DISPATCH_ALL = text(
    """
    WITH ready AS (
        SELECT (r->>'task_id')::uuid AS task_id, (r->>'attempt')::int AS attempt, r->>'key' AS key,
               r->>'reason' AS reason, r->'data' AS data
        FROM jsonb_array_elements(CAST(:p_rows AS jsonb)) AS r
    ), leased AS (
        UPDATE tasks
        SET status = 'dispatched', attempt = ready.attempt + 1, idempotency_key = ready.key,
            lease_owner = :p_owner, lease_expires_at = :p_expires, last_update_timestamp = :p_now
        FROM ready
        WHERE tasks.task_id = ready.task_id AND tasks.status = 'pending' AND tasks.attempt = ready.attempt
        RETURNING tasks.task_id, tasks.workflow_id, ready.reason, ready.data
    )
    INSERT INTO task_events (task_id, workflow_id, at, kind, from_status, to_status, actor, reason, data)
    SELECT task_id, workflow_id, :p_now, 'dispatched', 'pending', 'dispatched', :p_owner, reason, data
    FROM leased
    RETURNING task_id
    """
).bindparams(
    bindparam("p_now", type_=_EVENTS.c.at.type), bindparam("p_expires", type_=_TASKS.c.lease_expires_at.type)
)

_EXPIRED = (
    select(_TASKS.c.task_id)
    .join(_WORKFLOWS, _WORKFLOWS.c.workflow_id == _TASKS.c.workflow_id)
    .where(
        _TASKS.c.status.in_(IN_FLIGHT),
        _TASKS.c.lease_expires_at < bindparam("p_now"),
        _WORKFLOWS.c.final_status == _RUNNING,
    )
)

_FAILED = (
    select(_TASKS.c.task_id)
    .join(_WORKFLOWS, _WORKFLOWS.c.workflow_id == _TASKS.c.workflow_id)
    .where(_TASKS.c.status == TaskStatus.FAILED.value, _WORKFLOWS.c.final_status == _RUNNING)
    .order_by(_TASKS.c.last_update_timestamp)
)

_FINISHABLE = select(_WORKFLOWS.c.workflow_id).where(
    _WORKFLOWS.c.final_status == _RUNNING,
    ~exists().where(
        _TASKS.c.workflow_id == _WORKFLOWS.c.workflow_id, _TASKS.c.status != TaskStatus.SUCCESS.value
    ),
)

_INSERT_EVENTS = insert(_EVENTS)


def _unmet_dependency(dialect: str) -> ColumnElement[bool]:
    """``EXISTS`` a dependency of the outer ``tasks`` row that has not succeeded."""
    dependency = _TASKS.alias("dependency")
    not_done = dependency.c.status != TaskStatus.SUCCESS.value
    if dialect == "postgresql":
        return exists().where(dependency.c.task_id == any_(_TASKS.c.dependencies), not_done)
    # SQLite keeps the list as a JSON array of the same 32-digit hex text as the task_id column.
    listed = func.json_each(_TASKS.c.dependencies).table_valued("value").alias("listed")
    joined = select(1).select_from(listed).join(dependency, dependency.c.task_id == listed.c.value)
    return exists(joined.where(not_done))


def _ready_query(dialect: str) -> Select[Any]:
    return (
        select(*(_TASKS.c[name] for name in ReadyTask._fields))
        .join(_WORKFLOWS, _WORKFLOWS.c.workflow_id == _TASKS.c.workflow_id)
        .where(
            _TASKS.c.status.in_(WAITING),
            _WORKFLOWS.c.final_status == _RUNNING,
            ~_unmet_dependency(dialect),
        )
        .order_by(_TASKS.c.creation_timestamp, _TASKS.c.task_order)
        .limit(bindparam("p_limit"))
    )


_READY = {dialect: _ready_query(dialect) for dialect in ("postgresql", "sqlite")}


def insert_events(session: Session, rows: list[dict[str, Any]]) -> None:
    """Append entries (dicts of :class:`TaskEvent` columns) to the event log, in order."""
    if len(rows) == 1:
        session.execute(_INSERT_EVENTS, rows[0])  # a plain execute costs less than an executemany
    elif rows:
        session.execute(_INSERT_EVENTS, rows)


# -- ready and dispatched ------------------------------------------------------------------------


def ready_tasks(session: Session, limit: int = 1000) -> list[ReadyTask]:
    """Pending or paused tasks of running workflows whose dependencies have all succeeded, oldest first."""
    query = _READY[session.get_bind().dialect.name]
    return [ReadyTask(*row) for row in session.execute(query, {"p_limit": limit})]


def dispatch_ready(
    session: Session, ready: Sequence[ReadyTask], *, owner: str, lease_seconds: float
) -> list[TaskSpec]:
    """Lease every task of ``ready`` to the dispatch queue; the messages to publish, in ``ready``'s order.

    Tasks another orchestrator leased first are left out. On PostgreSQL the pending tasks are leased,
    and their events written, by one statement (:data:`_DISPATCH_ALL`); paused tasks, and every task on
    SQLite, go one by one through :func:`dispatch`.
    """
    won: dict[uuid.UUID, TaskSpec] = {}
    one_by_one = list(ready)
    if session.get_bind().dialect.name == "postgresql":
        pending = [task for task in ready if task.status == TaskStatus.PENDING.value]
        one_by_one = [task for task in ready if task.status != TaskStatus.PENDING.value]
        won = _dispatch_all(session, pending, owner=owner, lease_seconds=lease_seconds)
    events: list[dict[str, Any]] = []
    for task in one_by_one:
        spec = dispatch(session, task, owner=owner, lease_seconds=lease_seconds, events=events)
        if spec is not None:
            won[task.task_id] = spec
    insert_events(session, events)
    return [won[task.task_id] for task in ready if task.task_id in won]


def _dispatch_all(
    session: Session, pending: Sequence[ReadyTask], *, owner: str, lease_seconds: float
) -> dict[uuid.UUID, TaskSpec]:
    if not pending:
        return {}
    now = utcnow()
    rows = [
        {
            "task_id": str(task.task_id),
            "attempt": task.attempt,
            "key": idempotency_key(task.task_id, task.attempt + 1),
            "reason": _dispatched_reason(task.attempt + 1),
            "data": {"attempt": task.attempt + 1},
        }
        for task in pending
    ]
    leased = session.execute(
        _DISPATCH_ALL,
        {
            "p_rows": json.dumps(rows),
            "p_owner": owner,
            "p_expires": now + timedelta(seconds=lease_seconds),
            "p_now": now,
        },
    )
    ids = {as_uuid(task_id, "task id") for task_id in leased.scalars()}
    return {task.task_id: task_spec(task, task.attempt + 1) for task in pending if task.task_id in ids}


def _dispatched_reason(attempt: int) -> str:
    return f"dependencies succeeded; dispatching attempt {attempt}"


def dispatch(
    session: Session,
    task: ReadyTask,
    *,
    owner: str,
    lease_seconds: float,
    events: list[dict[str, Any]] | None = None,
) -> TaskSpec | None:
    """Lease a ready task to the dispatch queue; returns the message to publish, or ``None`` if lost.

    A paused task (waiting for its corrective sub-plan) is resumed in the same statement, with a
    ``resumed`` event saying which retry follows. With ``events`` the event rows are appended there
    for the caller to insert with the rest of its batch (:func:`insert_events`).
    """
    now = utcnow()
    attempt = task.attempt + 1
    won = session.execute(
        _DISPATCH,
        {
            "p_task_id": task.task_id,
            "p_status": task.status,
            "p_attempt": task.attempt,
            "p_new_attempt": attempt,
            "p_key": idempotency_key(task.task_id, attempt),
            "p_owner": owner,
            "p_expires": now + timedelta(seconds=lease_seconds),
            "p_now": now,
        },
    )
    if won.rowcount != 1:  # type: ignore[attr-defined]
        return None  # another orchestrator dispatched it first
    rows = []
    if task.status == TaskStatus.PAUSED.value:
        rows.append(
            event_row(
                task.workflow_id,
                task.task_id,
                "resumed",
                owner,
                f"corrective tasks done; retry {task.retries} of {task.task_key!r}",
                TaskStatus.PAUSED.value,
                TaskStatus.PENDING.value,
                now,
            )
        )
    rows.append(
        event_row(
            task.workflow_id,
            task.task_id,
            "dispatched",
            owner,
            _dispatched_reason(attempt),
            TaskStatus.PENDING.value,
            TaskStatus.DISPATCHED.value,
            now,
            {"attempt": attempt},
        )
    )
    if events is not None:
        events.extend(rows)
    else:
        insert_events(session, rows)
    return task_spec(task, attempt)


def task_spec(task: Task | ReadyTask, attempt: int | None = None) -> TaskSpec:
    """The dispatch message of ``attempt`` of a task (default: its current attempt)."""
    return TaskSpec(
        task_id=str(task.task_id),
        workflow_id=str(task.workflow_id),
        executor_type=task.executor_type,
        payload=dict(task.payload),
        description=task.description,
        attempt=task.attempt if attempt is None else attempt,
    )


def failed_task_ids(session: Session) -> list[uuid.UUID]:
    """Failed tasks of running workflows, oldest failure first: each awaits correction."""
    return list(session.scalars(_FAILED))


def finishable_workflow_ids(session: Session) -> list[uuid.UUID]:
    """Running workflows whose every task succeeded."""
    return list(session.scalars(_FINISHABLE))


# -- leases --------------------------------------------------------------------------------------


def expired_leases(session: Session, now: datetime | None = None) -> list[Task]:
    """Dispatched or running tasks of running workflows whose lease has expired."""
    expired = list(session.scalars(_EXPIRED, {"p_now": now or utcnow()}))
    # Rare: only then are the tasks loaded as objects.
    return [task for task_id in expired if (task := session.get(Task, task_id)) is not None]


def redispatch_expired(session: Session, task: Task, *, owner: str, lease_seconds: float) -> TaskSpec | None:
    """Dispatch a task whose lease expired again, as a new attempt (the old attempt's result is stale)."""
    attempt = task.attempt + 1
    previous_owner = task.lease_owner
    previous_attempt = task.attempt
    won = transition(
        session,
        task,
        IN_FLIGHT,
        {
            "status": TaskStatus.DISPATCHED.value,
            "attempt": attempt,
            "idempotency_key": idempotency_key(task.task_id, attempt),
            "lease_owner": owner,
            "lease_expires_at": utcnow() + timedelta(seconds=lease_seconds),
        },
        kind="lease_expired",
        actor=owner,
        reason=(
            f"the lease of {previous_owner} on attempt {previous_attempt} expired (worker lost or message "
            f"lost); dispatching attempt {attempt}"
        ),
        attempt=previous_attempt,
        data={"previous_owner": previous_owner, "previous_attempt": previous_attempt, "attempt": attempt},
    )
    return task_spec(task) if won else None


def extend_queued_lease(
    session: Session, task: Task, *, owner: str, lease_seconds: float, waiting: int
) -> bool:
    """Renew the lease of a dispatched attempt that is still waiting in a busy dispatch queue.

    A lease measures how long a task may go unclaimed; under a backlog the message is most likely
    still queued behind ``waiting`` others, and dispatching it again would only add a duplicate to
    that backlog. Returns whether the attempt was still the dispatched one (a compare-and-set).
    """
    return transition(
        session,
        task,
        [TaskStatus.DISPATCHED.value],
        {"lease_expires_at": utcnow() + timedelta(seconds=lease_seconds)},
        kind="lease_extended",
        actor=owner,
        reason=(
            f"attempt {task.attempt} has not started within its lease, but {waiting} message(s) still "
            f"wait in the dispatch queue; lease renewed instead of dispatching a duplicate"
        ),
        attempt=task.attempt,
        data={"attempt": task.attempt, "queued_messages": waiting},
    )


# -- results -------------------------------------------------------------------------------------
