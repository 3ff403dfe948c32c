"""A local file or folder."""

from __future__ import annotations

import os
from pathlib import Path

from librarian.errors import NotFoundError
from librarian.ingest.parsers.registry import SUPPORTED_EXTENSIONS
from librarian.ingest.sources.base import SourceFile, SourceListing, SourceProblem

# Folders that hold tooling state rather than documentation.
SKIPPED_DIRECTORIES = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox"})


def list_local(root: Path, url_prefix: str | None = None) -> SourceListing:
    """List the supported files under ``root`` (or ``root`` itself when it is a file).

    Symbolic links to files are followed only when they stay inside ``root``; linked folders are not
    entered (one inside ``root`` is read at its real place). A link pointing outside, to a file or a
    folder, is reported, never read. Unsupported extensions are skipped silently (a docs folder
    holds images and styles).

    Args:
        root: the folder or file to ingest.
        url_prefix: base of each file's ``source_url``; defaults to the ``file://`` URL of ``root``.

    Raises:
        NotFoundError: ``root`` does not exist.
    """
    if not root.exists() and not root.is_symlink():
        raise NotFoundError(f"{root} does not exist", hint="pass an existing file or folder")
    real_root = root.resolve()
    if real_root.is_file():
        prefix = url_prefix or real_root.parent.as_uri()
        return SourceListing(
            root=real_root.parent,
            files=[SourceFile(real_root.name, real_root, f"{prefix}/{real_root.name}")],
            problems=[],
        )
    prefix = (url_prefix or real_root.as_uri()).rstrip("/")
    files: list[SourceFile] = []
    problems: list[SourceProblem] = []

    def on_error(error: OSError) -> None:
        where = _relative(Path(error.filename or real_root), real_root)
        problems.append(SourceProblem(where or ".", f"cannot list folder: {error.strerror or error}"))

    for directory, subdirectories, names in os.walk(real_root, onerror=on_error, followlinks=False):
        subdirectories[:] = sorted(d for d in subdirectories if d not in SKIPPED_DIRECTORIES)
        for name in subdirectories:
            # os.walk does not enter linked folders. One inside the root is read at its real place;
            # one outside is never read, and the listing says so.
            linked = Path(directory) / name
            if linked.is_symlink() and not linked.resolve().is_relative_to(real_root):
                target = linked.resolve()
                why = f"symbolic link to a folder outside the source root (to {target}): not read"
                problems.append(SourceProblem(_relative(linked, real_root), why))
        for name in sorted(names):
            candidate = Path(directory) / name
            if candidate.suffix.lower() not in SUPPORTED_EXTENSIONS:
                continue
            relative = _relative(candidate, real_root)
            if candidate.is_symlink():
                target = candidate.resolve()
                if not target.is_relative_to(real_root):
                    problems.append(
                        SourceProblem(relative, f"symbolic link points outside the source root (to {target})")
                    )
                    continue
                if not target.is_file():
                    problems.append(SourceProblem(relative, "symbolic link is broken or not a regular file"))
                    continue
            elif not candidate.is_file():
                # FIFOs and devices would block or stream forever when read.
                problems.append(SourceProblem(relative, "not a regular file (pipe, socket or device)"))
                continue
            files.append(SourceFile(relative, candidate, f"{prefix}/{relative}"))
    return SourceListing(root=real_root, files=files, problems=problems)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
