"""The verdict on one correction attempt, read from the runtime's event log (the truth about what ran).

See :mod:`librarian.correction.fixes` for what a verdict leads to: a verified fix, a failure counted
against one, the strategy's reward.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from librarian.correction.models import CorrectionAttempt
from librarian.runtime import store
from librarian.runtime.contracts import TaskStatus, WorkflowStatus
from librarian.runtime.models import Task, TaskEvent
from librarian.storage.models import as_utc

__all__ = ["attempt_verdict"]


def attempt_verdict(
    session: Session, attempt: CorrectionAttempt
) -> tuple[str, float | None, datetime | None] | None:
    """``(outcome, reward, when the retry succeeded)``, or ``None`` while it is undecided."""
    task = session.get(Task, attempt.task_id)
    if task is None:
        return ("not_applied", None, None)
    workflow = store.get_workflow(session, task.workflow_id)
    # A paused workflow (waiting for an answer) is not over: its attempts wait with it.
    finished = workflow.final_status not in (WorkflowStatus.RUNNING.value, WorkflowStatus.PAUSED.value)
    log = store.events(session, task.workflow_id, task.task_id)
    surgery = next(
        (
            i
            for i, event in enumerate(log)
            if event.kind == "surgery"
            and as_utc(event.at) >= as_utc(attempt.proposed_at)
            and _retried(event, attempt)
        ),
        None,
    )
    if surgery is None:
        applied_elsewhere = task.status != TaskStatus.FAILED.value and any(
            event.kind == "surgery" and as_utc(event.at) >= as_utc(attempt.proposed_at) for event in log
        )
        return ("not_applied", None, None) if finished or applied_elsewhere else None
    result = next((event for event in log[surgery + 1 :] if event.kind == "result_applied"), None)
    if result is None:
        return ("failed", None, None) if finished else None
    reward = _reward(result)
    if result.to_status != TaskStatus.SUCCESS.value:
        # The loop decides what the failure means when it next corrects the task: a correction of
        # this correction continues a chain (no verdict yet: the chain's end decides), anything
        # else means this one was wrong.
        later = list(
            session.scalars(
                select(CorrectionAttempt).where(
                    CorrectionAttempt.task_id == attempt.task_id, CorrectionAttempt.id > attempt.id
                )
            )
        )
        if any(other.chain_parent_id == attempt.id for other in later):
            return ("continued", reward, None)
        return ("failed", reward, None) if later or finished else None
    dependants = [
        other
        for other in store.workflow_tasks(session, task.workflow_id)
        if task.task_id in other.dependencies
    ]
    if all(other.status == TaskStatus.SUCCESS.value for other in dependants):
        return ("succeeded", reward, result.at)
    if finished:
        return ("failed", reward, None)
    return None


def _retried(event: TaskEvent, attempt: CorrectionAttempt) -> bool:
    """Whether a surgery event retried the task with the attempt's correction."""
    plan = (event.data or {}).get("plan") or {}
    payload = (plan.get("retry") or {}).get("payload") or {}
    if attempt.kind == "code":
        return attempt.corrected_code is not None and payload.get("code") == attempt.corrected_code
    argv = payload.get("argv")
    return isinstance(argv, list) and argv == list(attempt.corrected_argv)


def _reward(event: TaskEvent) -> float | None:
    value = (event.data or {}).get("reward")
    return float(value) if isinstance(value, int | float) else None
