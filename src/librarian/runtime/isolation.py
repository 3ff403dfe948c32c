"""Namespaces around every task: what a task can see, whom it runs as, and whether it reaches a network.

:class:`EnvironmentManager <librarian.runtime.sandbox.EnvironmentManager>` limits what a task may use
(memory, CPU, files, output, time). This module decides what it may *see*, with Debian's
``bubblewrap`` (``bwrap``), the unprivileged namespace sandbox that Flatpak and the Linux sandboxes of
coding agents use. Each run gets:

- its own **mount namespace** holding only a read-only system (``/usr``, ``/etc``, ``/opt`` and the
  ``/bin``, ``/lib`` links), a fresh ``/proc``, ``/dev`` and ``/tmp``, the tools it was given (the
  prefixes of the directories on its ``PATH`` and of the program it runs, read-only) and its
  workspace, writable. The data directory (database, configuration, other workspaces), home
  directories and the runtime's ``/proc`` entries are not there;
- its own **PID namespace**: when the program (or the timeout) ends, the namespace ends with every
  process in it, ``setsid`` or not;
- its own **network namespace** with nothing but a loopback device, unless the run is allowed a
  network;
- an **unprivileged user**. When the runtime runs as root, ``setpriv`` drops every capability and
  switches to a user of its own for the workflow (``uid_base`` plus a hash of the workflow id), so file
  permissions apply and the process-count limit (``RLIMIT_NPROC``, which the kernel never applies to
  root) holds. Otherwise a user namespace maps the runtime's user to ``nobody`` and ``prlimit`` sets the
  process limit inside it, where it counts the sandbox's processes alone.

Built per run, that costs several milliseconds. So a fork server (:mod:`librarian.runtime.forkserver`)
runs inside a workflow's sandbox as a **namespace server** (:meth:`NamespaceSandbox.server_command`)
and starts each run through ``unshare`` (:meth:`NamespaceSandbox.task_command`), which still gives it
a PID namespace, a ``/proc`` and a user of its own; only the mount and network namespaces are
shared by the runs of one workflow sandbox.

Where ``bwrap`` is missing or the machine forbids namespaces (some containers),
:func:`probe_isolation` says why; the runtime then refuses to start unless the operator chose
``runtime_sandbox_isolation = "none"``. What this protects against, and what not, is in
``docs/security.md``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from librarian.errors import BackendUnavailableError

__all__ = ["NamespaceSandbox", "give_to_owner", "probe_isolation"]

# Searched for bwrap, setpriv and prlimit: never the task's PATH, which a workflow chooses.
_SYSTEM_BIN = "/usr/bin:/bin:/usr/sbin:/sbin"
# The read-only system every run sees. The ``/bin``-style names are links into ``/usr`` on merged-/usr
# systems; they are recreated as links, or bound when they are real directories.
_SYSTEM_DIRECTORIES = ("/usr", "/etc", "/opt")
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# A PATH entry named like this is a prefix's program directory: the prefix (a virtualenv, a Node
# package tree, /opt/tool) is what the tool needs, its libraries included.
_PROGRAM_DIRECTORY_NAMES = frozenset({"bin", "sbin", "Scripts", ".bin"})
# Directories that hold credentials: never bound, even when a workflow names them on its PATH.
_CREDENTIAL_DIRECTORIES = frozenset(
    {".ssh", ".aws", ".gnupg", ".kube", ".docker", ".config", ".azure", ".password-store", ".netrc"}
)
# The user a run is inside a user namespace (the runtime is not root).
_NOBODY = 65534
# bwrap's user for a non-root runtime: a user namespace of its own, as nobody.
_AS_NOBODY = ("--unshare-user", "--uid", str(_NOBODY), "--gid", str(_NOBODY))
# What a root runtime keeps in the sandbox to switch to the workflow's user.
_SWITCH_USER = ("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")
# How many distinct users workflows are spread over when the runtime is root.
_UID_SPAN = 1_000_000


# The first process of a run's PID namespace: runs the program as its child and exits with its status
# (128 + N when a signal N ended it, as bwrap reports).
_INIT = ("/bin/sh", "-c", '"$@"', "sh")
# Namespace servers' sandboxes, by what decides them. Every run of a workflow asks for its server's,
# and building one reads the file system (tool prefixes, hidden paths) for about a millisecond; kept
# a few seconds, so a tool directory created meanwhile is bound by the next server.
_SERVER_COMMANDS: dict[tuple[object, ...], tuple[float, tuple[str, ...]]] = {}
_SERVER_COMMANDS_MAX = 256
_SERVER_COMMAND_SECONDS = 5.0


@dataclass(frozen=True)
class NamespaceSandbox:
    """Builds the ``bwrap`` command line that runs one program in its own namespaces.

    Attributes:
        bwrap: the ``bwrap`` program.
        helper: ``setpriv`` (runtime is root: drops to the workflow's user) or ``prlimit`` (not root:
            sets the process limit inside the user namespace).
        unshare: util-linux's ``unshare``, which gives each run of a namespace server its own PID
            namespace; ``None`` where that does not work inside a sandbox (then every run builds a
            sandbox of its own).
        as_root: whether the runtime runs as root (then runs switch to a user of their own).
        hidden: paths no run may see even where a bound directory holds them (the data directory).
        read_only: more directories every run sees read-only (the operator's setting).
        uid_base: the first user id of runs when the runtime is root.
    """

    bwrap: str
    helper: str
    as_root: bool
    unshare: str | None = None
    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    uid_base: int = 1_000_000_000
    _system: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def create(
        cls, *, hidden: Iterable[Path] = (), read_only: Iterable[Path] = (), uid_base: int = 1_000_000_000
    ) -> NamespaceSandbox:
        """A sandbox for this machine.

        Raises:
            BackendUnavailableError: ``bwrap`` (or ``setpriv``/``prlimit``) is missing, or the machine
                refuses to create namespaces; the message says which and how to opt out.
        """
        reason = probe_isolation()
        if reason is not None:
            raise BackendUnavailableError(
                f"tasks cannot be isolated on this machine: {reason}",
                hint=(
                    "install bubblewrap (apt-get install bubblewrap) and allow namespaces; to run "
                    'tasks without isolation anyway, set runtime_sandbox_isolation = "none" '
                    "(only for tasks you trust)"
                ),
            )
        as_root = os.geteuid() == 0
        helper = shutil.which("setpriv" if as_root else "prlimit", path=_SYSTEM_BIN)
        bwrap = shutil.which("bwrap", path=_SYSTEM_BIN)
        assert helper is not None and bwrap is not None  # probe_isolation checked both
        return cls(
            bwrap=bwrap,
            helper=helper,
            as_root=as_root,
            unshare=_task_namespaces(bwrap),
            hidden=tuple(_resolved(path) for path in hidden),
            read_only=tuple(_resolved(path) for path in read_only if path.exists()),
            uid_base=uid_base,
            _system=_system_arguments(),
        )

    def user_for(self, workflow_id: str) -> int | None:
        """The user id runs of ``workflow_id`` switch to; ``None`` when the runtime is not root."""
        if not self.as_root:
            return None
        return self.uid_base + zlib.crc32(workflow_id.encode()) % _UID_SPAN

    def command(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        workflow_id: str,
        path: str,
        network: bool,
        processes: int,
    ) -> list[str]:
        """The command that runs ``argv`` in ``workspace`` inside fresh namespaces.

        Args:
            argv: the program and its arguments.
            workspace: the only writable directory (and the working directory).
            workflow_id: whose user the run switches to when the runtime is root.
            path: the run's ``PATH``: its directories' prefixes are bound read-only.
            network: keep the machine's network (otherwise only a private loopback exists).
            processes: the most processes the run may have at once.
        """
        command = self._sandbox(argv[0], workspace=workspace, path=path, network=network)
        command += ["--die-with-parent"]
        command += [*(_SWITCH_USER if self.as_root else _AS_NOBODY), "--"]
        user = self.user_for(workflow_id)
        if user is not None:
            command += [self.helper, f"--reuid={user}", f"--regid={user}", "--clear-groups"]
            command += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        else:
            command += [self.helper, f"--nproc={processes}:{processes}", "--"]
        return [*command, *argv]

    def server_command(
        self, program: str, *, workspace: Path, path: str, network: bool, interpreter: Path
    ) -> list[str]:
        """The sandbox of a namespace server (:class:`librarian.runtime.forkserver.ForkServer`), up to ``--``.

        The same namespaces and mounts as :meth:`command` gives a run of ``program``, plus the
        installation of ``interpreter`` (which runs the server), read-only. Its runs go through
        :meth:`task_command`, so each still gets a PID namespace, a ``/proc`` and a user of its own.
        When the runtime is root, the server keeps the capabilities ``unshare`` needs for that; its
        programs never hold any. It lives as long as its worker keeps its socket open, not as long as
        the thread that started it (no ``--die-with-parent``).
        """
        key = (self, program if program.startswith("/") else "", workspace, path, network, interpreter)
        now = time.monotonic()
        known = _SERVER_COMMANDS.get(key)
        if known is not None and now - known[0] < _SERVER_COMMAND_SECONDS:
            return list(known[1])
        command = self._sandbox(program, workspace=workspace, path=path, network=network, runs=interpreter)
        # The server is its PID namespace's first process: if it dies, the kernel ends every run it
        # started (bwrap's own init would keep the namespace alive while orphans remain).
        command += ["--as-pid-1", *_server_capabilities(self.as_root), "--"]
        if len(_SERVER_COMMANDS) >= _SERVER_COMMANDS_MAX:
            _SERVER_COMMANDS.clear()
        _SERVER_COMMANDS[key] = (now, tuple(command))
        return command

    def task_command(self, argv: Sequence[str], *, workflow_id: str) -> list[str]:
        """``argv`` as a namespace server runs it: in a PID namespace of its own.

        ``unshare`` gives it a fresh ``/proc`` (it sees its own processes only) and kills it if the
        server kills ``unshare``. A shell is the namespace's first process and runs the program as
        its child, as ``bwrap``'s own init does (the kernel shields a namespace's first process from
        the signals its namespace sends, so a program that was first would ignore a ``kill -TERM $$``
        of its own). When the shell exits, the kernel kills whatever was left in the namespace,
        ``setsid`` or not. The run has the workflow's user (root runtime) or, in a user namespace of
        its own, ``nobody`` without capabilities (a new user namespace clears the ambient ones);
        ``bwrap`` set ``no_new_privs`` on the whole sandbox, so no exec can gain any.
        """
        assert self.unshare is not None, "namespace servers need unshare (see NamespaceSandbox.unshare)"
        return [self.unshare, *_unshare_arguments(self.user_for(workflow_id)), "--", *_INIT, *argv]

    def _sandbox(
        self, program: str, *, workspace: Path, path: str, network: bool, runs: Path | None = None
    ) -> list[str]:
        """``bwrap``'s namespaces and mounts for runs of ``program`` (and of ``runs``'s installation)."""
        workspace = _resolved(workspace)
        command = [self.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not network:
            command.append("--unshare-net")
        command += ["--new-session", "--hostname", "librarian-task"]
        command += self._system
        command += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        tools = self._tools(program, path, workspace, runs)
        made: set[Path] = set()
        for tool in tools:
            command += [*_parents(tool, made, tools), "--ro-bind", str(tool), str(tool)]
        command += self._masks()  # before the workspace, which may lie inside
        command += [*_parents(workspace, made, tools), "--bind", str(workspace), str(workspace)]
        command += ["--chdir", str(workspace)]
        return command

    def _tools(self, program: str, path: str, workspace: Path, runs: Path | None = None) -> list[Path]:
        """The directories a run sees read-only besides the system: its tools and the operator's list."""
        entries = [Path(entry) for entry in path.split(os.pathsep) if entry.startswith("/")]
        for named in (program, str(runs or "")):
            if named.startswith("/"):
                entries.append(Path(named).parent)
        wanted: list[Path] = list(self.read_only)
        for entry in entries:
            if not _under_system(entry):
                # A prefix that holds the data directory is too much: then only the entry itself.
                prefixes = _prefixes(entry)
                wanted += [entry] if any(self._holds_hidden(prefix) for prefix in prefixes) else prefixes
        chosen: list[Path] = []
        for candidate in sorted(set(wanted), key=lambda p: len(p.parts)):
            if len(candidate.parts) < 2 or _under_system(candidate) or candidate.is_relative_to(workspace):
                continue
            if self._holds_hidden(candidate) or any(
                candidate.is_relative_to(hidden) for hidden in self.hidden
            ):
                continue  # the data directory, or inside it: another workflow's workspace, the database
            if not _bindable(candidate):
                continue  # a home directory as a whole, or where credentials live
            if any(candidate.is_relative_to(done) for done in chosen):
                continue
            chosen.append(candidate)
        return chosen

    def _holds_hidden(self, directory: Path) -> bool:
        return any(hidden.is_relative_to(directory) for hidden in self.hidden)

    def _masks(self) -> list[str]:
        """Hide the hidden paths that the system or the operator's directories would show."""
        masks: list[str] = []
        for hidden in self.hidden:
            if not hidden.exists() or not _visible(hidden, self.read_only):
                continue
            masks += ["--tmpfs", str(hidden)] if hidden.is_dir() else ["--ro-bind", "/dev/null", str(hidden)]
        return masks


