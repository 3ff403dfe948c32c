"""Database reads and writes of the runtime: workflows, events, correction and strategy statistics.

All run in the caller's transaction. The life of one attempt (dispatch, claim, result, lease expiry), the
hot path, is in :mod:`librarian.runtime.attempts`, :mod:`~librarian.runtime.attempt_claims` and
:mod:`~librarian.runtime.attempt_results`.

The database is the truth; messages only carry work. Status changes are compare-and-set updates
(``UPDATE ... WHERE status = :expected AND attempt = :attempt``), so two workers racing on one task
cannot both win, and a result for an attempt that is no longer current is ignored (and logged).
Every status change writes a :class:`~librarian.runtime.models.TaskEvent` with who and why.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from librarian.errors import InvalidInputError, NotFoundError
from librarian.runtime.contracts import TaskStatus, WorkflowStatus
from librarian.runtime.models import StrategyStat, Task, TaskEvent, Workflow
from librarian.runtime.spec import WorkflowSpec
from librarian.storage.models import utcnow

IN_FLIGHT = (TaskStatus.DISPATCHED.value, TaskStatus.IN_PROGRESS.value)
WAITING = (TaskStatus.PENDING.value, TaskStatus.PAUSED.value)


# -- identifiers ---------------------------------------------------------------------------------


def as_uuid(value: str | uuid.UUID, what: str = "workflow id") -> uuid.UUID:
    """Parse an id given by a user or a message.

    Raises:
        InvalidInputError: ``value`` is not a uuid.
    """
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise InvalidInputError(f"{value!r} is not a valid {what} (expected a uuid)") from exc


def idempotency_key(task_id: uuid.UUID, attempt: int) -> str:
    """The key of one dispatch of a task: only a result carrying it may be applied."""
    return f"{task_id.hex}:{attempt}"


# -- events --------------------------------------------------------------------------------------


def record_event(
    session: Session,
    *,
    workflow_id: uuid.UUID,
    task_id: uuid.UUID | None,
    kind: str,
    actor: str,
    reason: str,
    from_status: str | None = None,
    to_status: str | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """Append one entry to the event log."""
    row = event_row(workflow_id, task_id, kind, actor, reason, from_status, to_status, data=data)
    # Pending ORM changes go first, so the log's ids keep the order things happened in.
    session.flush()
    session.execute(insert(TaskEvent), [row])


def event_row(
    workflow_id: uuid.UUID,
    task_id: uuid.UUID | None,
    kind: str,
    actor: str,
    reason: str,
    from_status: str | None = None,
    to_status: str | None = None,
    at: datetime | None = None,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One event-log entry as the columns of :class:`TaskEvent` (``at`` defaults to now), to insert."""
    return {
        "workflow_id": workflow_id,
        "task_id": task_id,
        "kind": kind,
        "actor": actor,
        "reason": reason,
        "from_status": from_status,
        "to_status": to_status,
        "data": data or {},
        "at": at or utcnow(),
    }


def events(
    session: Session, workflow_id: uuid.UUID, task_id: uuid.UUID | None = None, *, after: int = 0
) -> list[TaskEvent]:
    """The event log of a workflow (or of one of its tasks), oldest first; only ids above ``after``."""
    query = select(TaskEvent).where(TaskEvent.workflow_id == workflow_id)
    if after:
        query = query.where(TaskEvent.id > after)
    if task_id is not None:
        query = query.where(TaskEvent.task_id == task_id)
    return list(session.scalars(query.order_by(TaskEvent.id)))


