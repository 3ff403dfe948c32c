"""Correctors: given a failed task and its context, propose a corrective plan.

A corrector is one *strategy*; the orchestrator asks the policy in which order to try them and
validates what each returns (:mod:`librarian.runtime.plan`). Two simple strategies ship here
(create a missing path; retry as is) and a scripted one for tests. The self-correcting brain with
research and LLM correctors plugs in through the same :class:`Corrector` protocol.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Protocol

from librarian.errors import InvalidInputError


@dataclass(frozen=True)
class FailedTask:
    """The task that failed, with its structured error (``feedback_notes``)."""

    key: str
    description: str
    executor_type: str
    payload: dict[str, Any]
    feedback_notes: dict[str, Any]
    retries: int
    error_category: str


@dataclass(frozen=True)
class CompletedTask:
    """One task that already succeeded in the same workflow."""

    key: str
    description: str
    executor_type: str
    payload: dict[str, Any]
    notes: str


@dataclass(frozen=True)
class Clarification:
    """A question a corrector asked the user about a failed task, and the user's answer."""

    question: str
    answer: str
    strategy: str
    task_key: str


@dataclass(frozen=True)
class CorrectionContext:
    """What a corrector sees.

    Attributes:
        goal: the workflow's overall goal (its ``user_prompt``).
        failed: the failed task with its structured error.
        history: the workflow's tasks that succeeded so far, oldest first.
        answers: every clarification of this workflow answered so far, oldest first; a corrector
            that asked a question (:class:`ClarificationRequest`) finds the answer here when the
            workflow resumes.
        workflow_id, task_id: where the failed task is stored (uuids as text).
    """

    goal: str
    failed: FailedTask
    history: tuple[CompletedTask, ...] = ()
    answers: tuple[Clarification, ...] = ()
    workflow_id: str | None = None
    task_id: str | None = None


@dataclass(frozen=True)
class CorrectionProposal:
    """A corrector's answer: the plan (JSON text or object, validated later) and why."""

    strategy: str
    plan: str | dict[str, Any]
    rationale: str


@dataclass(frozen=True)
class ClarificationRequest:
    """A corrector's question for the user instead of a plan.

    The workflow pauses (status ``paused``, the question stored in the event log) until
    ``librarian workflow answer ID "..."`` (:meth:`~librarian.runtime.engine.Runtime.answer`)
    resumes it; correction of the failed task then starts again with the answer in
    :attr:`CorrectionContext.answers`.
    """

    strategy: str
    question: str
    rationale: str = ""


logger = logging.getLogger(__name__)


class Corrector(Protocol):
    """One correction strategy. ``propose`` returns ``None`` when it has nothing to offer.

    It may also ask the user a question (:class:`ClarificationRequest`) when only they can say what
    was meant. ``propose`` may take its time (research, an LLM); the orchestrator calls it off its
    dispatch loop and abandons it after a timeout.
    """

    name: str

    def propose(self, context: CorrectionContext) -> CorrectionProposal | ClarificationRequest | None: ...


# -- error categories ----------------------------------------------------------------------------

_MISSING = re.compile(r"no such file or directory|not found: '|cannot access|can't open", re.IGNORECASE)
_NOT_FOUND_COMMAND = re.compile(r"command not found|CommandNotFound|executable .* not found", re.IGNORECASE)


def error_category(feedback: dict[str, Any] | None) -> str:
    """A coarse category of a failure, the key under which strategy rewards are learned.

    Examples: ``missing_path``, ``command_not_found``, ``timeout``, ``invalid_output``,
    ``command_failed``; otherwise the error type in snake case.
    """
    if not feedback:
        return "unknown"
    error_type = str(feedback.get("error_type") or "")
    details = feedback.get("details") or {}
    text = " ".join(
        str(part)
        for part in (
            feedback.get("error_message"),
            details.get("stderr") if isinstance(details, dict) else "",
        )
        if part
    )
    exit_code = details.get("exit_code") if isinstance(details, dict) else None
    if _NOT_FOUND_COMMAND.search(error_type) or _NOT_FOUND_COMMAND.search(text) or exit_code == 127:
        return "command_not_found"
    if error_type in {"FileNotFoundError", "NotADirectoryError"} or _MISSING.search(text):
        return "missing_path"
    if "timeout" in error_type.lower() or (isinstance(details, dict) and details.get("timed_out")):
        return "timeout"
    if error_type in {"InvalidOutput", "ValidationError", "InvalidOutputError"}:
        return "invalid_output"
    if error_type == "CommandFailedError":
        return "command_failed"
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", error_type).lower()
    return snake or "unknown"


# -- built-in strategies -------------------------------------------------------------------------

_PATH_PATTERNS = (
    re.compile(r"No such file or directory: '([^']+)'"),
    re.compile(r"can't open '?([^':\s]+)'?"),
    re.compile(r"cannot (?:access|open|stat) '([^']+)'"),
    re.compile(r"([^\s:'\"]+): No such file or directory"),
)