def _parents(path: Path, made: set[Path], bound: list[Path]) -> list[str]:
    """``--dir`` arguments for the directories above ``path`` that the sandbox's root lacks.

    ``bwrap`` would create them itself, but with the host directories' modes: under a ``0700``
    directory the task's user could not reach its own workspace by its absolute path.
    """
    arguments: list[str] = []
    for parent in reversed(path.parents[:-1]):  # from the top, without "/"
        if parent in made or _under_system(parent) or any(parent.is_relative_to(b) for b in bound):
            continue
        made.add(parent)
        arguments += ["--dir", str(parent)]
    return arguments


def _bindable(directory: Path) -> bool:
    """Whether a tool directory may be shown to tasks: never a home directory (or what holds one),
    nor a directory where credentials live, whatever a workflow puts on its ``PATH``."""
    if any(part in _CREDENTIAL_DIRECTORIES for part in directory.parts):
        return False
    return not any(home.is_relative_to(directory) for home in _homes())


@cache
def _homes() -> tuple[Path, ...]:
    """The home directories of this machine's users (and the runtime's own)."""
    homes = {Path.home(), Path("/root")}
    with contextlib.suppress(OSError):  # no /home
        homes.update(entry for entry in Path("/home").iterdir() if entry.is_dir())
    return tuple(_resolved(home) for home in homes)


