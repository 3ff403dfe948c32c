"""What one sandboxed run may use and what it produced, and the checks of a run's request.

:class:`SandboxLimits` and :class:`ProcessOutcome` are the Environment Manager's
(:mod:`librarian.runtime.sandbox`) vocabulary; the checks here refuse a bad request (an empty argv, a
NUL byte, a limit that makes no sense) before anything starts.
"""

from __future__ import annotations

import errno
import math
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass

from librarian.errors import InvalidInputError

__all__ = ["ProcessOutcome", "SandboxLimits", "check_limits", "checked_argv", "not_executed"]

# Read once: ``os.cpu_count`` reads a file under /sys on every call, and every run needs it.
_CPUS = os.cpu_count() or 1


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one run.

    Attributes:
        timeout_seconds: wall-clock limit; the process group is killed when it passes.
        memory_mb: memory each process may write (``RLIMIT_DATA``: heap and private mappings), in
            MiB. Not ``RLIMIT_AS``: JIT runtimes reserve far more address space than they use (V8 in
            Deno reserves over 64 GiB up front and, refused, aborts with exit code 0).
        output_bytes: bytes of stdout, and separately of stderr, that are kept.
        open_files: ``RLIMIT_NOFILE``.
        file_bytes: largest file a task may write (``RLIMIT_FSIZE``).
        processes: processes (and threads) a task may have at once; enforced only when tasks are
            isolated (:mod:`librarian.runtime.isolation`), where each run's processes are counted apart.
    """

    timeout_seconds: float = 300.0
    memory_mb: int = 2048
    output_bytes: int = 1_000_000
    open_files: int = 1024
    file_bytes: int = 4 * 1024**3
    processes: int = 512

    @property
    def cpu_seconds(self) -> int:
        """``RLIMIT_CPU``: a backstop behind the wall-clock timeout that still lets every core work."""
        return math.ceil(self.timeout_seconds) * _CPUS + 1


@dataclass(frozen=True)
class ProcessOutcome:
    """What one run produced.

    ``exit_code`` is negative when the process was killed by a signal (``-9`` after a timeout).
    ``stdout``/``stderr`` are decoded as UTF-8 (bad bytes replaced); when cut, they end with a line
    saying how much was kept, and ``*_truncated`` is true. ``*_bytes`` count everything produced.
    """

    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_seconds: float
    stdout_bytes: int
    stderr_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool
    timeout_seconds: float | None = None

    @property
    def signal_name(self) -> str | None:
        """The name of the signal that ended the process (``"SIGKILL"``), or None for a normal exit."""
        if self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"


def not_executed(args: tuple[str, ...], failure: OSError, duration: float) -> ProcessOutcome:
    """The outcome of a program its exec refused, as a shell reports it: exit 127 (missing) or 126."""
    message = f"librarian-sandbox: cannot run {args[0]!r}: {failure.strerror or failure}\n"
    return ProcessOutcome(
        argv=args,
        exit_code=127 if failure.errno == errno.ENOENT else 126,
        stdout="",
        stderr=message,
        timed_out=False,
        duration_seconds=duration,
        stdout_bytes=0,
        stderr_bytes=len(message.encode()),
        stdout_truncated=False,
        stderr_truncated=False,
    )


def checked_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` as a tuple, once it is a non-empty list of strings without NUL bytes.

    Raises:
        InvalidInputError: naming the argument that is wrong.
    """
    if isinstance(argv, str) or not argv:
        raise InvalidInputError(
            "argv must be a non-empty list of strings", hint='e.g. ["git", "status"]; no shell is used'
        )
    for index, arg in enumerate(argv):
        if not isinstance(arg, str) or "\0" in arg:
            raise InvalidInputError(f"argv[{index}] must be a string without NUL bytes, got {arg!r}")
    if not argv[0]:
        raise InvalidInputError("argv[0] (the program) is empty")
    return tuple(argv)


def check_limits(limits: SandboxLimits) -> None:
    """Refuse limits no run could work under.

    Raises:
        InvalidInputError: a timeout that is not positive, under 16 MiB of memory, negative output.
    """
    if not limits.timeout_seconds > 0:
        raise InvalidInputError(f"timeout_seconds must be positive, got {limits.timeout_seconds}")
    if limits.memory_mb < 16:
        raise InvalidInputError(f"memory_mb must be at least 16, got {limits.memory_mb}")
    if limits.output_bytes < 0:
        raise InvalidInputError(f"output_bytes must not be negative, got {limits.output_bytes}")
