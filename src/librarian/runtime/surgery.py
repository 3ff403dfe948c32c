"""Atomic DAG surgery: insert a corrective sub-plan in front of a failed task, in one transaction.

The failed task becomes *paused*; each plan step becomes a new task whose ``parent_id`` is the failed
task (dependencies chained as the plan says); the failed task now also depends on the plan's last
corrective task(s), carries ``retries + 1`` and the retry payload, and is dispatched again once its
corrective tasks succeed. Either all of it is committed or none: a crash in the middle leaves the task
failed, and the orchestrator simply corrects it again. Limits on retries and nesting depth end the
workflow with a stored report instead of a loop.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from librarian.runtime import store
from librarian.runtime.contracts import TaskStatus, WorkflowStatus
from librarian.runtime.models import Task
from librarian.runtime.plan import CorrectionPlan
from librarian.storage.models import utcnow


@dataclass(frozen=True)
class Limits:
    """How far correction may go for one task.

    Attributes:
        max_retries: retries of one task before its workflow fails.
        max_depth: how deeply corrective sub-plans may nest.
        max_questions: clarification questions correctors may ask about one task.
    """

    max_retries: int
    max_depth: int
    max_questions: int = 3


def limit_reached(session: Session, task: Task, limits: Limits) -> str | None:
    """Why ``task`` may not be corrected again, or ``None`` when it may."""
    if task.retries >= limits.max_retries:
        return f"task {task.task_key!r} failed after {task.retries} retries (limit {limits.max_retries})"
    depth = store.surgery_depth(session, task)
    if depth + 1 > limits.max_depth:
        return (
            f"task {task.task_key!r} is a corrective task nested {depth} deep; another corrective "
            f"sub-plan would exceed the surgery depth limit {limits.max_depth}"
        )
    return None


def perform_surgery(
    session: Session,
    task: Task,
    plan: CorrectionPlan,
    *,
    strategy: str,
    category: str,
    rationale: str,
    actor: str,
) -> list[Task] | None:
    """Insert ``plan`` in front of the failed ``task`` (call inside one transaction).

    Returns the inserted corrective tasks, or ``None`` when the task is no longer failed (another
    orchestrator corrected it first; nothing is changed).
    """
    failure = _failure_summary(task.feedback_notes)
    # Captured before the update: every one of these succeeded before the task ran, so the first
    # corrective steps may safely wait on them too.
    original = list(task.dependencies)
    retry = task.retries + 1
    new_ids = {step.id: uuid.uuid4() for step in plan.steps}
    extra = [new_ids[step_id] for step_id in plan.retry_depends_on]
    # The failed task waits for its corrective tasks on top of what it waited for already.
    dependencies = [*original, *[dep for dep in extra if dep not in original]]
    won = store.transition(
        session,
        task,
        [TaskStatus.FAILED.value],
        {
            "status": TaskStatus.PAUSED.value,
            "retries": retry,
            "dependencies": dependencies,
            "payload": plan.retry_payload,
            "correction_strategy": strategy,
            "error_category": category,
            "lease_owner": None,
            "lease_expires_at": None,
        },
        kind="surgery",
        actor=actor,
        reason=(
            f"{failure['error_type']}: {failure['error_message']} -- strategy {strategy!r} inserted "
            f"{len(plan.steps)} corrective task(s); retry {retry} follows ({rationale})"
        ),
        data={
            "strategy": strategy,
            "category": category,
            "retry": retry,
            "plan": plan.to_dict(),
            "failure": failure,
            "inserted": [str(new_ids[step.id]) for step in plan.steps],
        },
    )
    if not won:
        return None
    order = store.next_task_order(session, task.workflow_id)
    now = utcnow()
    inserted: list[Task] = []
    for index, step in enumerate(plan.steps):
        step_dependencies = [new_ids[dep] for dep in step.depends_on] or original
        corrective = Task(
            task_id=new_ids[step.id],
            workflow_id=task.workflow_id,
            parent_id=task.task_id,
            task_order=order + index,
            task_key=_corrective_key(session, task, retry, step.id),
            description=step.description,
            status=TaskStatus.PENDING.value,
            dependencies=step_dependencies,
            executor_type=step.executor_type,
            payload=step.payload,
            retries=0,
            attempt=0,
            creation_timestamp=now,
            last_update_timestamp=now,
            rationale=step.rationale,
        )
        session.add(corrective)
        inserted.append(corrective)
        store.record_event(
            session,
            workflow_id=task.workflow_id,
            task_id=corrective.task_id,
            kind="task_inserted",
            actor=actor,
            reason=(
                f"inserted by strategy {strategy!r} to repair {task.task_key!r} after "
                f"{failure['error_type']}: {step.rationale}"
            ),
            to_status=TaskStatus.PENDING.value,
            data={"parent_id": str(task.task_id), "strategy": strategy, "retry": retry, "failure": failure},
        )
    session.flush()
    return inserted


def fail_workflow(
    session: Session,
    task: Task,
    reason: str,
    *,
    actor: str,
    rejected: list[dict[str, Any]] | None = None,
) -> bool:
    """End the workflow of ``task`` as failed with a report of why (call inside one transaction)."""
    workflow = store.get_workflow(session, task.workflow_id)
    report = {
        "reason": reason,
        "task_id": str(task.task_id),
        "task_key": task.task_key,
        "retries": task.retries,
        "depth": store.surgery_depth(session, task),
        "failure": _failure_summary(task.feedback_notes),
        "rejected_plans": rejected or [],
    }
    return store.finish_workflow(
        session, workflow, WorkflowStatus.FAILED, actor=actor, reason=reason, report=report
    )


def _failure_summary(feedback: dict[str, Any] | None) -> dict[str, Any]:
    feedback = feedback or {}
    return {
        "error_type": feedback.get("error_type") or "unknown",
        "error_message": str(feedback.get("error_message") or "")[:1000],
        "details": {
            key: value
            for key, value in (feedback.get("details") or {}).items()
            if key in {"exit_code", "operation", "path", "signal", "timed_out", "argv", "status_code"}
        },
    }


def _corrective_key(session: Session, parent: Task, retry: int, step_id: str) -> str:
    """``parent.fix<retry>.<step>``, kept unique in the workflow and under the column's 255 characters.

    Nested repairs grow the key each time, and a workflow may itself declare a task named like
    ``a.fix1.step``; then a short digest of the parent's id and the step keeps them apart.
    """
    key = f"{parent.task_key}.fix{retry}.{step_id}"
    taken = session.scalar(
        select(Task.task_id).where(Task.workflow_id == parent.workflow_id, Task.task_key == key)
    )
    if len(key) <= 255 and taken is None:
        return key
    digest = hashlib.sha256(f"{parent.task_id}:{retry}:{step_id}".encode()).hexdigest()[:8]
    return f"{parent.task_key[:120]}.fix{retry}.{step_id[:80]}~{digest}"