def _visible(path: Path, read_only: tuple[Path, ...]) -> bool:
    """Whether ``path`` would be inside something every run sees (the system or the operator's list)."""
    return _under_system(path) or any(path.is_relative_to(directory) for directory in read_only)


def _under_system(path: Path) -> bool:
    return any(path.is_relative_to(directory) for directory in (*_SYSTEM_DIRECTORIES, *_SYSTEM_LINKS))


# What each existing PATH entry needs bound, computed once: every run of a task reads its whole PATH,
# and the answer (a realpath and a pyvenv.cfg read per entry) does not change between runs.
_PREFIXES: dict[Path, list[Path]] = {}
_PREFIXES_MAX = 1024


def _prefixes(entry: Path) -> list[Path]:
    """What a ``PATH`` entry needs bound: its prefix and, for a virtualenv, its base interpreter's.

    ``venv/bin`` needs ``venv`` (its ``lib``), and a virtualenv's ``python`` is a link to the
    interpreter it was made from, named by ``home`` in ``pyvenv.cfg``. Entries that do not exist are
    not remembered: a task may create the virtualenv later.
    """
    known = _PREFIXES.get(entry)
    if known is not None:
        return known
    if not entry.is_dir():
        return []
    found: list[Path] = []
    for directory in dict.fromkeys((entry, _resolved(entry))):
        prefix = directory.parent if directory.name in _PROGRAM_DIRECTORY_NAMES else directory
        found.append(prefix)
        base = _virtualenv_base(prefix)
        if base is not None:
            found.append(base)
    if len(_PREFIXES) >= _PREFIXES_MAX:
        _PREFIXES.clear()
    _PREFIXES[entry] = found
    return found


