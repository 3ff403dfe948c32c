"""Version detection for the loop: the runtime's version probe, remembered for a short while.

Probing runs the tool (``TOOL --version``), which for an interpreted CLI costs most of a second; a
worker that corrects many failures of one tool would pay it every time. So a probe is remembered for
``ttl_seconds`` under the tool's command prefix, the program file it resolves to on the sandbox's
``PATH`` and that file's size and modification time: reinstalling or replacing the program changes
the key, and the time limit bounds how long an upgrade that leaves the launcher untouched (a module
run by an interpreter) can go unnoticed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from librarian.runtime.contracts import Workspace
from librarian.runtime.sandbox import EnvironmentManager
from librarian.runtime.task_env import TaskEnvironment
from librarian.runtime.version_probe import ToolVersion, detect_version

__all__ = ["VersionCache"]

_Key = tuple[tuple[str, ...], str, int, int, str]


class VersionCache:
    """Detects tool versions in the sandbox and remembers them (see the module docs).

    Args:
        environment: the Environment Manager whose sandbox is asked.
        ttl_seconds: how long a probe is reused; 0 probes every time.
        timeout_seconds: limit of one probe.
    """

    def __init__(
        self, environment: EnvironmentManager, *, ttl_seconds: float = 300.0, timeout_seconds: float = 30.0
    ) -> None:
        self.environment = environment
        self.ttl_seconds = ttl_seconds
        self.timeout_seconds = timeout_seconds
        self._known: dict[_Key, tuple[float, ToolVersion | None]] = {}
        self._lock = threading.Lock()

    def detect(
        self, program: Sequence[str], workspace: Workspace, task_env: TaskEnvironment | None = None
    ) -> tuple[ToolVersion | None, bool]:
        """The version of the tool ``program`` runs in the task's environment, and whether it was cached.

        Programs inside the workspace (scripts the workflow wrote) are never probed: they are not
        installed tools, and one that ignores its arguments would repeat its side effects.
        """
        if program and "/" in program[0] and _inside(program[0], workspace.root):
            return None, False
        own = task_env or TaskEnvironment()
        key = self._key(program, workspace, own)
        now = time.monotonic()
        if key is not None and self.ttl_seconds > 0:
            with self._lock:
                cached = self._known.get(key)
            if cached is not None and now - cached[0] < self.ttl_seconds:
                return cached[1], True
        found = detect_version(
            shlex.join(program),
            self.environment,
            workspace,
            timeout_seconds=self.timeout_seconds,
            task_env=own,
        )
        if key is not None:
            with self._lock:
                self._known[key] = (now, found)
        return found, False

    def _key(self, program: Sequence[str], workspace: Workspace, task_env: TaskEnvironment) -> _Key | None:
        if not program:
            return None
        first = program[0]
        path = task_env.path(self.environment.path)
        if "/" in first:
            resolved: str | None = first if first.startswith("/") else str(workspace.root / first)
        else:
            resolved = shutil.which(first, path=path)
        if resolved is None:
            return None
        try:
            status = os.stat(resolved)
        except OSError:
            return None
        return (tuple(program), os.path.realpath(resolved), status.st_size, status.st_mtime_ns, path)


def _inside(program: str, root: Path) -> bool:
    path = Path(program) if program.startswith("/") else root / program
    try:
        return path.resolve().is_relative_to(root.resolve())
    except OSError:
        return True  # cannot tell: do not run it
