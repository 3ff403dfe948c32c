"""Which package installed a program, read from the package manager's own files.

Many programs print no version at all (``ajv --version`` is an error), yet the package manager
that installed them recorded it. npm links ``node_modules/.bin/TOOL`` to a file inside the package
whose ``package.json`` lists that file under ``bin``; that manifest names the package and its
version. Both the help walker (to file the docs under the right version) and the runtime's version
probe (to research the docs of the version a task runs) ask here when the program itself is silent.

Example:
    >>> package_of_program("/no/such/program") is None
    True
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["InstalledPackage", "package_of_program"]

# How far above the program's file its package.json may be (``pkg/dist/bin/cli.js`` is three).
_MAX_LEVELS = 6
# A manifest larger than this is no package.json a tool ships; it is not read.
_MAX_MANIFEST_BYTES = 1024 * 1024


@dataclass(frozen=True)
class InstalledPackage:
    """``InstalledPackage("ajv-cli", "5.0.0", "npm")``: the package a program came from."""

    name: str
    version: str
    manager: str


def package_of_program(executable: str | os.PathLike[str]) -> InstalledPackage | None:
    """The package whose manifest declares ``executable`` (after following links), or ``None``.

    Only a manifest that lists the very file as one of its programs counts: a ``package.json`` met on
    the way up that does not (a nested build folder's, a workspace root's) is passed over.
    """
    try:
        target = Path(os.path.realpath(executable))
    except (OSError, ValueError):
        return None
    if not target.is_file():
        return None
    folder = target.parent
    for _ in range(_MAX_LEVELS):
        package = _npm_manifest_declaring(folder, target)
        if package is not None:
            return package
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def _npm_manifest_declaring(folder: Path, target: Path) -> InstalledPackage | None:
    manifest = folder / "package.json"
    try:
        if not manifest.is_file() or manifest.stat().st_size > _MAX_MANIFEST_BYTES:
            return None
        document = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    name, version, bins = document.get("name"), document.get("version"), document.get("bin")
    if not isinstance(name, str) or not isinstance(version, str) or not version:
        return None
    # "bin": "cli.js" installs a program named after the package; {"tool": "cli.js"} names each.
    declared = [bins] if isinstance(bins, str) else list(bins.values()) if isinstance(bins, dict) else []
    for relative in declared:
        if isinstance(relative, str) and Path(os.path.realpath(folder / relative)) == target:
            return InstalledPackage(name, version, "npm")
    return None