def _virtualenv_base(prefix: Path) -> Path | None:
    """The prefix of the interpreter a virtualenv was made from, or ``None`` for anything else."""
    try:
        lines = (prefix / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip().startswith("/"):
            home = _resolved(Path(value.strip()))
            return home.parent if home.name in _PROGRAM_DIRECTORY_NAMES else home
    return None


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _system_arguments() -> tuple[str, ...]:
    """``bwrap`` arguments that show this machine's system directories read-only."""
    arguments: list[str] = []
    for directory in _SYSTEM_DIRECTORIES:
        if os.path.isdir(directory):
            arguments += ["--ro-bind", directory, directory]
    for name in _SYSTEM_LINKS:
        if os.path.islink(name):
            arguments += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            arguments += ["--ro-bind", name, name]
    return tuple(arguments)


@cache
def probe_isolation() -> str | None:
    """Why tasks cannot be isolated on this machine, or ``None`` when they can (checked once).

    Starts ``bwrap`` once with every namespace a run uses, so a container that forbids them is found
    at start, not at the first task.
    """
    bwrap = shutil.which("bwrap", path=_SYSTEM_BIN)
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    helper_name = "setpriv" if os.geteuid() == 0 else "prlimit"
    if shutil.which(helper_name, path=_SYSTEM_BIN) is None:
        return f"util-linux's {helper_name} is not installed"
    user = _SWITCH_USER if os.geteuid() == 0 else _AS_NOBODY
    probe = [bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent"]
    probe += [*user, *_system_arguments(), "--proc", "/proc", "--dev", "/dev", "--", "true"]
    try:
        completed = subprocess.run(
            probe, capture_output=True, timeout=30, check=False, env={"PATH": _SYSTEM_BIN}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    if completed.returncode != 0:
        said = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap cannot create namespaces here ({said[-1] if said else f'exit {completed.returncode}'})"
    return None


def _server_capabilities(as_root: bool) -> tuple[str, ...]:
    """``bwrap`` arguments for a namespace server's own user: see :meth:`NamespaceSandbox.server_command`."""
    return ("--cap-add", "CAP_SYS_ADMIN", *_SWITCH_USER) if as_root else _AS_NOBODY


def _unshare_arguments(user: int | None) -> list[str]:
    """``unshare``'s options for one run of a namespace server (see :meth:`NamespaceSandbox.task_command`)."""
    command = ["--pid", "--fork", "--kill-child", "--mount-proc"]
    if user is not None:
        return [*command, "--setuid", str(user), "--setgid", str(user)]
    return [*command, "--user", f"--map-user={_NOBODY}", f"--map-group={_NOBODY}"]


@cache
def _task_namespaces(bwrap: str) -> str | None:
    """``unshare`` if it can start a run in a PID namespace of its own inside a server's sandbox.

    Checked once, as a namespace server would do it; ``None`` (each run then builds its own sandbox)
    where ``unshare`` is missing or the machine refuses namespaces nested in a sandbox.
    """
    unshare = shutil.which("unshare", path=_SYSTEM_BIN)
    if unshare is None:
        return None
    as_root = os.geteuid() == 0
    user = _NOBODY if as_root else None
    probe = [bwrap, "--unshare-pid", "--unshare-net", *_server_capabilities(as_root), *_system_arguments()]
    probe += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        unshare,
        *_unshare_arguments(user),
        "--",
        *_INIT,
        "true",
    ]
    try:
        completed = subprocess.run(
            probe, capture_output=True, timeout=30, check=False, env={"PATH": _SYSTEM_BIN}
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return unshare if completed.returncode == 0 else None


def give_to_owner(descriptor: int, owner: int | None) -> None:
    """Hand an open file or directory the runtime made for a task to the workflow's user.

    By descriptor, never by path: the workspace is the task's to change, and a path could lead
    through a link it put there. Nothing happens when runs keep the runtime's user (``owner`` None).
    """
    if owner is not None and os.fstat(descriptor).st_uid != owner:
        os.fchown(descriptor, owner, owner)
