"""What the built-in executors share: building results in the feedback_notes shape and reading payloads.

A malformed payload is a task failure, not a crash: the executor returns ``ok=False`` with
``error_type="PayloadError"`` and a message naming the task and the payload field, so the
self-correcting loop can repair the plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

from librarian.errors import InvalidInputError, LibrarianError
from librarian.runtime.contracts import ExecutionResult, TaskSpec, Workspace
from librarian.runtime.sandbox import EnvironmentManager, ProcessOutcome
from librarian.runtime.task_env import TaskEnvironment, task_environment


class PayloadError(InvalidInputError):
    """A task payload field is missing or has the wrong type."""


def success(
    notes: str,
    *,
    stdout: str = "",
    stderr: str = "",
    output: dict[str, Any] | None = None,
    duration_seconds: float = 0.0,
) -> ExecutionResult:
    """An ``ok`` result with feedback ``{status: "success", notes, stdout, stderr}``."""
    feedback = {"status": "success", "notes": notes, "stdout": stdout, "stderr": stderr}
    return ExecutionResult(ok=True, feedback=feedback, output=output or {}, duration_seconds=duration_seconds)


def failure(
    error_type: str,
    message: str,
    *,
    details: dict[str, Any] | None = None,
    traceback: str = "",
    output: dict[str, Any] | None = None,
    duration_seconds: float = 0.0,
) -> ExecutionResult:
    """A failed result with feedback ``{status: "failed", error_type, error_message, traceback, details}``."""
    feedback = {
        "status": "failed",
        "error_type": error_type,
        "error_message": message,
        "traceback": traceback,
        "details": details or {},
    }
    return ExecutionResult(
        ok=False, feedback=feedback, output=output or {}, duration_seconds=duration_seconds
    )


def from_error(error: LibrarianError, *, details: dict[str, Any] | None = None) -> ExecutionResult:
    """A failed result for one of our own errors (refused path, bad payload, unknown command)."""
    message = f"{error.message} ({error.hint})" if error.hint else error.message
    return failure(type(error).__name__, message, details=details)


def where(task: TaskSpec) -> str:
    """How messages name a task: ``task 'build' (command_executor)``."""
    return f"task {task.task_id!r} ({task.executor_type})"


def field(task: TaskSpec, name: str, kind: type | tuple[type, ...], *, required: bool = False) -> Any:
    """The payload value ``name`` checked against ``kind``; None when absent and not required.

    Raises:
        PayloadError: missing while required, or of the wrong type.
    """
    if name not in task.payload or task.payload[name] is None:
        if required:
            raise PayloadError(f"{where(task)}: payload field {name!r} is required")
        return None
    value = task.payload[name]
    # bool is an int subclass; a limit given as true/false is a mistake, not a number.
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        expected = " or ".join(t.__name__ for t in _as_tuple(kind))
        raise PayloadError(
            f"{where(task)}: payload field {name!r} must be {expected}, got {type(value).__name__}"
        )
    return value


def string_list(task: TaskSpec, name: str, *, required: bool = False) -> list[str] | None:
    """A payload field that must be a list of strings (``argv``, ``args``)."""
    value = field(task, name, list, required=required)
    if value is not None and not all(isinstance(item, str) for item in value):
        raise PayloadError(f"{where(task)}: payload field {name!r} must be a list of strings")
    return cast("list[str] | None", value)


def string_map(task: TaskSpec, name: str) -> dict[str, str] | None:
    """A payload field that must map strings to strings (``env``, ``headers``)."""
    value = field(task, name, dict)
    if value is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise PayloadError(f"{where(task)}: payload field {name!r} must map strings to strings")
    return cast("dict[str, str] | None", value)


def environment_of(task: TaskSpec, environment: EnvironmentManager, workspace: Workspace) -> TaskEnvironment:
    """The task's ``env``, ``venv`` and ``python`` (:mod:`librarian.runtime.task_env`).

    Raises:
        PayloadError: one of them is malformed; the message names the task and the field.
    """
    try:
        return task_environment(task.payload, workspace.root, environment.path)
    except InvalidInputError as exc:
        raise PayloadError(f"{where(task)}: {exc.message}", hint=exc.hint) from exc


def expect(task: TaskSpec) -> Mapping[str, Any]:
    """The payload's optional ``expect`` block (checked by the evaluator; some executors read it)."""
    value = field(task, "expect", dict)
    return value or {}


def expected_exit_code(task: TaskSpec) -> int:
    """``expect.exit_code``, 0 when absent."""
    code = expect(task).get("exit_code", 0)
    if not isinstance(code, int) or isinstance(code, bool):
        raise PayloadError(f"{where(task)}: payload field 'expect.exit_code' must be an integer")
    return code


def process_limits(task: TaskSpec, environment: EnvironmentManager) -> dict[str, Any]:
    """Keyword limits for :meth:`EnvironmentManager.run` from the payload.

    ``timeout_seconds`` replaces the default (a long build may need more time); ``memory_mb`` and
    ``output_bytes`` may only lower the operator's limits, never raise them; ``network: true`` asks
    for the network, which the operator's ``runtime_sandbox_network`` grants or not.
    """
    timeout = field(task, "timeout_seconds", (int, float))
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise PayloadError(f"{where(task)}: payload field 'timeout_seconds' must be a positive number")
    memory = field(task, "memory_mb", int)
    output = field(task, "output_bytes", int)
    network = field(task, "network", bool)
    limits = environment.limits
    return {
        "network": bool(network),
        "timeout_seconds": float(timeout) if timeout is not None else limits.timeout_seconds,
        "memory_mb": min(memory, limits.memory_mb) if memory is not None else limits.memory_mb,
        "output_bytes": min(output, limits.output_bytes) if output is not None else limits.output_bytes,
    }


def process_output(outcome: ProcessOutcome) -> dict[str, Any]:
    """What the evaluator validates for a command or code run."""
    return {
        "exit_code": outcome.exit_code,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "timed_out": outcome.timed_out,
        "stdout_truncated": outcome.stdout_truncated,
        "stderr_truncated": outcome.stderr_truncated,
    }


def process_details(outcome: ProcessOutcome) -> dict[str, Any]:
    """Failure details of a run: exit code, signal, timeout and the captured output."""
    return {
        "exit_code": outcome.exit_code,
        "signal": outcome.signal_name,
        "timed_out": outcome.timed_out,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "argv": list(outcome.argv),
    }


def last_lines(text: str, count: int = 5, limit: int = 800) -> str:
    """The last non-empty lines of ``text``, for an error message that shows why without the whole log."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    tail = "\n".join(lines[-count:])
    return tail if len(tail) <= limit else "..." + tail[-limit:]


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)
