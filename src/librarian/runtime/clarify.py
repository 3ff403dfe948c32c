"""Clarification: a corrector asks the user a question, the workflow pauses, an answer resumes it.

Everything lives in the event log, so it survives restarts and explains itself:

- ``clarification_requested`` (workflow ``running`` -> ``paused``) carries the question, the strategy
  that asked, the failed task and the error category;
- ``clarification_answered`` (``paused`` -> ``running``) carries the answer next to its question.

While paused, the orchestrator neither dispatches nor corrects the workflow's tasks (every query of
the loop filters on running workflows); the failed task stays failed. Once answered, the next pass
corrects it again and every corrector finds the answers in ``CorrectionContext.answers``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from librarian.errors import ConflictError, InvalidInputError
from librarian.runtime import store
from librarian.runtime.contracts import TaskStatus, WorkflowStatus
from librarian.runtime.correctors import Clarification
from librarian.runtime.models import Task, TaskEvent
from librarian.storage.models import utcnow

REQUESTED = "clarification_requested"
ANSWERED = "clarification_answered"
MAX_ANSWER_CHARS = 10_000


@dataclass(frozen=True)
class PendingQuestion:
    """The question a paused workflow waits on."""

    question: str
    strategy: str
    task_key: str
    asked_at: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "question": self.question,
            "strategy": self.strategy,
            "task": self.task_key,
            "asked_at": self.asked_at,
        }


def ask(
    session: Session, task: Task, *, strategy: str, question: str, rationale: str, category: str, actor: str
) -> bool:
    """Pause the running workflow of the failed ``task`` with ``question``; ``False`` if it is not running."""
    return store.set_workflow_status(
        session,
        task.workflow_id,
        WorkflowStatus.RUNNING,
        WorkflowStatus.PAUSED,
        kind=REQUESTED,
        actor=actor,
        reason=f"strategy {strategy!r} asks about {task.task_key!r}: {question}",
        task_id=task.task_id,
        data={
            "question": question,
            "strategy": strategy,
            "task_key": task.task_key,
            "category": category,
            "rationale": rationale,
        },
    )


def answer(session: Session, workflow_id: str | uuid.UUID, text: str, *, actor: str) -> PendingQuestion:
    """Store ``text`` as the answer to the paused workflow's question and set it running again.

    Tasks left ``dispatched`` while it was paused (their messages were refused) get an expired lease,
    so the next pass dispatches them again at once instead of after their lease.

    Returns:
        The question that was answered.

    Raises:
        NotFoundError: no such workflow. InvalidInputError: an empty or overlong answer.
        ConflictError: the workflow is not waiting for an answer.
    """
    text = text.strip()
    if not text:
        raise InvalidInputError("the answer is empty", hint='librarian workflow answer ID "your answer"')
    if len(text) > MAX_ANSWER_CHARS:
        raise InvalidInputError(f"the answer is {len(text)} characters long; the limit is {MAX_ANSWER_CHARS}")
    workflow = store.get_workflow(session, workflow_id)
    pending = pending_question(session, workflow.workflow_id)
    if workflow.final_status != WorkflowStatus.PAUSED.value or pending is None:
        raise ConflictError(
            f"workflow {workflow.workflow_id} is {workflow.final_status}, not waiting for an answer",
            hint=f"see it with: librarian workflow status {workflow.workflow_id}",
        )
    resumed = store.set_workflow_status(
        session,
        workflow.workflow_id,
        WorkflowStatus.PAUSED,
        WorkflowStatus.RUNNING,
        kind=ANSWERED,
        actor=actor,
        reason=f"answered {pending.question!r}: {text}",
        data={
            "question": pending.question,
            "answer": text,
            "strategy": pending.strategy,
            "task_key": pending.task_key,
        },
    )
    if not resumed:
        raise ConflictError(f"workflow {workflow.workflow_id} was answered or cancelled meanwhile")
    session.execute(
        update(Task)
        .where(Task.workflow_id == workflow.workflow_id, Task.status == TaskStatus.DISPATCHED.value)
        .values(lease_expires_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return pending


def pending_question(session: Session, workflow_id: uuid.UUID) -> PendingQuestion | None:
    """The latest question of the workflow when it has not been answered yet."""
    last = session.scalars(
        select(TaskEvent)
        .where(TaskEvent.workflow_id == workflow_id, TaskEvent.kind.in_([REQUESTED, ANSWERED]))
        .order_by(TaskEvent.id.desc())
        .limit(1)
    ).first()
    if last is None or last.kind != REQUESTED:
        return None
    data = last.data or {}
    return PendingQuestion(
        question=str(data.get("question", "")),
        strategy=str(data.get("strategy", "")),
        task_key=str(data.get("task_key", "")),
        asked_at=last.at.isoformat(),
    )


def answers(session: Session, workflow_id: uuid.UUID) -> tuple[Clarification, ...]:
    """Every answered question of the workflow, oldest first."""
    rows = session.scalars(
        select(TaskEvent)
        .where(TaskEvent.workflow_id == workflow_id, TaskEvent.kind == ANSWERED)
        .order_by(TaskEvent.id)
    )
    return tuple(
        Clarification(
            question=str(row.data.get("question", "")),
            answer=str(row.data.get("answer", "")),
            strategy=str(row.data.get("strategy", "")),
            task_key=str(row.data.get("task_key", "")),
        )
        for row in rows
    )


def questions_asked(session: Session, task_id: uuid.UUID) -> int:
    """How many questions were asked about this task (the limit stops a corrector that only asks)."""
    count = session.scalar(
        select(func.count())
        .select_from(TaskEvent)
        .where(TaskEvent.task_id == task_id, TaskEvent.kind == REQUESTED)
    )
    return int(count or 0)
