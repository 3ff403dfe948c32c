"""The life of one attempt in the database: ready, dispatched, started, lease expired.

Its end, the evaluated result applied, is in :mod:`librarian.runtime.attempt_results`.

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
    CTE,
    ColumnElement,
    Insert,
    Select,
    any_,
    bindparam,
    exists,
    func,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.types import Integer, Uuid

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
    get_workflow,
    idempotency_key,
    record_event,
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


_running_workflow = exists().where(
    _WORKFLOWS.c.workflow_id == _TASKS.c.workflow_id, _WORKFLOWS.c.final_status == _RUNNING
)

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

# What a claim sets: in progress, leased to ``p_owner`` until ``p_expires``.
_CLAIMED: dict[str, Any] = {
    "status": TaskStatus.IN_PROGRESS.value,
    "lease_owner": bindparam("p_owner"),
    "lease_expires_at": bindparam("p_expires"),
    "last_update_timestamp": bindparam("p_now"),
}

_CLAIM = (
    update(_TASKS)
    .where(
        _TASKS.c.task_id == bindparam("p_task_id"),
        _TASKS.c.status == TaskStatus.DISPATCHED.value,
        _TASKS.c.attempt == bindparam("p_attempt"),
        _running_workflow,
    )
    .values(**_CLAIMED)
    .returning(_TASKS.c.workflow_id)
)

# Whether ``p_owner`` holds the attempt: what a claim whose answer was lost with its connection left.
_HELD = select(_TASKS.c.task_id).where(
    _TASKS.c.task_id == bindparam("p_task_id"),
    _TASKS.c.attempt == bindparam("p_attempt"),
    _TASKS.c.status == TaskStatus.IN_PROGRESS.value,
    _TASKS.c.lease_owner == bindparam("p_owner"),
)

_RENEW = (
    update(_TASKS)
    .where(
        _TASKS.c.task_id == bindparam("p_task_id"),
        _TASKS.c.attempt == bindparam("p_attempt"),
        _TASKS.c.status == TaskStatus.IN_PROGRESS.value,
        _TASKS.c.lease_owner == bindparam("p_owner"),
    )
    .values(lease_expires_at=bindparam("p_expires"))
)

_RENEW_UNEXPIRED = _RENEW.where(_TASKS.c.lease_expires_at > bindparam("p_now"))

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


def _claim_and_log() -> Insert:
    """PostgreSQL: the claim and its ``started`` event in one statement (one round trip, not two).

    ``WITH claimed AS (UPDATE tasks ... RETURNING ...) INSERT INTO task_events SELECT ... FROM claimed``:
    no row is claimed, no event is written, and nothing is returned.
    """
    claimed = _CLAIM.returning(_TASKS.c.task_id).cte("claimed")
    return _started_events(claimed).returning(_EVENTS.c.workflow_id)


def _started_events(claimed: CTE) -> Insert:
    """``INSERT INTO task_events`` one ``started`` event per row of ``claimed`` (task_id, workflow_id)."""
    event = select(
        claimed.c.task_id,
        claimed.c.workflow_id,
        bindparam("p_now", type_=_EVENTS.c.at.type),
        literal("started"),
        literal(TaskStatus.DISPATCHED.value),
        literal(TaskStatus.IN_PROGRESS.value),
        bindparam("p_owner", type_=_EVENTS.c.actor.type),
        bindparam("p_reason", type_=_EVENTS.c.reason.type),
        bindparam("p_data", type_=_EVENTS.c.data.type),
    )
    columns = ["task_id", "workflow_id", "at", "kind", "from_status", "to_status", "actor", "reason", "data"]
    return insert(_EVENTS).from_select(columns, event)


# PostgreSQL: the claim and its ``started`` event, one atomic statement (see :mod:`.claims`).
CLAIM_AND_LOG = _claim_and_log()


def _claim_many_and_log() -> Select[Any]:
    """PostgreSQL: :data:`CLAIM_AND_LOG` for several attempts at once (an executor's batch).

    The attempts come as two arrays (``p_ids``, ``p_attempts``) joined with ``unnest``; each row that
    is still dispatched at that attempt is claimed, and one ``started`` event is written per claim.
    Returns ``(task_id, attempt)`` of each claim: a batch can hold two attempts of one task (a stale
    message and its re-dispatch), and only the current one is claimed.
    """
    batch = (
        func.unnest(bindparam("p_ids", type_=ARRAY(Uuid())), bindparam("p_attempts", type_=ARRAY(Integer())))
        .table_valued("task_id", "attempt")
        .render_derived(name="batch")
    )
    claimed = (
        update(_TASKS)
        .where(
            _TASKS.c.task_id == batch.c.task_id,
            _TASKS.c.attempt == batch.c.attempt,
            _TASKS.c.status == TaskStatus.DISPATCHED.value,
            _running_workflow,
        )
        .values(**_CLAIMED)
        .returning(_TASKS.c.workflow_id, _TASKS.c.task_id, _TASKS.c.attempt)
        .cte("claimed")
    )
    logged = _started_events(claimed).cte("logged")
    return select(claimed.c.task_id, claimed.c.attempt).add_cte(logged)


CLAIM_MANY_AND_LOG = _claim_many_and_log()


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


def claim_parameters(spec: TaskSpec, *, worker: str, lease_seconds: float) -> dict[str, Any]:
    """The bound values of the claim statements (:data:`CLAIM_AND_LOG`) for one attempt."""
    now = utcnow()
    return {
        "p_task_id": as_uuid(spec.task_id, "task id"),
        "p_attempt": spec.attempt,
        "p_owner": worker,
        "p_expires": now + timedelta(seconds=lease_seconds),
        "p_now": now,
        "p_reason": f"attempt {spec.attempt} started by {worker}",
        "p_data": {},
    }


def claim_many_parameters(specs: Sequence[TaskSpec], *, worker: str, lease_seconds: float) -> dict[str, Any]:
    """The bound values of :data:`CLAIM_MANY_AND_LOG` for the attempts of ``specs``."""
    now = utcnow()
    return {
        "p_ids": [as_uuid(spec.task_id, "task id") for spec in specs],
        "p_attempts": [spec.attempt for spec in specs],
        "p_owner": worker,
        "p_expires": now + timedelta(seconds=lease_seconds),
        "p_now": now,
        "p_reason": f"claimed by {worker} with a batch of {len(specs)}, which runs one task after another",
        "p_data": {"batch": len(specs)},
    }


def release_claim(session: Session, spec: TaskSpec, *, worker: str, lease_seconds: float) -> bool:
    """Hand back an attempt ``worker`` claimed but never started (it is stopping): dispatched again.

    The attempt stays the same, so its dispatch message, handed back to the queue, can be claimed
    by another executor at once. Returns whether ``worker`` still held it (a compare-and-set).
    """
    task = session.get(Task, as_uuid(spec.task_id, "task id"))
    if task is None or task.lease_owner != worker:
        return False
    return transition(
        session,
        task,
        [TaskStatus.IN_PROGRESS.value],
        {
            "status": TaskStatus.DISPATCHED.value,
            "lease_expires_at": utcnow() + timedelta(seconds=lease_seconds),
        },
        kind="released",
        actor=worker,
        reason=f"attempt {spec.attempt} handed back before it started: {worker} is stopping",
        attempt=spec.attempt,
    )


def holds_attempt(connection: Connection, spec: TaskSpec, *, worker: str) -> bool:
    """Whether ``worker`` holds ``spec``'s attempt (claimed, in progress, its lease)."""
    params = {"p_task_id": as_uuid(spec.task_id, "task id"), "p_attempt": spec.attempt, "p_owner": worker}
    return connection.execute(_HELD, params).first() is not None


def mark_in_progress(session: Session, spec: TaskSpec, *, worker: str, lease_seconds: float) -> bool:
    """Claim a dispatched attempt for ``worker``; ``False`` (and an event) when it is no longer current."""
    params = claim_parameters(spec, worker=worker, lease_seconds=lease_seconds)
    if session.get_bind().dialect.name == "postgresql":
        if session.execute(CLAIM_AND_LOG, params).first() is not None:
            return True
    else:  # SQLite has no UPDATE inside WITH: two statements in the same transaction
        claimed = session.execute(_CLAIM, params).first()
        if claimed is not None:
            started = TaskStatus.DISPATCHED.value, TaskStatus.IN_PROGRESS.value
            row = event_row(
                claimed.workflow_id,
                params["p_task_id"],
                "started",
                worker,
                params["p_reason"],
                *started,
                params["p_now"],
            )
            insert_events(session, [row])
            return True
    explain_unclaimed(session, spec, worker=worker)
    return False


def explain_unclaimed(session: Session, spec: TaskSpec, *, worker: str) -> None:
    """Write to the event log why a dispatch message was not claimed (the slow, rare path)."""
    task = session.get(Task, as_uuid(spec.task_id, "task id"))
    if task is None:
        return
    workflow = get_workflow(session, task.workflow_id)
    if workflow.final_status != _RUNNING:
        reason = f"attempt {spec.attempt} not started: the workflow is {workflow.final_status}"
    else:
        reason = (
            f"dispatch of attempt {spec.attempt} ignored: the task is {task.status} at attempt "
            f"{task.attempt} (duplicate or superseded message)"
        )
    record_event(
        session,
        workflow_id=task.workflow_id,
        task_id=task.task_id,
        kind="stale_dispatch_ignored",
        actor=worker,
        reason=reason,
    )


def renew_lease(
    session: Session, spec: TaskSpec, *, worker: str, lease_seconds: float, unexpired: bool = False
) -> bool:
    """Extend the lease of a running attempt (the executor's heartbeat); ``False`` if it was lost.

    With ``unexpired``, a lease that has already run out is not renewed: the orchestrator may be
    dispatching the task again at this moment, so the attempt must not start.
    """
    now = utcnow()
    params = {
        "p_task_id": as_uuid(spec.task_id, "task id"),
        "p_attempt": spec.attempt,
        "p_owner": worker,
        "p_expires": now + timedelta(seconds=lease_seconds),
    }
    if unexpired:
        result = session.execute(_RENEW_UNEXPIRED, {**params, "p_now": now})
    else:
        result = session.execute(_RENEW, params)
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


# -- results -------------------------------------------------------------------------------------
