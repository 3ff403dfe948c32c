"""The life of one attempt in the database: ready, dispatched, started, result applied, lease expired.

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
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    CTE,
    ColumnElement,
    Insert,
    Select,
    Table,
    any_,
    bindparam,
    exists,
    func,
    insert,
    literal,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.types import Integer, Uuid

from librarian.runtime.contracts import TaskSpec, TaskStatus, WorkflowStatus
from librarian.runtime.evaluator import Evaluation
from librarian.runtime.models import Task, TaskEvent, Workflow
from librarian.runtime.store import (
    IN_FLIGHT,
    WAITING,
    add_strategy_reward,
    as_uuid,
    event_row,
    get_workflow,
    idempotency_key,
    record_event,
    transition,
)
from librarian.storage.models import utcnow

_RUNNING = WorkflowStatus.RUNNING.value
_TASKS = cast(Table, Task.__table__)
_WORKFLOWS = cast(Table, Workflow.__table__)
_EVENTS = cast(Table, TaskEvent.__table__)


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


class TaskState(NamedTuple):
    """What applying a result needs to know about the task first."""

    workflow_id: uuid.UUID
    status: str
    attempt: int
    retries: int
    reward: float | None
    correction_strategy: str | None
    error_category: str | None


# -- statements, built once ----------------------------------------------------------------------

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

# The columns of TaskState, in its order; _STATES adds the task id to key the rows.
_STATE_COLUMNS = [_TASKS.c[name] for name in TaskState._fields]
_STATE = select(*_STATE_COLUMNS).where(_TASKS.c.task_id == bindparam("p_task_id"))
_STATES = select(*_STATE_COLUMNS, _TASKS.c.task_id).where(
    _TASKS.c.task_id.in_(bindparam("p_ids", expanding=True))
)

_APPLY = (
    update(_TASKS)
    .where(
        _TASKS.c.task_id == bindparam("p_task_id"),
        # Literal values, not an expanding IN: that would be re-rendered for every execution, and
        # this statement runs once per result (a tenth of the evaluator's CPU went to it).
        _TASKS.c.status.in_([literal_column(f"'{status}'") for status in IN_FLIGHT]),
        _TASKS.c.attempt == bindparam("p_attempt"),
    )
    .values(
        status=bindparam("p_status"),
        reward=bindparam("p_reward"),
        feedback_notes=bindparam("p_feedback"),
        lease_owner=None,
        lease_expires_at=None,
        # The outcome of a repaired task's retry is the verdict on the strategy; it is given once.
        correction_strategy=None,
        last_update_timestamp=bindparam("p_now"),
    )
)

_ADD_REWARD = (
    update(_WORKFLOWS)
    .where(_WORKFLOWS.c.workflow_id == bindparam("p_workflow_id"))
    .values(
        total_reward=_WORKFLOWS.c.total_reward + bindparam("p_delta"),
        last_update_timestamp=bindparam("p_now"),
    )
)

# PostgreSQL: a whole batch of results in one statement. Each JSON row carries one result and its
# ``result_applied`` event; a row is applied only if its attempt is still the task's current one and
# in flight (the compare-and-set of _APPLY), its event is written in the same statement, and the ids
# of the applied tasks come back. Faster than one UPDATE per result by the number of results.
_APPLY_ALL = text(
    """
    WITH result AS (
        SELECT (r->>'task_id')::uuid AS task_id, (r->>'attempt')::int AS attempt,
               r->>'status' AS status, (r->>'reward')::float8 AS reward, r->'feedback' AS feedback,
               r->>'before' AS before, r->>'reason' AS reason, r->'data' AS data
        FROM jsonb_array_elements(CAST(:p_rows AS jsonb)) AS r
    ), applied AS (
        UPDATE tasks
        SET status = result.status, reward = result.reward, feedback_notes = result.feedback,
            lease_owner = NULL, lease_expires_at = NULL, correction_strategy = NULL,
            last_update_timestamp = :p_now
        FROM result
        WHERE tasks.task_id = result.task_id AND tasks.attempt = result.attempt
          AND tasks.status IN ({in_flight})
        RETURNING tasks.task_id, tasks.workflow_id, result.before, result.status, result.reason, result.data
    )
    INSERT INTO task_events (task_id, workflow_id, at, kind, from_status, to_status, actor, reason, data)
    SELECT task_id, workflow_id, :p_now, 'result_applied', before, status, :p_actor, reason, data
    FROM applied
    RETURNING task_id
    """.format(in_flight=", ".join(f"'{status}'" for status in IN_FLIGHT))
).bindparams(bindparam("p_now", type_=_EVENTS.c.at.type))

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

# Whether the orchestrator has anything to do after results of these workflows succeeded: a task
# waiting to be dispatched (its dependencies may now be met), or a workflow now wholly successful.
# Both read one entry of ix_tasks_workflow_status per workflow.
_ORCHESTRATOR_NEEDED = select(
    exists().where(
        _TASKS.c.workflow_id.in_(bindparam("p_workflows", expanding=True)), _TASKS.c.status.in_(WAITING)
    )
    | exists().where(
        _WORKFLOWS.c.workflow_id.in_(bindparam("p_workflows", expanding=True)),
        _WORKFLOWS.c.final_status == _RUNNING,
        ~exists().where(
            _TASKS.c.workflow_id == _WORKFLOWS.c.workflow_id, _TASKS.c.status != TaskStatus.SUCCESS.value
        ),
    )
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


def task_state(session: Session, task_id: str | uuid.UUID) -> TaskState | None:
    """The fields of a task that evaluating and applying a result need, or ``None`` if it is gone."""
    row = session.execute(_STATE, {"p_task_id": as_uuid(task_id, "task id")}).first()
    return TaskState(*row) if row is not None else None


def task_states(session: Session, task_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, TaskState]:
    """:func:`task_state` of several tasks in one query (missing tasks are left out)."""
    if not task_ids:
        return {}
    rows = session.execute(_STATES, {"p_ids": list(set(task_ids))})
    return {row[-1]: TaskState(*row[:-1]) for row in rows}


def apply_result(
    session: Session,
    spec: TaskSpec,
    evaluation: Evaluation,
    *,
    actor: str,
    state: TaskState | None = None,
) -> bool:
    """Record the evaluated outcome of one attempt, exactly once; returns whether it was applied.

    ``False`` means the attempt is no longer current (a duplicate message, or a result arriving after
    its lease expired and the task was dispatched again); that is written to the event log and
    changes nothing else. ``state`` is :func:`task_state`, when the caller already read it.
    """
    task_id = as_uuid(spec.task_id, "task id")
    states = {task_id: state} if state is not None else None
    return apply_results(session, [(spec, evaluation)], actor=actor, states=states)[0]


def apply_results(
    session: Session,
    results: Sequence[tuple[TaskSpec, Evaluation]],
    *,
    actor: str,
    states: Mapping[uuid.UUID, TaskState] | None = None,
) -> list[bool]:
    """:func:`apply_result` for several attempts in one transaction; one flag per result, in order.

    Each result is still its own compare-and-set, so a duplicate within the batch is ignored like any
    other; the event rows are inserted together and the reward of each workflow is updated once. On
    PostgreSQL a batch without duplicates is applied by one statement (:data:`_APPLY_ALL`).
    """
    ids = [as_uuid(spec.task_id, "task id") for spec, _ in results]
    known = dict(states) if states is not None else task_states(session, ids)
    now = utcnow()
    # One by one, rows are locked in task-id order (then workflows in id order), so two evaluators
    # applying overlapping batches never wait on each other in a cycle. The one statement of a
    # PostgreSQL batch locks in its plan's order instead; overlapping batches (only redelivered
    # duplicates) can then deadlock, which PostgreSQL detects: the batch fails and is redelivered.
    order = [i for i in sorted(range(len(ids)), key=lambda i: (ids[i], i)) if ids[i] in known]
    set_based = session.get_bind().dialect.name == "postgresql" and len(set(ids)) == len(ids)
    won_by_statement = _apply_all(session, results, ids, known, order, actor, now) if set_based else set()
    rows: list[dict[str, Any]] = []
    deltas: dict[uuid.UUID, float] = {}
    applied = [False] * len(ids)
    for index in order:
        task_id = ids[index]
        spec, evaluation = results[index]
        state = known[task_id]
        status = TaskStatus(evaluation.status)
        if set_based:
            won = task_id in won_by_statement
        else:
            won = session.execute(_APPLY, _apply_parameters(task_id, spec, evaluation, now)).rowcount == 1  # type: ignore[attr-defined]
        if not won:
            current = task_state(session, task_id) or state
            rows.append(
                event_row(
                    state.workflow_id,
                    task_id,
                    "stale_result_ignored",
                    actor,
                    f"result of attempt {spec.attempt} ignored: the task is {current.status} at attempt "
                    f"{current.attempt} (already applied, or superseded after a lease expired)",
                    None,
                    None,
                    now,
                    {"attempt": spec.attempt, "status": evaluation.status},
                )
            )
            continue
        if not set_based:
            event = _applied_event(spec, evaluation, state)
            rows.append(
                event_row(
                    state.workflow_id,
                    task_id,
                    "result_applied",
                    actor,
                    event["reason"],
                    event["before"],
                    status.value,
                    now,
                    event["data"],
                )
            )
        if state.correction_strategy and state.error_category:
            add_strategy_reward(session, state.error_category, state.correction_strategy, evaluation.reward)
            rows.append(
                event_row(
                    state.workflow_id,
                    task_id,
                    "strategy_rewarded",
                    actor,
                    f"strategy {state.correction_strategy!r} for {state.error_category!r} earned "
                    f"{evaluation.reward:+.2f} (retry {status.value})",
                    None,
                    None,
                    now,
                    {"strategy": state.correction_strategy, "category": state.error_category},
                )
            )
        # The total is the sum of the task rewards; this reward replaces the task's previous one.
        delta = evaluation.reward - (state.reward or 0.0)
        deltas[state.workflow_id] = deltas.get(state.workflow_id, 0.0) + delta
        # Another result for this task in the same batch must see it applied already.
        known[task_id] = state._replace(status=status.value, reward=evaluation.reward)
        applied[index] = True
    insert_events(session, rows)
    for workflow_id, delta in sorted(deltas.items()):
        session.execute(_ADD_REWARD, {"p_workflow_id": workflow_id, "p_delta": delta, "p_now": now})
    return applied


def orchestrator_needed(session: Session, applied: Sequence[tuple[uuid.UUID, Evaluation]]) -> bool:
    """Whether results just applied (``(workflow id, evaluation)``) give the orchestrator work.

    A failure always does (correction). Successes do only when their workflow still has tasks waiting
    to be dispatched or has now wholly succeeded: the results of a fan-out of independent tasks then
    wake the orchestrator once, at the end, instead of once per batch. (Two evaluators finishing the
    last tasks of a workflow at once may each see the other's task unfinished; the orchestrator's idle
    pass, at most ``idle_seconds`` later, then finishes it.)
    """
    if not applied:
        return False
    if any(evaluation.status != TaskStatus.SUCCESS for _, evaluation in applied):
        return True
    workflows = sorted({workflow_id for workflow_id, _ in applied})
    return bool(session.scalar(_ORCHESTRATOR_NEEDED, {"p_workflows": workflows}))


def _apply_parameters(
    task_id: uuid.UUID, spec: TaskSpec, evaluation: Evaluation, now: datetime
) -> dict[str, Any]:
    return {
        "p_task_id": task_id,
        "p_attempt": spec.attempt,
        "p_status": evaluation.status,
        "p_reward": evaluation.reward,
        "p_feedback": evaluation.feedback,
        "p_now": now,
    }


def _applied_event(spec: TaskSpec, evaluation: Evaluation, state: TaskState) -> dict[str, Any]:
    """What the ``result_applied`` event of a result says: status before, reason and data."""
    return {
        "before": state.status if state.status in IN_FLIGHT else TaskStatus.IN_PROGRESS.value,
        "reason": f"attempt {spec.attempt} {evaluation.status} (reward {evaluation.reward:+.2f})",
        "data": {"attempt": spec.attempt, "reward": evaluation.reward},
    }


def _apply_all(
    session: Session,
    results: Sequence[tuple[TaskSpec, Evaluation]],
    ids: Sequence[uuid.UUID],
    known: Mapping[uuid.UUID, TaskState],
    order: Sequence[int],
    actor: str,
    now: datetime,
) -> set[uuid.UUID]:
    """PostgreSQL: apply every result of ``order`` with :data:`_APPLY_ALL`; the ids of those applied."""
    if not order:
        return set()
    rows = []
    for index in order:
        spec, evaluation = results[index]
        rows.append(
            {
                "task_id": str(ids[index]),
                "attempt": spec.attempt,
                "status": evaluation.status,
                "reward": evaluation.reward,
                "feedback": evaluation.feedback,
                **_applied_event(spec, evaluation, known[ids[index]]),
            }
        )
    applied = session.execute(_APPLY_ALL, {"p_rows": json.dumps(rows), "p_now": now, "p_actor": actor})
    return {as_uuid(task_id, "task id") for task_id in applied.scalars()}
