"""The start of an attempt in the database: a worker's claim of it, its lease, and what a lost claim left.

A worker claims a dispatched attempt with a compare-and-set ``UPDATE`` (``... WHERE status =
'dispatched' AND attempt = :attempt``) and writes its ``started`` event; on PostgreSQL both are one
statement (:data:`CLAIM_AND_LOG`, or :data:`CLAIM_MANY_AND_LOG` for a batch), which
:class:`librarian.runtime.claims.Claims` runs. The rest of an attempt's life is in
:mod:`librarian.runtime.attempts` (ready, dispatched, expired) and
:mod:`librarian.runtime.attempt_results` (its result applied).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import (
    CTE,
    Insert,
    Select,
    bindparam,
    exists,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.types import Integer, Uuid

from librarian.runtime.attempts import insert_events
from librarian.runtime.contracts import TaskSpec, TaskStatus, WorkflowStatus
from librarian.runtime.models import TASK_EVENTS as _EVENTS
from librarian.runtime.models import TASKS as _TASKS
from librarian.runtime.models import WORKFLOWS as _WORKFLOWS
from librarian.runtime.models import Task
from librarian.runtime.store import (
    as_uuid,
    event_row,
    get_workflow,
    record_event,
    transition,
)
from librarian.storage.models import utcnow

_RUNNING = WorkflowStatus.RUNNING.value

_running_workflow = exists().where(
    _WORKFLOWS.c.workflow_id == _TASKS.c.workflow_id, _WORKFLOWS.c.final_status == _RUNNING
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
