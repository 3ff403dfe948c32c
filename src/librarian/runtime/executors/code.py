"""``code_executor``: run Python source in the same sandbox as commands.

Payload: ``code`` (Python source), optional ``args`` (``sys.argv[1:]``), ``env``, ``venv``, ``python``,
``stdin``, ``timeout_seconds``, ``memory_mb``, ``output_bytes`` and ``expect.exit_code``. The source is
written to a file inside the workspace and run in isolated mode (``-I``: no ``PYTHON*`` variables, no
user site, the script's directory not on ``sys.path`` ahead of the standard library) by the task's own
interpreter: the payload's ``python``, else its virtualenv's (``venv``), else the first ``python3`` on
the ``PATH`` the task sets in ``env``, else the runtime's own (so a task that names no environment
gets the libraries installed with Librarian). When the program dies of an exception, the failure
carries its traceback and exception type.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from librarian.errors import LibrarianError
from librarian.runtime.contracts import ExecutionResult, TaskSpec, Workspace
from librarian.runtime.executors.base import (
    environment_of,
    expected_exit_code,
    failure,
    field,
    from_error,
    process_limits,
    string_list,
)
from librarian.runtime.executors.command import outcome_result
from librarian.runtime.isolation import hand_over
from librarian.runtime.sandbox import EnvironmentManager

_TRACEBACK_START = "Traceback (most recent call last):"
# The last line of a traceback: ``ValueError: bad`` or ``pkg.mod.CustomError`` (no message).
_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")


class CodeExecutor:
    """Runs Python source in the Environment Manager's sandbox."""

    executor_type: str = "code_executor"

    def __init__(self, environment: EnvironmentManager, *, python: str = sys.executable) -> None:
        self.environment = environment
        self.python = python

    def execute(self, task: TaskSpec, workspace: Workspace) -> ExecutionResult:
        """Run the task's code; a raised exception becomes a failure carrying its traceback."""
        script: Path | None = None
        try:
            code = field(task, "code", str, required=True)
            args = string_list(task, "args") or []
            expected = expected_exit_code(task)
            environment = environment_of(task, self.environment, workspace)
            python = environment.interpreter(self.environment.path, self.python)
            script = _write_script(workspace, task, code)
            outcome = self.environment.run(
                [python, "-I", str(script), *args],
                workspace,
                env_overrides=environment.overrides,
                stdin=field(task, "stdin", str),
                **process_limits(task, self.environment),
            )
        except LibrarianError as exc:
            return from_error(exc)
        except OSError as exc:
            return failure(
                type(exc).__name__,
                f"cannot write the code of task {task.task_id!r} into the workspace: {exc}",
                details={"operation": "write", "path": str(workspace.root / ".librarian")},
            )
        finally:
            if script is not None:
                script.unlink(missing_ok=True)
        result = outcome_result(outcome, expected, describe="the code")
        if result.ok or outcome.timed_out:
            return result
        raised = python_exception(outcome.stderr)
        if raised is None:
            return result
        error_type, message, traceback = raised
        feedback = {**result.feedback, "error_type": error_type, "error_message": message}
        feedback["traceback"] = traceback
        return ExecutionResult(
            ok=False, feedback=feedback, output=result.output, duration_seconds=result.duration_seconds
        )


def python_exception(stderr: str) -> tuple[str, str, str] | None:
    """Find the last Python traceback in ``stderr``: its exception type, message and full text.

    Returns:
        ``(type, message, traceback)``, e.g. ``("ZeroDivisionError", "division by zero", "Traceback...")``;
        None when ``stderr`` holds no traceback.
    """
    start = stderr.rfind(_TRACEBACK_START)
    if start < 0:
        return None
    traceback = stderr[start:].rstrip()
    lines = [line for line in traceback.splitlines() if line.strip()]
    match = _EXCEPTION_LINE.match(lines[-1]) if lines else None
    if match is None:
        return "Exception", lines[-1] if lines else "", traceback
    error_type = match["type"].rsplit(".", 1)[-1]
    return error_type, match["message"] or error_type, traceback


def _write_script(workspace: Workspace, task: TaskSpec, code: str) -> Path:
    """Write ``code`` to a fresh file under ``<workspace>/.librarian/code``."""
    directory = workspace.root / ".librarian" / "code"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", task.task_id)[:40] + "-"
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", suffix=".py", prefix=prefix, dir=directory, delete=False
    ) as handle:
        handle.write(code)
    hand_over(workspace, Path(handle.name))
    return Path(handle.name)
