"""Which version of a tool a workflow's sandbox actually runs, for the self-correcting loop.

Documentation is searched for the version that is installed, not the newest one, so a failing
``aws`` call is corrected with the ``aws`` manual of the right release. The probe runs inside the
sandbox with the *task's* environment (its ``env``, its ``PATH``, its virtualenv: a task that runs a
tool from its own virtualenv is probed there, not in the runtime's) and tries, in order:
``TOOL --version``, ``TOOL version``, and, for a Python distribution,
``importlib.metadata.version(TOOL)`` (or the distribution whose console script is ``TOOL``) in the
task's own interpreter. A program that prints no version at all (many npm tools) is read from the
package that installed it (:func:`librarian.installed.package_of_program`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass

from librarian.errors import InvalidInputError
from librarian.installed import package_of_program
from librarian.runtime.contracts import Workspace
from librarian.runtime.sandbox import EnvironmentManager
from librarian.runtime.task_env import TaskEnvironment

# A dotted version not glued to a preceding word or number: ``1.45.11``, ``v20.1.0``, ``9.6p1``,
# ``2.0.0-rc1``; ``Python/3.11`` later on the line is not reached because the first match wins.
_VERSION = re.compile(r"(?<![A-Za-z0-9.])v?(?P<version>\d+(?:\.\d+)+(?:[-+]?[A-Za-z]+\d*(?:\.\d+)*)?)")
# The distribution named TOOL, else the one that installs a console script called TOOL.
_METADATA = """
import importlib.metadata as m, sys
name = sys.argv[1]
try:
    print(m.version(name))
except m.PackageNotFoundError:
    found = [ep.dist for ep in m.entry_points(group="console_scripts") if ep.name == name and ep.dist]
    if not found:
        raise
    print(found[0].metadata["Name"], found[0].version)
"""
_RAW_LIMIT = 2000


@dataclass(frozen=True)
class ToolVersion:
    """A detected version: ``ToolVersion("aws", "1.45.11", "aws-cli/1.45.11 Python/3.11 ...")``."""

    tool: str
    version: str
    raw: str


def parse_version(text: str) -> str | None:
    """The first version number in a ``--version`` answer, or None.

    >>> parse_version("aws-cli/1.45.11 Python/3.11.9 Linux/6.8 botocore/1.37.11")
    '1.45.11'
    >>> parse_version("git version 2.43.0")
    '2.43.0'
    >>> parse_version("pip 24.0 from /usr/lib/python3/dist-packages/pip (python 3.11)")
    '24.0'
    """
    match = _VERSION.search(text)
    return match["version"] if match else None


def detect_version(
    tool: str,
    env: EnvironmentManager,
    workspace: Workspace,
    *,
    timeout_seconds: float = 30.0,
    task_env: TaskEnvironment | None = None,
) -> ToolVersion | None:
    """Ask the sandbox which version of ``tool`` it has.

    Args:
        tool: a program name (``git``, ``aws``), or a command prefix split like a shell would
            (``"python -m pip"``); a bare name is also tried as a Python distribution.
        env: the Environment Manager whose sandbox is asked.
        workspace: where the probe runs.
        timeout_seconds: limit of each attempt.
        task_env: the environment of the task whose tool is probed (its ``PATH``, virtualenv and
            interpreter); ``None`` probes the sandbox's defaults.

    Returns:
        The tool, its version and the raw output it was read from; None when no attempt printed a
        version (the tool is missing or says nothing useful).

    Raises:
        InvalidInputError: ``tool`` is empty or has unbalanced quotes.
    """
    try:
        prefix = shlex.split(tool)
    except ValueError as exc:
        raise InvalidInputError(f"cannot split the tool command {tool!r}: {exc}") from exc
    if not prefix:
        raise InvalidInputError("the tool to probe is empty", hint="e.g. 'git' or 'python -m pip'")
    own = task_env or TaskEnvironment()
    attempts = [[*prefix, "--version"], [*prefix, "version"]]
    if len(prefix) == 1 and "/" not in tool:
        try:
            python = own.interpreter(env.path, sys.executable)
        except InvalidInputError:
            python = None
        if python is not None:
            attempts.append([python, "-I", "-c", _METADATA, tool])
    for argv in attempts:
        try:
            outcome = env.run(argv, workspace, timeout_seconds=timeout_seconds, env_overrides=own.overrides)
        except InvalidInputError:  # the program does not exist: the next attempt may still work
            continue
        if outcome.exit_code != 0 or outcome.timed_out:
            continue
        raw = (outcome.stdout.strip() + "\n" + outcome.stderr.strip()).strip()
        version = parse_version(raw)
        if version is not None:
            return ToolVersion(tool=tool, version=version, raw=raw[:_RAW_LIMIT])
    return _from_installing_package(tool, own.path(env.path)) if len(prefix) == 1 else None


def _from_installing_package(tool: str, search_path: str) -> ToolVersion | None:
    """The version the package manager recorded for the program ``tool`` names on ``search_path``."""
    if os.path.isabs(tool):
        program: str | None = tool
    elif "/" in tool:  # relative to a workspace the probe does not resolve against: not guessed
        return None
    else:
        program = shutil.which(tool, path=search_path)
    package = package_of_program(program) if program else None
    if package is None:
        return None
    return ToolVersion(tool=tool, version=package.version, raw=f"{package.name} {package.version}")
