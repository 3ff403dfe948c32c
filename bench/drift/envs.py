"""The pinned environments drift cases run in: one virtualenv or npm prefix per set of pins, cached.

``pip``: ``python3.11 -m venv DIR`` then ``DIR/bin/pip install PINS``; the task's ``PATH`` starts with
``DIR/bin``. ``npm``: ``npm install --prefix DIR PINS``; ``PATH`` starts with ``DIR/node_modules/.bin``
and the directory of ``node``. Environments are built once per set of pins under the cache directory
and reused; a half-built one (no marker file) is built again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BuiltEnvironment", "default_cache", "ensure_environment"]

_MARKER = ".librarian-drift-ready"
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class BuiltEnvironment:
    """A ready environment: its directory and the ``PATH`` a task runs with."""

    directory: Path
    path: str
    manager: str


def default_cache() -> Path:
    """``$LIBRARIAN_DRIFT_ENVS``, else ``~/.cache/librarian/drift-envs``."""
    configured = os.environ.get("LIBRARIAN_DRIFT_ENVS")
    return Path(configured) if configured else Path.home() / ".cache" / "librarian" / "drift-envs"


def ensure_environment(manager: str, pins: list[str], cache: Path) -> BuiltEnvironment:
    """The environment with exactly ``pins`` installed, built now when it is not cached.

    Raises:
        RuntimeError: the installation failed (its output is in the message).
    """
    key = hashlib.sha256("\n".join([manager, *sorted(pins)]).encode()).hexdigest()[:16]
    directory = cache / f"{manager}-{key}"
    if not (directory / _MARKER).exists():
        if directory.exists():
            shutil.rmtree(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        (_build_pip if manager == "pip" else _build_npm)(directory, pins)
        (directory / _MARKER).write_text("\n".join(pins) + "\n", encoding="utf-8")
    return BuiltEnvironment(directory, _path(manager, directory), manager)


def _path(manager: str, directory: Path) -> str:
    if manager == "pip":
        return f"{directory / 'bin'}:{_SYSTEM_PATH}"
    node = shutil.which("node")
    node_dir = str(Path(node).parent) if node else ""
    return ":".join(p for p in (str(directory / "node_modules" / ".bin"), node_dir, _SYSTEM_PATH) if p)


def _build_pip(directory: Path, pins: list[str]) -> None:
    python = shutil.which("python3.11") or sys.executable
    _run([python, "-m", "venv", str(directory)])
    _run(
        [
            str(directory / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *pins,
        ]
    )


def _build_npm(directory: Path, pins: list[str]) -> None:
    directory.mkdir(parents=True)
    _run(["npm", "install", "--prefix", str(directory), "--no-audit", "--no-fund", "--silent", *pins])


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(argv)}` failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
