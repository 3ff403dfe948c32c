"""Which stored task a :class:`~librarian.runtime.correctors.CorrectionContext` is about.

The loop needs the failed task's workflow: its workspace (the directory the command ran in, where
versions are probed and file values are checked), the timeline it writes to, and the attempts it
already made for the same task. A context that carries ``workflow_id`` and ``task_id`` (on itself or
on its ``failed`` task) is taken at its word. Otherwise the task is found in the runtime's database:
the failed task of a running workflow with the context's goal, key, executor type and payload, the
most recently updated one first. The orchestrator calls a corrector while the task is still
``failed`` (surgery comes after), so the match is the task being corrected.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from librarian.runtime.contracts import TaskStatus, WorkflowStatus
from librarian.runtime.correctors import CorrectionContext
from librarian.runtime.models import Task, Workflow

__all__ = ["TaskLocation", "locate_task"]


@dataclass(frozen=True)
class TaskLocation:
    """Where a failed task lives.

    Attributes:
        workflow_id: its workflow.
        task_id: the task.
        failed_at: when its failure was recorded (``None`` when unknown).
    """

    workflow_id: uuid.UUID
    task_id: uuid.UUID
    failed_at: datetime | None


def locate_task(sessions: sessionmaker[Session], context: CorrectionContext) -> TaskLocation | None:
    """The stored task ``context`` describes, or ``None`` when it cannot be found."""
    workflow_id = _uuid(getattr(context, "workflow_id", None))
    task_id = _uuid(getattr(context, "task_id", None)) or _uuid(getattr(context.failed, "task_id", None))
    with sessions() as session:
        if task_id is not None:
            task = session.get(Task, task_id)
            if task is not None and (workflow_id is None or task.workflow_id == workflow_id):
                return TaskLocation(task.workflow_id, task.task_id, task.last_update_timestamp)
        return _search(session, context, workflow_id)


def _search(
    session: Session, context: CorrectionContext, workflow_id: uuid.UUID | None
) -> TaskLocation | None:
    query = (
        select(Task)
        .join(Workflow, Workflow.workflow_id == Task.workflow_id)
        .where(
            Task.task_key == context.failed.key,
            Task.executor_type == context.failed.executor_type,
            Task.status == TaskStatus.FAILED.value,
            Workflow.final_status == WorkflowStatus.RUNNING.value,
            Workflow.user_prompt == context.goal,
        )
        .order_by(Task.last_update_timestamp.desc())
    )
    if workflow_id is not None:
        query = query.where(Task.workflow_id == workflow_id)
    for task in session.scalars(query):
        if dict(task.payload or {}) == dict(context.failed.payload):
            return TaskLocation(task.workflow_id, task.task_id, task.last_update_timestamp)
    return None


def _uuid(value: Any) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            return None
    return None
