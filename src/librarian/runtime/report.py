"""A workflow as a readable tree (rich) and as JSON: statuses, retries, rewards, corrective tasks, events.

Original tasks are the roots, in workflow order; the corrective tasks that surgery inserted for a
task hang under it, with the rationale that explains why they exist.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from rich.markup import escape
from rich.tree import Tree
from sqlalchemy.orm import Session

from librarian.runtime import clarify, store
from librarian.runtime.models import Task, TaskEvent, Workflow

_STATUS_STYLE = {
    "success": "green",
    "failed": "red",
    "paused": "yellow",
    "pending": "dim",
    "dispatched": "cyan",
    "in_progress": "cyan",
    "running": "cyan",
    "cancelled": "magenta",
}


@dataclass(frozen=True)
class TaskReport:
    """One task of the report."""

    task_id: str
    key: str
    description: str
    executor_type: str
    status: str
    retries: int
    attempt: int
    reward: float | None
    parent_id: str | None
    depends_on: list[str]
    rationale: str | None
    outcome: str
    # What the task's last run reported (status, error type and message, output tails, notes) and,
    # for a failed or corrected task, the loop's classification and the strategy that corrected it.
    feedback_notes: dict[str, Any] | None = None
    error_category: str | None = None
    correction_strategy: str | None = None


@dataclass(frozen=True)
class EventReport:
    """One event of the log (``id`` grows with every event: a cursor for following a workflow)."""

    at: str
    task: str | None
    kind: str
    from_status: str | None
    to_status: str | None
    actor: str
    reason: str
    id: int = 0
    # The event's structured detail: for the loop's timeline steps, ``stage`` and what it found.
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkflowReport:
    """The state of one workflow."""

    workflow_id: str
    name: str
    goal: str
    status: str
    total_reward: float
    created_at: str
    finished_at: str | None
    failure_report: dict[str, Any] | None
    tasks: list[TaskReport] = field(default_factory=list)
    events: list[EventReport] = field(default_factory=list)
    # While paused: the question waiting for ``librarian workflow answer`` (question, task, strategy).
    question: dict[str, Any] | None = None
    # Who submitted it (``created_by`` is ``None`` for the machine's operator).
    organization_id: int = 1
    created_by: int | None = None

    @property
    def finished(self) -> bool:
        """Whether the workflow reached a final status (paused is not final: it waits for an answer)."""
        return self.status not in ("running", "paused")

    def task(self, key: str) -> TaskReport:
        """The task called ``key`` (raises ``KeyError`` when there is none)."""
        for task in self.tasks:
            if task.key == key:
                return task
        raise KeyError(key)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)

    def tree(self) -> Tree:
        """The DAG as a rich tree."""
        root = Tree(
            f"[bold]{escape(self.name)}[/] {self.workflow_id} "
            f"[{_STATUS_STYLE.get(self.status, 'white')}]{self.status}[/] "
            f"reward {self.total_reward:+.2f}"
        )
        children: dict[str | None, list[TaskReport]] = {}
        for task in self.tasks:
            children.setdefault(task.parent_id, []).append(task)
        keys = {task.task_id: task.key for task in self.tasks}

        def add(branch: Tree, task: TaskReport) -> None:
            style = _STATUS_STYLE.get(task.status, "white")
            reward = "" if task.reward is None else f" reward {task.reward:+.2f}"
            retries = f" retries {task.retries}" if task.retries else ""
            after = [keys.get(dependency, dependency[:8]) for dependency in task.depends_on]
            label = (
                f"[{style}]{task.status:<11}[/] [bold]{escape(task.key)}[/] ({task.executor_type})"
                f"{retries}{reward}" + (f" [dim]after {escape(', '.join(after))}[/]" if after else "")
            )
            if task.parent_id is not None and task.rationale:
                label += f"\n[italic]why: {escape(task.rationale)}[/]"
            if task.outcome:
                label += f"\n[dim]{escape(task.outcome)}[/]"
            node = branch.add(label)
            for child in children.get(task.task_id, []):
                add(node, child)

        for task in children.get(None, []):
            add(root, task)
        if self.failure_report:
            root.add(f"[red]failed: {escape(str(self.failure_report.get('reason', '')))}[/]")
        if self.question:
            root.add(
                f"[yellow]paused: {escape(str(self.question.get('task', '')))} needs an answer:[/] "
                f"{escape(str(self.question.get('question', '')))}\n"
                f'[dim]answer with: librarian workflow answer {self.workflow_id} "..."[/]'
            )
        return root


def build_report(
    session: Session, workflow_id: str | uuid.UUID, *, with_events: bool = True
) -> WorkflowReport:
    """Read a workflow, its tasks and (optionally) its event log.

    Raises:
        NotFoundError: no such workflow.
    """
    workflow = store.get_workflow(session, workflow_id)
    tasks = store.workflow_tasks(session, workflow.workflow_id)
    keys = {task.task_id: task.task_key for task in tasks}
    log = store.events(session, workflow.workflow_id) if with_events else []
    pending = (
        clarify.pending_question(session, workflow.workflow_id) if workflow.final_status == "paused" else None
    )
    return WorkflowReport(
        workflow_id=str(workflow.workflow_id),
        name=workflow.name,
        goal=workflow.user_prompt,
        status=workflow.final_status,
        total_reward=workflow.total_reward,
        created_at=_iso(workflow.creation_timestamp) or "",
        finished_at=_iso(workflow.finished_at),
        failure_report=workflow.failure_report,
        tasks=[_task(task) for task in tasks],
        events=[_event(event, keys) for event in log],
        question=pending.to_dict() if pending is not None else None,
        organization_id=workflow.organization_id,
        created_by=workflow.created_by,
    )


def events_after(session: Session, workflow_id: uuid.UUID, after: int = 0) -> list[EventReport]:
    """The workflow's events with an id above ``after``, oldest first (a follower's next batch)."""
    keys = {task.task_id: task.task_key for task in store.workflow_tasks(session, workflow_id)}
    return [_event(event, keys) for event in store.events(session, workflow_id, after=after)]


def summary(workflow: Workflow) -> dict[str, Any]:
    """One line of ``workflow list``."""
    return {
        "workflow_id": str(workflow.workflow_id),
        "name": workflow.name,
        "status": workflow.final_status,
        "total_reward": workflow.total_reward,
        "created_at": _iso(workflow.creation_timestamp),
        "finished_at": _iso(workflow.finished_at),
    }


def _task(task: Task) -> TaskReport:
    notes = task.feedback_notes or {}
    if notes.get("status") == "failed" or notes.get("error_type"):
        outcome = f"{notes.get('error_type', 'error')}: {str(notes.get('error_message', ''))[:300]}"
    else:
        outcome = str(notes.get("notes", ""))[:300]
    return TaskReport(
        task_id=str(task.task_id),
        key=task.task_key,
        description=task.description,
        executor_type=task.executor_type,
        status=task.status,
        retries=task.retries,
        attempt=task.attempt,
        reward=task.reward,
        parent_id=str(task.parent_id) if task.parent_id else None,
        depends_on=[str(dependency) for dependency in task.dependencies],
        rationale=task.rationale,
        outcome=outcome,
        feedback_notes=task.feedback_notes,
        error_category=task.error_category,
        correction_strategy=task.correction_strategy,
    )


def _event(event: TaskEvent, keys: dict[uuid.UUID, str]) -> EventReport:
    return EventReport(
        at=_iso(event.at) or "",
        task=keys.get(event.task_id) if event.task_id else None,
        kind=event.kind,
        from_status=event.from_status,
        to_status=event.to_status,
        actor=event.actor,
        reason=event.reason,
        id=event.id,
        data=dict(event.data or {}),
    )


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
