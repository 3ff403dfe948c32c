"""``file_writer``: write a text file inside the workflow's workspace, and nowhere else.

Payload: ``path`` (relative to the workspace), ``content`` (text), optional ``encoding`` (default
UTF-8). Absolute paths and ``..`` components are refused outright; the resolved target must stay in the
workspace even through symbolic links (a link inside pointing outside is refused). Missing parent
directories are created. The file is written to a temporary sibling, flushed to disk and renamed over
the target, so readers never see half a file. Failures carry ``details={"operation": "write", "path"}``.

The file is then read back on this host and the result carries what was read (``bytes``, ``sha256``
and the ``text``, cut at 1 MB): the evaluator checks that evidence, since it may run on a host that
cannot see this workspace.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from pathlib import Path, PurePosixPath

from librarian.errors import InvalidInputError, LibrarianError
from librarian.runtime.contracts import ExecutionResult, TaskSpec, Workspace
from librarian.runtime.executors.base import PayloadError, failure, field, from_error, success, where
from librarian.runtime.isolation import give_to_owner

# Text of the read-back file carried in the result for the evaluator's checks (as much as a command's
# kept stdout); a bigger file is still checked whole through its SHA-256.
READ_BACK_TEXT_BYTES = 1_000_000


class PathRefusedError(InvalidInputError):
    """A file_writer path that would leave the workspace."""


class FileWriter:
    """Writes files inside a workspace."""

    executor_type: str = "file_writer"

    def execute(self, task: TaskSpec, workspace: Workspace) -> ExecutionResult:
        """Write ``content`` to ``path``; refuse any path that leaves the workspace."""
        raw_path = task.payload.get("path")
        details = {"operation": "write", "path": raw_path if isinstance(raw_path, str) else repr(raw_path)}
        try:
            path = field(task, "path", str, required=True)
            content = field(task, "content", str, required=True)
            encoding = field(task, "encoding", str) or "utf-8"
            data = _encode(task, content, encoding)
            target = resolve_inside(workspace, path)
            _write_atomically(workspace, path, target, data)
            written = target.read_bytes()
        except LibrarianError as exc:
            return from_error(exc, details=details)
        except OSError as exc:
            return failure(
                type(exc).__name__,
                f"cannot write {details['path']!r} in the workspace: {exc.strerror or exc}",
                details={**details, "errno": exc.errno},
            )
        return success(
            f"wrote {len(written):,} bytes to {path}",
            output={
                "path": path,
                "absolute_path": str(target),
                "encoding": encoding,
                "bytes": len(written),
                "sha256": hashlib.sha256(written).hexdigest(),
                "text": written[:READ_BACK_TEXT_BYTES].decode(encoding, errors="replace"),
                "text_truncated": len(written) > READ_BACK_TEXT_BYTES,
            },
        )


def resolve_inside(workspace: Workspace, path: str) -> Path:
    """The absolute target of ``path`` in ``workspace``, following existing symbolic links.

    Raises:
        PathRefusedError: an empty or absolute path, a ``..`` component, or a target (after links are
            followed) outside the workspace.
    """
    hint = "give a path relative to the workspace, without '..'"
    pure = PurePosixPath(path)
    if not path or "\0" in path or pure == PurePosixPath("."):
        raise PathRefusedError(f"file path {path!r} does not name a file", hint=hint)
    if pure.is_absolute() or path.startswith("~"):
        raise PathRefusedError(
            f"absolute path {path!r} is refused: files are written only in the workspace", hint=hint
        )
    if ".." in pure.parts:
        raise PathRefusedError(f"path {path!r} is refused: '..' could leave the workspace", hint=hint)
    root = workspace.root.resolve()
    target = (root / pure).resolve()  # follows every link that exists along the way
    if not target.is_relative_to(root) or target == root:
        raise PathRefusedError(
            f"path {path!r} is refused: it resolves to {target}, outside the workspace "
            "(through a symbolic link)",
            hint=hint,
        )
    return target


def _write_atomically(workspace: Workspace, path: str, target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` (resolved inside the workspace) through a temporary file.

    The workspace is the task's to change while this runs (another task of the workflow may run at
    once), so the walk to ``target`` goes through directory descriptors that never follow a link:
    a directory swapped for a link after the check is refused, never written through.
    """
    root = workspace.root.resolve()
    *parents, name = target.relative_to(root).parts
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parents:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=directory)
            parent = directory
            try:
                directory = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PathRefusedError(f"path {path!r} changed while it was being written") from exc
                raise
            finally:
                os.close(parent)
            give_to_owner(directory, workspace.owner)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISDIR(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode):
                raise IsADirectoryError(21, "it is a directory", str(target))
        temporary = f".{name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(temporary, flags, 0o600, dir_fd=directory)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
                give_to_owner(handle.fileno(), workspace.owner)
            os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=directory)
            raise
    finally:
        os.close(directory)


def _encode(task: TaskSpec, content: str, encoding: str) -> bytes:
    try:
        return content.encode(encoding)
    except LookupError as exc:
        raise PayloadError(f"{where(task)}: unknown encoding {encoding!r}") from exc
    except UnicodeEncodeError as exc:
        raise PayloadError(
            f"{where(task)}: the content cannot be encoded as {encoding}: {exc.reason}"
        ) from exc
