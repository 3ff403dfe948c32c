"""Calling an indexed CLI command, and the sandbox runs that tool calls share.

Tool calls run through the runtime's :class:`~librarian.runtime.sandbox.EnvironmentManager`: no
shell (``argv`` goes to ``execve`` as it is), an environment rebuilt from a short allow-list (no
credentials of this process), ``HOME`` and the working directory a fresh directory removed after the
call, memory, CPU, file and output limits set before the program starts, its own session whose
whole process group is killed at ``tools_call_timeout_seconds``.

A CLI command runs without the namespaces of workflow tasks: CLI tools are called to act on this
machine (``git init /srv/repo``), so they see its file system as the server's user does; only an
administrator's approval lets an imported command be called. Python plugins are isolated as
workflow tasks are (:mod:`librarian.discovery.callers.python`).
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from librarian.config import Settings
from librarian.discovery.calling import CallResult, ToolCallError
from librarian.errors import InvalidInputError
from librarian.runtime.isolation import NamespaceSandbox
from librarian.runtime.sandbox import EnvironmentManager, ProcessOutcome, SandboxLimits

__all__ = ["MAX_OUTPUT_BYTES", "call_cli_command", "command_argv", "run_sandboxed"]

MAX_OUTPUT_BYTES = 1_000_000
STDERR_TAIL_CHARS = 1500
_SYSTEM_BIN = "/usr/bin:/bin:/usr/sbin:/sbin"


def call_cli_command(binding: Mapping[str, Any], arguments: dict[str, Any], settings: Settings) -> CallResult:
    """Run the command of ``binding`` with ``arguments`` (``args`` and options); its output.

    Returns:
        ``content`` ``{"exit_code", "stdout", "stderr"}``, ``text`` the standard output.

    Raises:
        ToolCallError: a non-zero exit (with the code and the end of stderr), a timeout, or a
            program that cannot be started.
    """
    argv = command_argv(binding, arguments)
    shown = " ".join(str(word) for word in binding.get("argv") or [])
    path = binding.get("path")
    outcome = run_sandboxed(
        argv,
        settings,
        output_bytes=MAX_OUTPUT_BYTES,
        path=path if isinstance(path, str) and path else None,
    )
    if outcome.timed_out:
        raise ToolCallError(
            f"{shown} did not finish within {outcome.timeout_seconds}s and was stopped",
            hint="raise tools_call_timeout_seconds if the command needs longer",
        )
    if outcome.exit_code != 0:
        how = f"was killed by {outcome.signal_name}" if outcome.signal_name else f"exited {outcome.exit_code}"
        tail = outcome.stderr.strip()[-STDERR_TAIL_CHARS:]
        # An exit status usually refuses the arguments; a signal means the command itself broke.
        raise ToolCallError(
            f"{shown} {how}" + (f": {tail}" if tail else ""), tool_fault=bool(outcome.signal_name)
        )
    return CallResult(
        content={"exit_code": outcome.exit_code, "stdout": outcome.stdout, "stderr": outcome.stderr},
        text=outcome.stdout,
    )


def command_argv(binding: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """The command words, then the options given (``--name=value``, ``-n value``, ``--flag``), then ``args``.

    Example:
        >>> command_argv({"argv": ["git", "init"], "options": {"--quiet": "flag", "-b": "value"}},
        ...              {"--quiet": True, "-b": "main", "args": ["repo"]})
        ['git', 'init', '--quiet', '-b', 'main', 'repo']

    Options reach the command only by their documented names: a value or an ``args`` item that
    starts with ``-`` is refused, since the command would read it as an option the tool never
    declared (``git clone --upload-pack=...`` runs a program).

    Raises:
        ToolCallError: the binding has no command, or an argument the command does not document.
        InvalidInputError: an option's value or an ``args`` item that looks like an option.
    """
    words = binding.get("argv")
    if not isinstance(words, list) or not words or not all(isinstance(word, str) for word in words):
        raise ToolCallError("the tool's binding has no command (argv)", hint="import it again")
    kinds = binding.get("options") or {}
    argv = list(words)
    for name, value in arguments.items():
        if name == "args" or value is None or value is False:
            continue
        kind = kinds.get(name)
        if kind is None:
            raise ToolCallError(f"{' '.join(words)}: no option {name!r}", hint="pass it in 'args' instead")
        if kind == "flag":
            argv.append(name)
        else:
            text = value if isinstance(value, str) else str(value)
            _not_an_option(f"argument {name}", text)
            argv += [f"{name}={text}"] if name.startswith("--") else [name, text]
    args = arguments.get("args") or []
    if not isinstance(args, list):
        raise ToolCallError(f"{' '.join(words)}: 'args' must be a list of strings")
    items = [item if isinstance(item, str) else str(item) for item in args]
    for position, item in enumerate(items):
        _not_an_option(f"args[{position}]", item)
    return argv + items


def _not_an_option(where: str, text: str) -> None:
    if text.startswith("-"):
        raise InvalidInputError(
            f"{where}: {text[:80]!r} starts with '-': only the options the command documents are passed, "
            "each by its own name",
            hint='give options as arguments named after them (e.g. {"--quiet": true})',
        )


def run_sandboxed(
    argv: Sequence[str],
    settings: Settings,
    *,
    isolated: bool = False,
    read_only: Sequence[Path] = (),
    network: bool = False,
    stdin: str | None = None,
    output_bytes: int | None = None,
    path: str | None = None,
) -> ProcessOutcome:
    """Run ``argv`` once in a fresh directory under the runtime's limits; the directory is removed after.

    Args:
        argv: the program and its arguments (no shell).
        settings: the time limit is ``tools_call_timeout_seconds``; memory, processes and output
            follow the ``runtime_task_*`` settings.
        isolated: run in the workflow tasks' namespaces (when ``runtime_sandbox_isolation`` is
            ``namespaces``), seeing only the system, the interpreter's prefix and ``read_only``.
        read_only: directories an isolated run sees read-only (a plugin's modules).
        network: an isolated run asks for the network (``runtime_sandbox_network`` decides).
        stdin: the program's standard input.
        output_bytes: stdout and stderr kept each (default ``runtime_task_output_bytes``).
        path: the ``PATH`` of the run (default: the interpreter's ``bin`` directory, then this one's).

    Raises:
        LibrarianError: the program cannot be found or started, or namespaces are configured but the
            machine cannot create them (the caller reports it as the tool's failure).
    """
    isolation = None
    if isolated and settings.runtime_sandbox_isolation == "namespaces":
        hidden = [settings.home, *([settings.config_file] if settings.config_file else [])]
        isolation = NamespaceSandbox.create(
            hidden=hidden, read_only=[*settings.runtime_sandbox_read_only_paths, *read_only]
        )
    limits = SandboxLimits(
        timeout_seconds=settings.tools_call_timeout_seconds,
        memory_mb=settings.runtime_task_memory_mb,
        output_bytes=settings.runtime_task_output_bytes if output_bytes is None else output_bytes,
        processes=settings.runtime_task_processes,
    )
    # One program per call: prlimit (or the Python wrapper) rather than a fork server kept running.
    use_prlimit = settings.runtime_sandbox_launcher != "python" and shutil.which("prlimit", path=_SYSTEM_BIN)
    manager = EnvironmentManager(
        settings.home / "tool-calls",
        limits=limits,
        path=path,
        launcher="prlimit" if use_prlimit else "python",
        isolation=isolation,
        network=settings.runtime_sandbox_network,
    )
    workspace = manager.workspace_for(f"call-{secrets.token_hex(8)}")
    try:
        return manager.run(argv, workspace, stdin=stdin, network=network)
    finally:
        shutil.rmtree(workspace.root, ignore_errors=True)
