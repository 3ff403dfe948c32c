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

import contextlib
import errno
import os
import re
import secrets
import sys
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
from librarian.runtime.isolation import give_to_owner
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
    """Write ``code`` to a fresh file under ``<workspace>/.librarian/code``.

    The workspace is the task's to change: a task may have replaced ``.librarian`` with a link to a
    directory outside it. Every step opens the next directory without following links (through
    directory descriptors, so nothing can be swapped in between), and a link found in the way is
    removed, so the runtime never writes elsewhere on a task's behalf.
    """
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", task.task_id)[:40] + "-"
    name = f"{prefix}{secrets.token_hex(8)}.py"
    directory = os.open(workspace.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in (".librarian", "code"):
            parent, directory = directory, _own_directory(directory, part)
            os.close(parent)
            give_to_owner(directory, workspace.owner)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        file = os.open(name, flags, 0o600, dir_fd=directory)
        give_to_owner(file, workspace.owner)
        with os.fdopen(file, "w", encoding="utf-8") as handle:
            handle.write(code)
    finally:
        os.close(directory)
    return workspace.root / ".librarian" / "code" / name


def _own_directory(parent: int, name: str) -> int:
    """A descriptor of the real directory ``name`` in ``parent``; a link or file there is replaced."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent)
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    os.unlink(name, dir_fd=parent)  # a link (or a file) the task put there
    os.mkdir(name, 0o700, dir_fd=parent)
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
