"""Executors run one attempt of a task by ``executor_type``; see :mod:`.registry` to add a type.

Built in: ``command_executor`` (argv or script in the sandbox), ``code_executor`` (Python source in
the sandbox), ``file_writer`` (files inside the workspace only) and ``api_caller`` (HTTP, internal
addresses refused unless allow-listed).
"""

from librarian.runtime.executors.api_caller import ApiCaller, HostAllowList
from librarian.runtime.executors.code import CodeExecutor
from librarian.runtime.executors.command import CommandExecutor
from librarian.runtime.executors.file_writer import FileWriter
from librarian.runtime.executors.registry import ExecutorRegistry, build_registry, builtin_executors

__all__ = [
    "ApiCaller",
    "CodeExecutor",
    "CommandExecutor",
    "ExecutorRegistry",
    "FileWriter",
    "HostAllowList",
    "build_registry",
    "builtin_executors",
]