def missing_path(feedback: dict[str, Any]) -> str | None:
    """The path a failure says is missing, from ``details.path`` or the error text."""
    details = feedback.get("details") or {}
    if isinstance(details, dict) and isinstance(details.get("path"), str):
        return str(details["path"])
    text = "\n".join(
        str(part)
        for part in (
            feedback.get("error_message"),
            details.get("stderr") if isinstance(details, dict) else None,
        )
        if part
    )
    for pattern in _PATH_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1)
    return None


class CreateMissingPathCorrector:
    """For a missing file or directory inside the workspace: create it, then retry.

    A name with a suffix (``data.csv``) becomes an empty file (``file_writer``), anything else a
    directory (``mkdir -p``). Absolute paths and ``..`` are left alone: the workspace is the limit.
    """

    name = "create_missing_path"

    def propose(self, context: CorrectionContext) -> CorrectionProposal | None:
        """A two-step plan (create, retry) or ``None`` when no missing relative path is named."""
        if context.failed.error_category != "missing_path":
            return None
        path = missing_path(context.failed.feedback_notes)
        if not path or path.startswith("/") or ".." in PurePosixPath(path).parts:
            return None
        if PurePosixPath(path).suffix and not path.endswith("/"):
            step: dict[str, Any] = {
                "description": f"create the missing file {path}",
                "executor_type": "file_writer",
                "payload": {"path": path, "content": ""},
                "rationale": f"the task failed because {path} does not exist",
            }
        else:
            step = {
                "description": f"create the missing directory {path}",
                "executor_type": "command_executor",
                "payload": {"argv": ["mkdir", "-p", path]},
                "rationale": f"the task failed because the directory {path} does not exist",
            }
        plan = {"steps": [step, _retry_step(context, f"retry once {path} exists")]}
        return CorrectionProposal(self.name, plan, f"create {path}, which the failure names as missing")


class RetryCorrector:
    """Retry the task unchanged: worth it for transient failures (timeouts, flaky services)."""

    name = "retry"

    def propose(self, context: CorrectionContext) -> CorrectionProposal | None:
        """A plan with only the retry step; nothing for errors a retry cannot fix."""
        if context.failed.error_category in {"command_not_found", "missing_path"}:
            return None
        plan = {"steps": [_retry_step(context, "the failure may be transient")]}
        return CorrectionProposal(self.name, plan, "retry unchanged")


def _retry_step(context: CorrectionContext, rationale: str) -> dict[str, Any]:
    return {
        "description": f"retry {context.failed.key}",
        "executor_type": context.failed.executor_type,
        "payload": context.failed.payload,
        "rationale": rationale,
        "retry_failed_task": True,
    }


@dataclass
class ScriptedCorrector:
    """Returns the given plans in order (then ``None``); for tests and demonstrations.

    Each entry may be JSON text (even invalid), a dict, a :class:`ClarificationRequest` (a question
    for the user) or ``None`` (no proposal). ``delay_seconds`` makes every call slow, so a test can
    kill the process in the middle of a correction. ``contexts`` keeps what each call was given.
    """

    name: str
    plans: Sequence[str | dict[str, Any] | ClarificationRequest | None]
    delay_seconds: float = 0.0
    calls: int = 0
    contexts: list[CorrectionContext] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def propose(self, context: CorrectionContext) -> CorrectionProposal | ClarificationRequest | None:
        """The next scripted entry."""
        if self.delay_seconds:
            time.sleep(self.delay_seconds)
        with self._lock:
            index = self.calls
            self.calls += 1
            self.contexts.append(context)
        if index >= len(self.plans) or self.plans[index] is None:
            return None
        plan = self.plans[index]
        assert plan is not None
        if isinstance(plan, ClarificationRequest):
            return plan
        return CorrectionProposal(self.name, plan, f"scripted plan {index + 1} for {context.failed.key}")


# -- registry ------------------------------------------------------------------------------------


class CorrectorRegistry:
    """Named correction strategies, in their default order."""

    def __init__(self, correctors: Iterable[Corrector] = ()) -> None:
        self._correctors: dict[str, Corrector] = {}
        for corrector in correctors:
            self.register(corrector)

    def register(self, corrector: Corrector) -> None:
        """Add a strategy.

        Raises:
            InvalidInputError: a strategy with the same name is already registered.
        """
        if corrector.name in self._correctors:
            raise InvalidInputError(f"correction strategy {corrector.name!r} is registered twice")
        self._correctors[corrector.name] = corrector

    def names(self) -> list[str]:
        """Strategy names in registration order."""
        return list(self._correctors)

    def get(self, name: str) -> Corrector:
        """The strategy called ``name``."""
        return self._correctors[name]

    def workflow_finished(self, workflow_id: str) -> None:
        """Tell strategies that learn (an optional ``workflow_finished(workflow_id)``) a workflow ended.

        Called after the commit that ended it, for success and failure alike; a failing hook is
        logged and never stops the runtime or the other strategies.
        """
        for name, corrector in self._correctors.items():
            hook = getattr(corrector, "workflow_finished", None)
            if not callable(hook):
                continue
            try:
                hook(workflow_id)
            except Exception:
                logger.exception("strategy %s failed to learn from workflow %s", name, workflow_id)

    def __len__(self) -> int:
        return len(self._correctors)


def default_correctors() -> list[Corrector]:
    """The strategies a runtime uses when none are given."""
    return [CreateMissingPathCorrector(), RetryCorrector()]
