"""Watching a started program: its output pipes, its exit, its timeout, and the end of its process group.

:class:`~librarian.runtime.sandbox.EnvironmentManager` starts a program with one of its launchers and
hands it here: :func:`collect` drains stdout and stderr (keeping the first bytes of each), enforces the
wall-clock deadline, kills whatever the program left running in its group, and reaps it. Exits are
noticed through a pidfd (Linux 5.3+) or the fork server's report rather than by polling.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Protocol

from librarian.errors import BackendUnavailableError
from librarian.runtime.forkserver import kill_group

__all__ = ["Capture", "LocalProgram", "Program", "collect", "devnull", "output_pipes", "stdin_file"]

_READ_CHUNK = 65536
# After the main process has exited, how long its output pipes may stay open (held by a child that
# escaped the process group with its own setsid) before they are abandoned.
_PIPE_GRACE_SECONDS = 2.0


class Program(Protocol):
    """A started program, whichever launcher started it: its process group can be killed as a whole."""

    pid: int

    @property
    def exit_fd(self) -> int | None:
        """A descriptor readable once the program has exited, or ``None`` (then exits are polled)."""

    def has_exited(self) -> bool:
        """Whether the program has exited; its group id stays its own until :meth:`wait`."""

    def kill(self) -> None:
        """SIGKILL the program's process group."""

    def wait(self) -> int:
        """Reap the program; its exit code (``-N``: killed by signal N)."""

    def close(self) -> None:
        """Release what watching the program took (call after :meth:`wait`)."""


class LocalProgram:
    """A program this process started itself (the ``prlimit`` and ``python`` launchers)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.pid = process.pid  # also its process group's id
        self._pidfd = _open_pidfd(process.pid)

    @property
    def exit_fd(self) -> int | None:
        return self._pidfd

    def has_exited(self) -> bool:
        # WNOWAIT: the leader stays a zombie, so its pid (the group id) cannot be reused meanwhile.
        return _has_exited(self.pid)

    def kill(self) -> None:
        kill_group(self.pid)

    def wait(self) -> int:
        return self.process.wait()

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class Capture:
    """Keeps the first ``limit`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    def text(self) -> tuple[str, bool]:
        """The kept bytes as text, ending with a note when some were cut; and whether they were."""
        # NUL cannot be stored in PostgreSQL text or jsonb (`find -print0`, binary output).
        text = self.kept.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        if self.total <= self.limit:
            return text, False
        return f"{text}\n[output cut: kept the first {self.limit:,} of {self.total:,} bytes]\n", True


def collect(
    program: Program,
    stdout: int,
    stderr: int,
    *,
    output_bytes: int,
    deadline: float,
    forget: Callable[[Program], None],
) -> tuple[Capture, Capture, bool, int]:
    """Drain both pipes, enforce the timeout, kill what the program left running, reap it.

    Args:
        program: the started program.
        stdout, stderr: the read ends of its output pipes (closed here).
        output_bytes: bytes of each stream kept.
        deadline: ``time.monotonic()`` at which the program is killed.
        forget: called just before the program is reaped (from then on its pid may be reused).

    Returns both captures, whether the timeout struck, and the exit code. The program's group is
    killed before it is reaped, so its id cannot have been reused by then.
    """
    out, err = Capture(output_bytes), Capture(output_bytes)
    captures = {stdout: out, stderr: err}
    timed_out = exited = False
    pipe_deadline = math.inf
    # ``poll`` rather than a ``selectors`` epoll: no descriptor to create and close for every run.
    poller = select.poll()
    open_pipes = {stdout, stderr}
    exit_fd = program.exit_fd
    try:
        for fd in open_pipes:
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        if exit_fd is not None:
            # Readable once the program exits: the poll below wakes at once instead of polling.
            poller.register(exit_fd, select.POLLIN)
        while open_pipes:
            now = time.monotonic()
            if not timed_out and now >= deadline:
                timed_out = True
                program.kill()
            if not exited and program.has_exited():
                exited = True
                program.kill()  # background children holding the pipes open
                pipe_deadline = now + _PIPE_GRACE_SECONDS
                if exit_fd is not None:
                    poller.unregister(exit_fd)  # stays readable: it would spin the loop
            if now >= pipe_deadline:
                break  # a child that left the group with its own setsid keeps them open: abandon it
            for fd, _ in poller.poll(1000 * min(0.1, max(0.01, deadline - now))):
                if fd == exit_fd or fd not in open_pipes:
                    continue  # the exit is handled at the top of the loop
                try:
                    data = os.read(fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if data:
                    captures[fd].add(data)
                else:  # end of file (a pipe whose writers are gone reports POLLHUP)
                    poller.unregister(fd)
                    open_pipes.discard(fd)
        # The pipes are closed, but the program may run on without them until the deadline. (Pipes
        # usually close a moment before the exit can be waited for, so this is reached every time.)
        pause = 0.0005
        while not program.has_exited():
            now = time.monotonic()
            if not timed_out and now >= deadline:
                timed_out = True
                program.kill()
            wait = max(0.0, deadline - now) if not timed_out else 0.02
            if exit_fd is not None:
                # The pipes are unregistered by now: this waits on the exit alone (``poll``, not
                # ``select``, which cannot watch a descriptor numbered 1024 or above).
                poller.poll(1000 * min(wait, 1.0))
            else:
                time.sleep(min(pause, wait or pause))
                pause = min(pause * 2, 0.02)
    finally:
        program.kill()
        forget(program)  # before reaping: from then on the pid may be reused
        exit_code = program.wait()
        program.close()
        os.close(stdout)
        os.close(stderr)
    return out, err, timed_out, exit_code


def output_pipes(program: str) -> tuple[int, int, int, int]:
    """Two pipes for stdout and stderr: read and write end of each, nothing left open on failure."""
    ends: list[int] = []
    try:
        for _ in range(2):
            ends.extend(os.pipe())
    except OSError as exc:  # out of descriptors: the machine, not the task
        for end in ends:
            os.close(end)
        raise BackendUnavailableError(f"the sandbox cannot start {program!r}: {exc}") from exc
    return ends[0], ends[1], ends[2], ends[3]


_DEVNULL: int | None = None
_DEVNULL_LOCK = threading.Lock()


def devnull() -> int:
    """A descriptor of ``/dev/null`` for programs given no input (opened once per process)."""
    global _DEVNULL
    with _DEVNULL_LOCK:
        if _DEVNULL is None:
            _DEVNULL = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        return _DEVNULL


def _open_pidfd(pid: int) -> int | None:
    """A pidfd of ``pid`` (readable once it exits), or ``None`` where the kernel has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, a kernel before 5.3, or seccomp forbids it
        return None


def _has_exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (``WNOWAIT``)."""
    try:
        result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return result is not None


@contextlib.contextmanager
def stdin_file(data: str | bytes | None) -> Iterator[IO[bytes] | None]:
    """Standard input as an unnamed temporary file, so a large input never blocks on a pipe."""
    if data is None:
        yield None
        return
    with tempfile.TemporaryFile() as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        handle.seek(0)
        yield handle
