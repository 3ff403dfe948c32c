"""One registration interface for executors: built-in and new executor types alike.

A worker builds one registry (:func:`build_registry`) and looks executors up by a task's
``executor_type``. A new type is any object with an ``executor_type`` string and an
``execute(task, workspace)`` method (the :class:`~librarian.runtime.contracts.Executor` protocol)::

    registry = build_registry(settings)
    registry.register_executor(MyExecutor())
    result = registry.get_executor(task.executor_type).execute(task, workspace)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from librarian.config import Settings
from librarian.errors import ConflictError, InvalidInputError
from librarian.runtime.contracts import Executor
from librarian.runtime.executors.api_caller import ApiCaller
from librarian.runtime.executors.code import CodeExecutor
from librarian.runtime.executors.command import CommandExecutor
from librarian.runtime.executors.file_writer import FileWriter
from librarian.runtime.sandbox import EnvironmentManager

_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class ExecutorRegistry:
    """Executors by ``executor_type``."""

    def __init__(self, executors: Iterable[Executor] = ()) -> None:
        self._executors: dict[str, Executor] = {}
        for executor in executors:
            self.register_executor(executor)

    def register_executor(self, executor: Executor, *, replace: bool = False) -> None:
        """Make ``executor`` run the tasks of its ``executor_type``.

        Args:
            executor: the executor; its ``executor_type`` is lower-case letters, digits and ``_``.
            replace: allow replacing an executor already registered for that type.

        Raises:
            InvalidInputError: the type name is not valid.
            ConflictError: the type is registered already and ``replace`` is false.
        """
        name = getattr(executor, "executor_type", None)
        if not isinstance(name, str) or not _TYPE_NAME.fullmatch(name):
            raise InvalidInputError(
                f"executor type {name!r} of {type(executor).__name__} is not valid",
                hint="use lower-case letters, digits and '_', starting with a letter",
            )
        if name in self._executors and not replace:
            raise ConflictError(
                f"executor type {name!r} is already registered ({type(self._executors[name]).__name__})",
                hint="pass replace=True to swap it",
            )
        self._executors[name] = executor

    def get_executor(self, executor_type: str) -> Executor:
        """The executor of ``executor_type``.

        Raises:
            InvalidInputError: no executor is registered for that type (the message names it and lists
                the known types).
        """
        try:
            return self._executors[executor_type]
        except KeyError:
            known = ", ".join(self.executor_types()) or "none"
            raise InvalidInputError(
                f"unknown executor type {executor_type!r}", hint=f"registered types: {known}"
            ) from None

    def executor_types(self) -> tuple[str, ...]:
        """The registered types, sorted."""
        return tuple(sorted(self._executors))

    def __contains__(self, executor_type: object) -> bool:
        return executor_type in self._executors


def builtin_executors(
    environment: EnvironmentManager, *, allowed_hosts: Iterable[str] = (), api_timeout_seconds: float = 30.0
) -> list[Executor]:
    """The four built-in executors: command, code, file writer and API caller."""
    return [
        CommandExecutor(environment),
        CodeExecutor(environment),
        FileWriter(),
        ApiCaller(
            allowed_hosts=tuple(allowed_hosts),
            timeout_seconds=api_timeout_seconds,
            max_body_bytes=environment.limits.output_bytes,
        ),
    ]


def build_registry(settings: Settings, *, environment: EnvironmentManager | None = None) -> ExecutorRegistry:
    """A registry of the built-in executors configured from ``settings``.

    Args:
        settings: limits (``runtime_task_*``), workspace root (``home``) and
            ``allowed_private_hosts`` for the API caller.
        environment: an Environment Manager to share; default: one built from ``settings``.
    """
    environment = environment or EnvironmentManager.from_settings(settings)
    registry = ExecutorRegistry(builtin_executors(environment, allowed_hosts=settings.allowed_private_hosts))
    # Registered tools and verbs (the discovery registry of the same store).
    from librarian.discovery.workflow_tasks import ToolCallExecutor, VerbExecutor

    registry.register_executor(ToolCallExecutor(settings))
    registry.register_executor(VerbExecutor(settings))
    return registry
