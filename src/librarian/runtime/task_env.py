"""The environment a task asks for: its variables, its virtualenv, and the Python interpreter that is its own.

A payload may set ``env`` (variables, ``PATH`` included) and ``venv`` (a virtualenv directory, absolute
or relative to the workspace). A virtualenv puts its ``bin`` first on the task's ``PATH`` and sets
``VIRTUAL_ENV``, as ``source venv/bin/activate`` would. The same reading serves the executors (what a
task runs), the version probe (which version the task sees) and the self-correcting loop (which
installed API the task uses), so all three agree on what "the task's environment" is.

Example:
    >>> env = task_environment({"env": {"PATH": "/opt/tools/bin:/usr/bin"}}, Path("/work/ws"))
    >>> env.path("/usr/bin"), env.own_path, env.venv is None
    ('/opt/tools/bin:/usr/bin', True, True)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from librarian.errors import InvalidInputError

__all__ = ["PYTHON_NAMES", "TaskEnvironment", "task_environment"]

# What a task's PATH is searched for when the task names no interpreter, in this order.
PYTHON_NAMES = ("python3", "python")


@dataclass(frozen=True)
class TaskEnvironment:
    """The variables a task sets (after its virtualenv is applied) and its virtualenv.

    Attributes:
        overrides: variables laid over the sandbox's environment (``PATH`` when the task sets it or
            names a virtualenv).
        venv: the virtualenv directory, resolved; ``None`` when the task names none.
        python: the interpreter the payload names (``python``), ``None`` when it names none.
    """

    overrides: dict[str, str] = field(default_factory=dict)
    venv: Path | None = None
    python: str | None = None

    def path(self, sandbox_path: str) -> str:
        """The ``PATH`` the task runs with: its own when it set one, else the sandbox's."""
        return self.overrides.get("PATH", sandbox_path)

    @property
    def own_path(self) -> bool:
        """Whether the task chose its own ``PATH`` (directly or with a virtualenv)."""
        return "PATH" in self.overrides

    def interpreter(self, sandbox_path: str, default: str) -> str:
        """The Python that runs the task's code.

        The payload's ``python`` first; then the virtualenv's; then, when the task chose its own
        ``PATH``, the first ``python3``/``python`` on it; else ``default`` (the runtime's own).

        Raises:
            InvalidInputError: the task's environment names an interpreter that cannot be found.
        """
        if self.python is not None:
            return self._resolve(self.python, sandbox_path)
        if self.venv is not None:
            return self._resolve(str(self.venv / "bin" / "python"), sandbox_path)
        if self.own_path:
            for name in PYTHON_NAMES:
                found = shutil.which(name, path=self.path(sandbox_path))
                if found is not None:
                    return found
            raise InvalidInputError(
                "the task's PATH holds no python3 or python",
                hint="add the interpreter's directory to the task's env PATH, or set payload 'python'",
            )
        return default

    def _resolve(self, python: str, sandbox_path: str) -> str:
        found = python if "/" in python else shutil.which(python, path=self.path(sandbox_path))
        if found is None or not os.access(found, os.X_OK):
            raise InvalidInputError(
                f"the task's interpreter {python!r} was not found",
                hint="give a virtualenv that exists ('venv') or an interpreter on the task's PATH",
            )
        return found


def task_environment(payload: Mapping[str, Any], workspace: Path, sandbox_path: str = "") -> TaskEnvironment:
    """Read ``env``, ``venv`` and ``python`` from a task payload.

    Args:
        payload: the task's payload.
        workspace: the task's workspace (a relative ``venv`` is resolved against it).
        sandbox_path: the sandbox's ``PATH``, extended by a virtualenv when the task sets no ``PATH``.

    Raises:
        InvalidInputError: ``env`` is not a map of strings, ``venv`` or ``python`` is not a string, or
            ``venv`` is not a directory holding ``bin``.
    """
    env = payload.get("env")
    if env is not None and (
        not isinstance(env, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise InvalidInputError("payload field 'env' must map strings to strings")
    overrides = dict(env or {})
    venv = _venv(payload.get("venv"), workspace)
    if venv is not None:
        base = overrides.get("PATH") or sandbox_path or os.defpath
        overrides["PATH"] = os.pathsep.join([str(venv / "bin"), base])
        overrides.setdefault("VIRTUAL_ENV", str(venv))
    python = payload.get("python")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise InvalidInputError("payload field 'python' must be a non-empty string")
    return TaskEnvironment(overrides, venv, python)


def _venv(value: Any, workspace: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("payload field 'venv' must be a non-empty string (a virtualenv directory)")
    path = Path(value).expanduser()
    path = path if path.is_absolute() else workspace / path
    if not (path / "bin").is_dir():
        raise InvalidInputError(
            f"payload field 'venv': {value!r} is not a virtualenv (no {path / 'bin'} directory)",
            hint="create it with `python -m venv DIR`, or give its absolute path",
        )
    return path.resolve()