def transition(
    session: Session,
    task: Task,
    expected: Iterable[str],
    values: dict[str, Any],
    *,
    kind: str,
    actor: str,
    reason: str,
    attempt: int | None = None,
    data: dict[str, Any] | None = None,
) -> bool:
    """Compare-and-set ``task`` from one of ``expected`` statuses (and ``attempt``, when given).

    Writes the event when it wins; returns whether it did. ``task`` is refreshed either way.
    """
    session.flush()
    condition = [Task.task_id == task.task_id, Task.status.in_(list(expected))]
    if attempt is not None:
        condition.append(Task.attempt == attempt)
    values = {**values, "last_update_timestamp": utcnow()}
    result = session.execute(
        update(Task).where(*condition).values(**values).execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        session.refresh(task)
        return False
    before = task.status
    session.refresh(task)
    record_event(
        session,
        workflow_id=task.workflow_id,
        task_id=task.task_id,
        kind=kind,
        actor=actor,
        reason=reason,
        from_status=before,
        to_status=task.status,
        data=data,
    )
    return True


# -- workflows -----------------------------------------------------------------------------------


def create_workflow(
    session: Session,
    spec: WorkflowSpec,
    *,
    actor: str,
    submission_key: str | None = None,
    organization_id: int = 1,
    created_by: int | None = None,
) -> Workflow:
    """Insert a running workflow and its tasks (all pending), with a creation event for each.

    ``organization_id`` and ``created_by`` name who submitted it (the local organisation and the
    operator by default: the CLI on the data directory).

    The tasks and their events go in as two multi-row inserts: one round trip per row made submitting
    a workflow of 500 tasks take most of a second, all of it before the first task could start.
    """
    now = utcnow()
    workflow = Workflow(
        workflow_id=uuid.uuid4(),
        name=spec.name,
        user_prompt=spec.goal,
        creation_timestamp=now,
        last_update_timestamp=now,
        final_status=WorkflowStatus.RUNNING.value,
        total_reward=0.0,
        spec=spec.to_dict(),
        submission_key=submission_key,
        organization_id=organization_id,
        created_by=created_by,
    )
    session.add(workflow)
    session.flush()
    ids = {task.id: uuid.uuid4() for task in spec.tasks}
    tasks = [
        {
            "task_id": ids[definition.id],
            "workflow_id": workflow.workflow_id,
            "parent_id": None,
            "task_order": order,
            "task_key": definition.id,
            "description": definition.description or definition.id,
            "status": TaskStatus.PENDING.value,
            "dependencies": [ids[dependency] for dependency in definition.depends_on],
            "executor_type": definition.executor_type,
            "payload": definition.payload,
            "retries": 0,
            "attempt": 0,
            "creation_timestamp": now,
            "last_update_timestamp": now,
            "rationale": "declared in the workflow file",
        }
        for order, definition in enumerate(spec.tasks)
    ]
    submitted = event_row(
        workflow.workflow_id,
        None,
        kind="workflow_submitted",
        actor=actor,
        reason=f"workflow {spec.name!r} submitted with {len(spec.tasks)} tasks",
        to_status=WorkflowStatus.RUNNING.value,
        at=now,
    )
    created = [
        event_row(
            workflow.workflow_id,
            ids[definition.id],
            kind="task_created",
            actor=actor,
            reason=f"task {definition.id!r} declared in the workflow file",
            to_status=TaskStatus.PENDING.value,
            at=now,
            data={"depends_on": list(definition.depends_on)},
        )
        for definition in spec.tasks
    ]
    if tasks:
        session.execute(insert(Task), tasks)
    # One statement, rows in order: the log's ids keep the order of the file.
    session.execute(insert(TaskEvent), [submitted, *created])
    return workflow


def get_workflow(session: Session, workflow_id: str | uuid.UUID) -> Workflow:
    """The workflow with this id.

    Raises:
        InvalidInputError: not a uuid.
        NotFoundError: no such workflow.
    """
    workflow = session.get(Workflow, as_uuid(workflow_id))
    if workflow is None:
        raise NotFoundError(f"no workflow {workflow_id}", hint="list workflows with: librarian workflow list")
    return workflow


def workflow_by_submission_key(session: Session, key: str) -> Workflow | None:
    """The workflow submitted with idempotency key ``key``, if any."""
    return session.scalar(select(Workflow).where(Workflow.submission_key == key))


def workflow_status(session: Session, workflow_id: str | uuid.UUID) -> str:
    """The ``final_status`` of a workflow, read alone (what a waiting client polls).

    Raises:
        InvalidInputError: not a uuid.
        NotFoundError: no such workflow.
    """
    status = session.scalar(select(Workflow.final_status).where(Workflow.workflow_id == as_uuid(workflow_id)))
    if status is None:
        raise NotFoundError(f"no workflow {workflow_id}", hint="list workflows with: librarian workflow list")
    return status


def list_workflows(
    session: Session,
    limit: int = 100,
    *,
    organization_id: int | None = None,
    created_by: int | None = None,
    status: str | None = None,
    before: tuple[datetime, uuid.UUID] | None = None,
) -> list[Workflow]:
    """The newest workflows first, optionally of one organisation (and creator) and status.

    ``before`` is a keyset cursor: the creation time and id of the last workflow of the previous page
    (ties on the timestamp are broken by id, so no workflow is skipped or shown twice).
    """
    query = select(Workflow)
    if organization_id is not None:
        query = query.where(Workflow.organization_id == organization_id)
    if created_by is not None:
        query = query.where(Workflow.created_by == created_by)
    if status is not None:
        query = query.where(Workflow.final_status == status)
    if before is not None:
        stamp, last_id = before
        query = query.where(
            or_(
                Workflow.creation_timestamp < stamp,
                and_(Workflow.creation_timestamp == stamp, Workflow.workflow_id < last_id),
            )
        )
    query = query.order_by(Workflow.creation_timestamp.desc(), Workflow.workflow_id.desc()).limit(limit)
    return list(session.scalars(query))


def workflow_tasks(session: Session, workflow_id: uuid.UUID) -> list[Task]:
    """A workflow's tasks in insertion order."""
    query = select(Task).where(Task.workflow_id == workflow_id).order_by(Task.task_order)
    return list(session.scalars(query))


def update_total_reward(session: Session, workflow_id: uuid.UUID) -> float:
    """Recompute ``total_reward`` as the sum of the workflow's task rewards; returns it."""
    session.flush()
    total = session.scalar(
        select(func.coalesce(func.sum(Task.reward), 0.0)).where(Task.workflow_id == workflow_id)
    )
    workflow = get_workflow(session, workflow_id)
    workflow.total_reward = float(total or 0.0)
    workflow.last_update_timestamp = utcnow()
    return workflow.total_reward


def finish_workflow(
    session: Session,
    workflow: Workflow,
    status: WorkflowStatus,
    *,
    actor: str,
    reason: str,
    report: dict[str, Any] | None = None,
    from_statuses: Sequence[WorkflowStatus] = (WorkflowStatus.RUNNING,),
    total_updated: bool = False,
) -> bool:
    """Move a running workflow to a final status (compare-and-set); returns whether it did.

    ``from_statuses`` widens what it may end from (a paused workflow may be cancelled);
    ``total_updated`` says the caller has just stored the total reward (:func:`update_total_reward`).
    """
    session.flush()
    now = utcnow()
    before = workflow.final_status
    result = session.execute(
        update(Workflow)
        .where(
            Workflow.workflow_id == workflow.workflow_id,
            Workflow.final_status.in_([status.value for status in from_statuses]),
        )
        .values(final_status=status.value, finished_at=now, last_update_timestamp=now, failure_report=report)
        .execution_options(synchronize_session=False)
    )
    session.refresh(workflow)
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    if not total_updated:
        update_total_reward(session, workflow.workflow_id)
    record_event(
        session,
        workflow_id=workflow.workflow_id,
        task_id=None,
        kind=f"workflow_{status.value}",
        actor=actor,
        reason=reason,
        from_status=before,
        to_status=status.value,
        data=report or {},
    )
    return True


def set_workflow_status(
    session: Session,
    workflow_id: uuid.UUID,
    expected: WorkflowStatus,
    status: WorkflowStatus,
    *,
    kind: str,
    actor: str,
    reason: str,
    task_id: uuid.UUID | None = None,
    data: dict[str, Any] | None = None,
) -> bool:
    """Compare-and-set a workflow between non-final statuses (running and paused), with its event."""
    session.flush()
    now = utcnow()
    result = session.execute(
        update(Workflow)
        .where(Workflow.workflow_id == workflow_id, Workflow.final_status == expected.value)
        .values(final_status=status.value, last_update_timestamp=now)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    record_event(
        session,
        workflow_id=workflow_id,
        task_id=task_id,
        kind=kind,
        actor=actor,
        reason=reason,
        from_status=expected.value,
        to_status=status.value,
        data=data,
    )
    return True


# -- correction ----------------------------------------------------------------------------------


def failed_tasks(session: Session) -> list[Task]:
    """Failed tasks of running workflows: each waits for correction or ends its workflow."""
    query = (
        select(Task)
        .join(Workflow, Workflow.workflow_id == Task.workflow_id)
        .where(Task.status == TaskStatus.FAILED.value, Workflow.final_status == WorkflowStatus.RUNNING.value)
        .order_by(Task.last_update_timestamp)
    )
    return list(session.scalars(query))


def successful_tasks(session: Session, workflow_id: uuid.UUID) -> list[Task]:
    """Tasks of a workflow that succeeded, oldest update first (the corrector's history)."""
    query = (
        select(Task)
        .where(Task.workflow_id == workflow_id, Task.status == TaskStatus.SUCCESS.value)
        .order_by(Task.last_update_timestamp)
    )
    return list(session.scalars(query))


def surgery_depth(session: Session, task: Task) -> int:
    """How many corrective sub-plans ``task`` is nested in (0 for an original task)."""
    depth = 0
    parent_id = task.parent_id
    while parent_id is not None:
        depth += 1
        parent = session.get(Task, parent_id)
        parent_id = parent.parent_id if parent is not None else None
    return depth


def next_task_order(session: Session, workflow_id: uuid.UUID) -> int:
    """The ``task_order`` a newly inserted task of this workflow takes."""
    highest = session.scalar(select(func.max(Task.task_order)).where(Task.workflow_id == workflow_id))
    return int(highest if highest is not None else -1) + 1


# -- strategy statistics -------------------------------------------------------------------------


def strategy_stats(session: Session, category: str) -> dict[str, StrategyStat]:
    """Per-strategy statistics of one error category."""
    query = select(StrategyStat).where(StrategyStat.error_category == category)
    return {row.strategy: row for row in session.scalars(query)}


def add_strategy_reward(session: Session, category: str, strategy: str, reward: float) -> None:
    """Add one trial with ``reward`` to a (category, strategy) pair.

    One ``INSERT ... ON CONFLICT DO UPDATE`` with the increments done by the database: a read followed
    by a write would let two first trials collide on the primary key and two concurrent trials lose
    one of their updates.
    """
    now = utcnow()
    values = {
        "error_category": category,
        "strategy": strategy,
        "trials": 1,
        "total_reward": reward,
        "last_update_timestamp": now,
    }
    dialect = session.get_bind().dialect.name
    upsert = (postgresql_insert if dialect == "postgresql" else sqlite_insert)(StrategyStat).values(values)
    statement = upsert.on_conflict_do_update(
        index_elements=[StrategyStat.error_category, StrategyStat.strategy],
        set_={
            "trials": StrategyStat.trials + 1,
            "total_reward": StrategyStat.total_reward + upsert.excluded.total_reward,
            "last_update_timestamp": upsert.excluded.last_update_timestamp,
        },
    )
    session.execute(statement)
    # A row this session already loaded no longer shows the database's values: reload it when read.
    loaded = session.identity_map.get(identity_key(StrategyStat, (category, strategy)))
    if loaded is not None:
        session.expire(loaded)
