"""The shapes every part of the runtime agrees on: task statuses, what an executor receives and returns.

Executors, the evaluator, the orchestrator and the brokers are written by different hands and run in
different processes; these types are their whole contract. Everything here is plain data that
round-trips through JSON, because it crosses the broker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol


class TaskStatus(StrEnum):
    """Lifecycle of a task (the values stored in ``tasks.status``)."""

    PENDING = "pending"
    DISPATCHED = "dispatched"
    IN_PROGRESS = "in_progress"
    SUCCESS = "success"
    FAILED = "failed"
    PAUSED = "paused"


class WorkflowStatus(StrEnum):
    """Final (or current) status of a workflow (``workflows.final_status``)."""

    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PAUSED = "paused"


@dataclass(frozen=True)
class WorkflowOwner:
    """Who submitted a workflow: an organisation and a user (``None``: the machine's operator)."""

    organization_id: int = 1
    created_by: int | None = None


@dataclass(frozen=True)
class TaskSpec:
    """What an executor needs to run one attempt of one task.

    ``payload`` depends on ``executor_type``: ``{"argv": [...]}`` or ``{"script": "..."}`` for
    ``command_executor``, ``{"code": "..."}`` for ``code_executor``, ``{"path": ..., "content": ...}``
    for ``file_writer``, ``{"method", "url", "headers", "json"}`` for ``api_caller``; any of them may
    carry ``"expect"`` (checked by the evaluator) and ``"timeout_seconds"``.
    """

    task_id: str
    workflow_id: str
    executor_type: str
    payload: dict[str, Any]
    description: str = ""
    attempt: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskSpec:
        return cls(**data)


@dataclass(frozen=True)
class ExecutionResult:
    """The outcome of one attempt, in the ``feedback_notes`` structure of the design.

    On success ``feedback`` is ``{status: "success", notes, stdout, stderr}``; on failure
    ``{status: "failed", error_type, error_message, traceback, details}`` where ``details`` holds
    e.g. ``{"exit_code": 255}`` for a command or ``{"operation", "path"}`` for a file error.
    ``output`` is what the evaluator validates (exit code, stdout, written path, HTTP status, body).
    """

    ok: bool
    feedback: dict[str, Any]
    output: dict[str, Any] = field(default_factory=dict)
    duration_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecutionResult:
        return cls(**data)


@dataclass(frozen=True)
class Workspace:
    """The per-workflow directory a task runs in; file writes never leave it.

    ``owner`` is the user the workflow's tasks run as when it is not the runtime's own (the runtime
    runs as root and isolates tasks), so what the runtime writes there is handed over to it.
    """

    root: Path
    workflow_id: str
    owner: int | None = None


class Executor(Protocol):
    """Runs one attempt of a task. Must not raise for a task failure: it returns ``ok=False``."""

    executor_type: str

    def execute(self, task: TaskSpec, workspace: Workspace) -> ExecutionResult: ...
