"""The resource limits of a run, and the two launcher command lines that apply them before ``exec``.

The fork server applies them to itself (:mod:`librarian.runtime.forkserver`); the other launchers
prefix the program with util-linux ``prlimit`` or a tiny Python wrapper (:func:`prlimit_command`,
:func:`wrapper_command`). ``RLIMIT_NPROC`` is only set when the run's user is its own (see
:mod:`librarian.runtime.isolation`): the kernel counts it per user.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Sequence

from librarian.runtime.forkserver import Limits

__all__ = ["prlimit_command", "run_rlimits", "wrapper_command"]

# Runs as ``python -I -S -c _WRAPPER DATA CPU NOFILE FSIZE NPROC -- argv...`` (NPROC -1: unlimited):
# sets the limits, then becomes the program. Hard limits equal soft ones (CPU gets one extra second
# so SIGXCPU comes before SIGKILL), so the task cannot raise them back.
_WRAPPER = """\
import os, resource, sys
limits = dict(zip(("DATA", "CPU", "NOFILE", "FSIZE", "NPROC"), map(int, sys.argv[1:6])))
for name, value in limits.items():
    if value < 0:
        continue
    which = getattr(resource, "RLIMIT_" + name)
    hard = resource.getrlimit(which)[1]
    cap = (lambda v: v) if hard == resource.RLIM_INFINITY else (lambda v: min(v, hard))
    resource.setrlimit(which, (cap(value), cap(value + 1 if name == "CPU" else value)))
argv = sys.argv[7:]
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.stderr.write("librarian-sandbox: cannot run %r: %s\\n" % (argv[0], exc.strerror))
    sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""


_PRLIMIT_OPTIONS = {
    resource.RLIMIT_DATA: "data",
    resource.RLIMIT_CPU: "cpu",
    resource.RLIMIT_NOFILE: "nofile",
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_NPROC: "nproc",
}


def run_rlimits(
    *, memory_bytes: int, cpu_seconds: int, open_files: int, file_bytes: int, processes: int | None
) -> Limits:
    """``(resource, soft, hard)`` of a run, capped at this process's own hard limits.

    The program inherits this process's limits and a hard limit can never be raised, so capping here
    is what the Python wrapper does in the child. Hard equals soft, except that CPU gets one extra
    second so SIGXCPU comes before SIGKILL; the task cannot raise them back.
    """
    wanted: list[tuple[int, int, int]] = [
        (resource.RLIMIT_DATA, memory_bytes, memory_bytes),
        (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_FSIZE, file_bytes, file_bytes),
    ]
    if processes is not None:
        wanted.append((resource.RLIMIT_NPROC, processes, processes))
    return tuple((which, _cap(which, soft), _cap(which, hard)) for which, soft, hard in wanted)


def _cap(which: int, value: int) -> int:
    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def prlimit_command(prlimit: str, rlimits: Limits, args: Sequence[str]) -> list[str]:
    """``prlimit`` setting ``rlimits`` (soft and hard), then becoming ``args``."""
    options = [f"--{_PRLIMIT_OPTIONS[which]}={soft}:{hard}" for which, soft, hard in rlimits]
    return [prlimit, *options, "--", *args]


def wrapper_command(rlimits: Limits, args: Sequence[str]) -> list[str]:
    """The Python wrapper setting ``rlimits``, then becoming ``args`` (where ``prlimit`` is missing)."""
    values = {which: soft for which, soft, _ in rlimits}
    order = (resource.RLIMIT_DATA, resource.RLIMIT_CPU, resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE)
    numbers = [*(values[which] for which in order), values.get(resource.RLIMIT_NPROC, -1)]
    return [sys.executable, "-I", "-S", "-c", _WRAPPER, *map(str, numbers), "--", *args]
