"""What every source yields: files to ingest, and problems met while listing them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourceFile:
    """A file to ingest. ``path`` is relative to the source root, with ``/`` separators."""

    path: str
    absolute_path: Path
    url: str


@dataclass(frozen=True)
class SourceProblem:
    """A file (or the source itself) that could not be listed or read, and why."""

    path: str
    reason: str


@dataclass
class SourceListing:
    """Everything a source yields for one ingest run.

    ``revision`` identifies the listed state when the source knows one (a git commit), so an unchanged
    repository can be skipped without reading a file.
    """

    root: Path
    files: list[SourceFile]
    problems: list[SourceProblem]
    revision: str | None = None
