"""The loop's timeline: each step of a correction, written into the runtime's event log.

Every step (trigger, version, reuse, research, candidates, correction, clarification, escalation,
learning) is a ``task_events`` row of kind :data:`STEP_KIND` whose ``data["stage"]`` names the step,
next to the runtime's own events (failure, surgery, retry, reward). So ``librarian workflow status``
shows why the loop did what it did, the demo prints the same story, and a crash loses nothing that
happened before it.

Example:
    >>> events = read_timeline(sessions, workflow_id)  # doctest: +SKIP
    >>> [e.stage for e in events if e.kind == STEP_KIND]  # doctest: +SKIP
    ['trigger', 'version', 'knowledge_base', 'research', 'candidates', 'correction']
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from librarian.runtime import store

__all__ = ["STEP_KIND", "TimelineEvent", "read_timeline", "record_step"]

STEP_KIND = "correction_step"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimelineEvent:
    """One entry of a workflow's timeline.

    Attributes:
        at: when it happened (UTC).
        kind: the event kind (``correction_step`` for the loop's steps, the runtime's kinds otherwise).
        stage: the loop's step name, or the runtime's kind.
        task: the key of the task it concerns, if any.
        summary: one line a person can read.
        data: the structured details (candidates, snippets, versions...).
        to_status: the status a runtime event moved the task to, if any.
    """

    at: datetime
    kind: str
    stage: str
    task: str | None
    summary: str
    data: dict[str, Any] = field(default_factory=dict)
    to_status: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "at": self.at.isoformat(),
            "kind": self.kind,
            "stage": self.stage,
            "task": self.task,
            "summary": self.summary,
            "data": self.data,
            "to_status": self.to_status,
        }


def record_step(
    sessions: sessionmaker[Session],
    *,
    workflow_id: uuid.UUID,
    task_id: uuid.UUID | None,
    stage: str,
    summary: str,
    actor: str,
    data: dict[str, Any] | None = None,
) -> None:
    """Append one loop step to the workflow's event log, in its own short transaction.

    The timeline explains; it never decides. A database hiccup while writing it is logged and the
    correction goes on.
    """
    try:
        with sessions.begin() as session:
            store.record_event(
                session,
                workflow_id=workflow_id,
                task_id=task_id,
                kind=STEP_KIND,
                actor=actor,
                reason=summary,
                data={"stage": stage, **(data or {})},
            )
    except SQLAlchemyError:
        logger.exception("could not record the %s step of workflow %s", stage, workflow_id)


def read_timeline(sessions: sessionmaker[Session], workflow_id: str | uuid.UUID) -> list[TimelineEvent]:
    """Every event of the workflow, oldest first, the loop's steps with their stage names.

    Raises:
        NotFoundError: no such workflow. InvalidInputError: not a workflow id.
    """
    with sessions() as session:
        workflow = store.get_workflow(session, workflow_id)
        keys = {task.task_id: task.task_key for task in store.workflow_tasks(session, workflow.workflow_id)}
        rows = store.events(session, workflow.workflow_id)
        return [
            TimelineEvent(
                at=row.at,
                kind=row.kind,
                stage=str((row.data or {}).get("stage", row.kind)) if row.kind == STEP_KIND else row.kind,
                task=keys.get(row.task_id) if row.task_id else None,
                summary=row.reason,
                data=dict(row.data or {}),
                to_status=row.to_status,
            )
            for row in rows
        ]
