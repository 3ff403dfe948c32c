"""The Environment Manager: per-workflow workspaces and a resource-limited, secret-free way to run programs.

Every command and code task runs through :meth:`EnvironmentManager.run`:

- no shell: ``argv`` is handed to ``execve`` as it is, so ``"; rm -rf x"`` stays one literal argument;
- the working directory is the workflow's workspace, ``HOME`` is the workspace, ``TMPDIR`` its ``tmp``;
- the environment is built from a short allow-list plus the variables the task itself names, so the
  worker's credentials (``AWS_*``, ``LIBRARIAN_*``, tokens, keys, passwords) never reach a task;
- writable memory (``RLIMIT_DATA``), CPU time, open files and file size are capped with ``setrlimit``;
- the process runs in its own session, and the whole process group is killed on timeout, when the
  worker stops (:meth:`EnvironmentManager.shutdown`) and when the main process exits (an ``atexit``
  hook), so no background child outlives its task and no task outlives its worker;
- stdout and stderr keep their first ``output_bytes`` bytes each and say when the rest was cut.

The limits are applied before the program starts, never by ``preexec_fn`` in the worker: executors run
in worker threads, and ``preexec_fn`` is not safe in a threaded parent (the child can deadlock before
``exec``). Three launchers do it (``launcher``; ``auto`` takes the first available):

- ``forkserver`` (:mod:`librarian.runtime.forkserver`): a single-threaded helper process per limit
  profile sets the limits on itself and starts each program with ``vfork`` and ``exec``, so the
  program inherits them and no launcher program runs first (about 1.5 ms per no-op run);
- ``prlimit``: util-linux's ``prlimit`` sets them, then execs the program (about 2.5 ms);
- ``python``: a tiny Python wrapper does the same (about 10 ms more: a second interpreter start).

The limits and the launchers' command lines are in :mod:`librarian.runtime.rlimits`. Around the
launcher, :mod:`librarian.runtime.isolation` puts each run in namespaces of its own (what it sees,
whom it runs as, its network). Once started, :mod:`librarian.runtime.program_io` watches the program:
its exit is noticed through a pidfd (Linux 5.3+), or the fork server's report, rather than by
polling, so a task that ends is reported at once.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from librarian.config import Settings
from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.runtime.contracts import Workspace
from librarian.runtime.forkserver import (
    SERVER_INTERPRETER,
    ForkServerError,
    ForkServers,
    RequestTooLargeError,
    ServerProfile,
)
from librarian.runtime.isolation import NamespaceSandbox
from librarian.runtime.process_groups import ProcessGroups
from librarian.runtime.program_io import LocalProgram, Program, collect, devnull, output_pipes, stdin_file
from librarian.runtime.rlimits import prlimit_command, run_rlimits, wrapper_command
from librarian.runtime.run_limits import (
    ProcessOutcome,
    SandboxLimits,
    check_limits,
    checked_argv,
    not_executed,
)

__all__ = [
    "DEFAULT_PASSTHROUGH",
    "FORKSERVER_AVAILABLE",
    "CommandNotFoundError",
    "EnvironmentManager",
    "Launcher",
    "NetworkPolicy",
    "ProcessOutcome",
    "SandboxLimits",
    "kill_all_sandboxes",
]

_WORKFLOW_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Names that look like credentials: never passed through from the worker, whatever the configuration.
_SECRET_NAME = re.compile(
    r"^(AWS_|LIBRARIAN_)|TOKEN|_KEY$|KEY_|PASSWORD|PASSWD|SECRET|CREDENTIAL", re.IGNORECASE
)
# Copied from the worker when set; nothing else of the worker's environment is.
DEFAULT_PASSTHROUGH = ("LANG", "LC_ALL", "TZ")


# Where ``prlimit`` is looked for (never on the task's PATH, which the workflow could influence).
_SYSTEM_BIN = "/usr/bin:/bin:/usr/sbin:/sbin"
Launcher = Literal["auto", "forkserver", "prlimit", "python"]
# Whether a run keeps the machine's network: never, when its task asks (``network: true``), always.
NetworkPolicy = Literal["off", "per_task", "on"]
# The fork server watches its programs through pidfds and passes descriptors over a Unix socket.
FORKSERVER_AVAILABLE = sys.platform == "linux" and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")
# Below this memory limit a run goes through prlimit (or the Python wrapper) instead: a fork
# server lives under the limits it serves, and its interpreter needs some room.
_FORKSERVER_MIN_MEMORY_MB = 64


class CommandNotFoundError(InvalidInputError):
    """The program named by ``argv[0]`` is not on the sandbox's ``PATH`` (or not in the workspace)."""


# Every manager of this process, for the exit hook; weak, so a manager that is dropped is not kept.
_MANAGERS: weakref.WeakSet[EnvironmentManager] = weakref.WeakSet()
_MANAGERS_LOCK = threading.Lock()


def kill_all_sandboxes() -> int:
    """Kill the process group of every run in progress of every manager; how many were killed.

    Registered with ``atexit``: a worker that exits (``librarian worker`` on SIGTERM, an embedded
    runtime's program ending) leaves no task running orphaned, which would otherwise run a second time
    once its lease expires. The managers stay usable.
    """
    with _MANAGERS_LOCK:
        managers = list(_MANAGERS)
    return sum(manager.kill_running() for manager in managers)


atexit.register(kill_all_sandboxes)


class EnvironmentManager:
    """Owns the workspaces of workflows and runs programs inside them under limits.

    Args:
        root: directory holding one workspace per workflow (``<home>/workspaces`` by default).
        limits: default limits of :meth:`run`.
        path: ``PATH`` of the sandbox; default: the interpreter's own ``bin`` directory (where tools
            installed with Librarian, such as ``aws``, live) followed by the worker's ``PATH``.
        passthrough: names of worker variables copied into every run when set. Names that look like
            credentials are refused, so a configuration mistake cannot leak them.
        launcher: what sets the limits before the program starts: the ``forkserver`` (Linux 5.3+),
            ``prlimit`` (util-linux), the ``python`` wrapper, or ``auto`` (the first available).
        isolation: the namespaces every run gets (:mod:`librarian.runtime.isolation`); ``None`` runs
            programs as the runtime's user, seeing what it sees (only for trusted tasks).
        network: whether runs reach the network when isolated: ``off``, ``per_task`` (when the run
            asks) or ``on``.

    Raises:
        InvalidInputError: a passthrough name looks like a credential or is not a variable name, or
            ``launcher="prlimit"`` (or ``"forkserver"``) on a machine without it.
    """

    def __init__(
        self,
        root: Path,
        *,
        limits: SandboxLimits | None = None,
        path: str | None = None,
        passthrough: Sequence[str] = DEFAULT_PASSTHROUGH,
        launcher: Launcher = "auto",
        isolation: NamespaceSandbox | None = None,
        network: NetworkPolicy = "per_task",
    ) -> None:
        self.root = root.expanduser().resolve()
        self.isolation = isolation
        self.network = network
        self.limits = limits or SandboxLimits()
        if path is None:
            inherited = os.environ.get("PATH", os.defpath)
            path = os.pathsep.join([str(Path(sys.executable).parent), inherited])
        self.path = path
        for name in passthrough:
            if not _ENV_NAME.fullmatch(name) or _SECRET_NAME.search(name):
                raise InvalidInputError(
                    f"sandbox passthrough variable {name!r} is refused: it looks like a credential "
                    "or is not a variable name",
                    hint="pass secrets in the task payload's env instead",
                )
        self.passthrough = tuple(passthrough)
        if launcher == "forkserver" and not FORKSERVER_AVAILABLE:
            raise InvalidInputError(
                "the sandbox launcher 'forkserver' needs Linux 5.3 or later (pidfd)", hint="use 'auto'"
            )
        prlimit = shutil.which("prlimit", path=_SYSTEM_BIN) if launcher != "python" else None
        if launcher == "prlimit" and prlimit is None:
            raise InvalidInputError(
                "the sandbox launcher 'prlimit' is not installed", hint="install util-linux or use 'auto'"
            )
        self.prlimit = prlimit
        serve = launcher == "forkserver" or (launcher == "auto" and FORKSERVER_AVAILABLE)
        self._forkservers = ForkServers() if serve else None
        self._groups = ProcessGroups()
        with _MANAGERS_LOCK:
            _MANAGERS.add(self)

    @property
    def closed(self) -> bool:
        """Whether :meth:`shutdown` was called: runs are refused from then on."""
        return self._groups.closed

    def kill_running(self) -> int:
        """SIGKILL the process group of every run in progress; returns how many there were.

        Each killed run returns at once with exit code ``-9``; later runs are not affected.
        """
        return self._groups.kill_all()

    def shutdown(self) -> int:
        """Kill every run in progress and refuse new ones (the worker is stopping).

        Returns how many runs were killed. A run that starts concurrently is killed as soon as its
        process exists; one that starts afterwards raises :class:`BackendUnavailableError`.
        """
        killed = self._groups.kill_all(close=True)
        if self._forkservers is not None:
            self._forkservers.close()
        return killed

    @property
    def launcher(self) -> Literal["forkserver", "prlimit", "python"]:
        """What applies the limits: ``forkserver``, ``prlimit`` or ``python``.

        With ``forkserver``, runs whose memory limit is below 64 MiB go through the other launcher.
        """
        if self._forkservers is not None:
            return "forkserver"
        return "prlimit" if self.prlimit else "python"

    @classmethod
    def from_settings(cls, settings: Settings) -> EnvironmentManager:
        """Workspaces under ``settings.home/workspaces``, the ``runtime_task_*`` limits and the launcher."""
        limits = SandboxLimits(
            timeout_seconds=settings.runtime_task_timeout_seconds,
            memory_mb=settings.runtime_task_memory_mb,
            output_bytes=settings.runtime_task_output_bytes,
            processes=settings.runtime_task_processes,
        )
        isolation = None
        if settings.runtime_sandbox_isolation == "namespaces":
            # The data directory, and the configuration wherever it lives (/etc is shown to tasks).
            hidden = [settings.home, *([settings.config_file] if settings.config_file else [])]
            isolation = NamespaceSandbox.create(
                hidden=hidden, read_only=settings.runtime_sandbox_read_only_paths
            )
        return cls(
            settings.home / "workspaces",
            limits=limits,
            launcher=settings.runtime_sandbox_launcher,
            isolation=isolation,
            network=settings.runtime_sandbox_network,
        )

    def workspace_for(self, workflow_id: str) -> Workspace:
        """Create (if needed) and return the workspace of ``workflow_id``.

        Raises:
            InvalidInputError: the id is not 1-128 letters, digits, ``.``, ``_`` or ``-`` starting with
                a letter or digit (so it can never name ``..`` or a path).
        """
        if not _WORKFLOW_ID.fullmatch(workflow_id):
            raise InvalidInputError(
                f"workflow id {workflow_id!r} cannot name a workspace",
                hint="use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
            )
        directory = self.root / workflow_id
        _ensure_tmp(directory)
        owner = self.isolation.user_for(workflow_id) if self.isolation is not None else None
        if owner is not None:
            _give(directory, owner)
            _give(directory / "tmp", owner)
        return Workspace(root=directory, workflow_id=workflow_id, owner=owner)

    def environment(self, workspace: Workspace, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The complete environment of a run: the allow-list, then ``overrides``.

        Overrides come from the task payload and may name anything (a workflow may set
        ``AWS_ENDPOINT_URL`` or its own credentials); the worker's own values are never inherited.

        Raises:
            InvalidInputError: an override name is not a variable name, or a value is not a string
                or contains a NUL byte.
        """
        env = {name: os.environ[name] for name in self.passthrough if name in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        env.update(PATH=self.path, HOME=str(workspace.root), TMPDIR=str(workspace.root / "tmp"))
        for name, value in (overrides or {}).items():
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                raise InvalidInputError(f"environment variable name {name!r} is not valid")
            if not isinstance(value, str) or "\0" in value:
                raise InvalidInputError(f"environment variable {name} must be a string without NUL bytes")
            env[name] = value
        return env

    def run(
        self,
        argv: Sequence[str],
        workspace: Workspace,
        *,
        timeout_seconds: float | None = None,
        memory_mb: int | None = None,
        output_bytes: int | None = None,
        env_overrides: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        network: bool = False,
    ) -> ProcessOutcome:
        """Run ``argv`` (no shell) in ``workspace`` under limits; never raises for the program failing.

        Args:
            argv: program and arguments; ``argv[0]`` is looked up on the sandbox ``PATH`` unless it
                contains a ``/`` (then it is relative to the workspace or absolute).
            workspace: from :meth:`workspace_for`; the working directory and ``HOME``.
            timeout_seconds, memory_mb, output_bytes: override this manager's default limits.
            env_overrides: variables the task sets (see :meth:`environment`).
            stdin: data fed to the program's standard input; none means ``/dev/null``.
            network: the run asks for the network (granted when the policy is ``per_task`` or
                ``on``; an isolated run without it has only a loopback device of its own).

        Returns:
            The exit code, captured output and whether the timeout struck.

        Raises:
            InvalidInputError: an empty argv, a non-string or NUL-containing argument, bad limits or
                bad variables.
            CommandNotFoundError: ``argv[0]`` cannot be found.
            BackendUnavailableError: the machine cannot start a process (no memory, no pids left), or
                this manager was shut down.
        """
        limits = SandboxLimits(
            timeout_seconds=self.limits.timeout_seconds if timeout_seconds is None else timeout_seconds,
            memory_mb=self.limits.memory_mb if memory_mb is None else memory_mb,
            output_bytes=self.limits.output_bytes if output_bytes is None else output_bytes,
            open_files=self.limits.open_files,
            file_bytes=self.limits.file_bytes,
            processes=self.limits.processes,
        )
        check_limits(limits)
        args = checked_argv(argv)
        env = self.environment(workspace, env_overrides)
        _ensure_tmp(workspace.root)  # a task may have removed it
        if workspace.owner is not None:
            _give(workspace.root / "tmp", workspace.owner)
        _find_program(args[0], env["PATH"], workspace)
        if self.closed:
            raise BackendUnavailableError(
                f"the sandbox is shutting down and cannot start {args[0]!r}",
                hint="the worker is stopping; the task runs again once its lease expires",
            )
        with stdin_file(stdin) as stdin_handle:
            stdout_read, stdout_write, stderr_read, stderr_write = output_pipes(args[0])
            started = time.monotonic()
            try:
                ticket = self._groups.starting()
                stdin_fd = stdin_handle.fileno() if stdin_handle is not None else devnull()
                program = self._start(
                    args,
                    workspace,
                    env,
                    limits,
                    self._network_allowed(network),
                    (stdin_fd, stdout_write, stderr_write),
                )
            except BaseException as exc:
                self._groups.not_started()
                os.close(stdout_read)
                os.close(stderr_read)
                if not isinstance(exc, OSError):
                    raise
                # subprocess names the file when exec refused it (a launcher given too long an
                # argument, say): the task's failure. Otherwise fork, pipes or a fork server failed:
                # the machine's.
                refused = exc.exec_failed if isinstance(exc, ForkServerError) else exc.filename is not None
                if refused:
                    return not_executed(args, exc, time.monotonic() - started)
                raise BackendUnavailableError(f"the sandbox cannot start {args[0]!r}: {exc}") from exc
            else:
                self._groups.add(program, ticket)
            finally:
                os.close(stdout_write)  # the program holds its own copies
                os.close(stderr_write)
            stdout, stderr, timed_out, exit_code = collect(
                program,
                stdout_read,
                stderr_read,
                output_bytes=limits.output_bytes,
                deadline=started + limits.timeout_seconds,
                forget=self._groups.discard,
            )
        duration = time.monotonic() - started
        out_text, out_cut = stdout.text()
        err_text, err_cut = stderr.text()
        return ProcessOutcome(
            argv=args,
            exit_code=exit_code,
            stdout=out_text,
            stderr=err_text,
            timed_out=timed_out,
            duration_seconds=duration,
            stdout_bytes=stdout.total,
            stderr_bytes=stderr.total,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
            timeout_seconds=limits.timeout_seconds,
        )

    def _network_allowed(self, asked: bool) -> bool:
        """Whether a run keeps the machine's network: the policy, and whether the run asked."""
        return self.network == "on" or (self.network == "per_task" and asked)

    def _isolated(
        self, args: tuple[str, ...], workspace: Workspace, path: str, limits: SandboxLimits, network: bool
    ) -> tuple[str, ...]:
        """``args`` inside this manager's namespaces, or as they are when runs are not isolated."""
        if self.isolation is None:
            return args
        return tuple(
            self.isolation.command(
                args,
                workspace=workspace.root,
                workflow_id=workspace.workflow_id,
                path=path,
                network=network,
                processes=limits.processes,
            )
        )

    def _start(
        self,
        args: tuple[str, ...],
        workspace: Workspace,
        env: dict[str, str],
        limits: SandboxLimits,
        network: bool,
        stdio: tuple[int, int, int],
    ) -> Program:
        """Start ``args`` in its own session under ``limits``, with the launcher of this manager.

        With a fork server, an isolated run goes to its workflow sandbox's namespace server (built
        once; then a run costs a spawn of ``unshare``, which gives it a PID namespace of its own);
        otherwise each run builds its own sandbox.
        """
        stdin, stdout, stderr = stdio
        if self._forkservers is not None and limits.memory_mb >= _FORKSERVER_MIN_MEMORY_MB:
            profile = ServerProfile(self._rlimits(limits))
            served = args
            if self.isolation is not None:
                if self.isolation.unshare is None:
                    served = self._isolated(args, workspace, env["PATH"], limits, network)
                else:
                    profile = self._namespace_server(args[0], workspace, env["PATH"], limits, network)
                    served = tuple(self.isolation.task_command(args, workflow_id=workspace.workflow_id))
            try:
                return self._forkservers.spawn(
                    served,
                    profile=profile,
                    cwd=workspace.root,
                    env=env,
                    stdin=stdin,
                    stdout=stdout,
                    stderr=stderr,
                )
            except RequestTooLargeError:
                pass  # an argv or environment of more than 128 KiB: started here instead
        process = subprocess.Popen(
            self._launch(limits, self._isolated(args, workspace, env["PATH"], limits, network)),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=workspace.root,
            env=env,
            shell=False,
            start_new_session=True,  # its own process group, killed as a whole
            close_fds=True,
        )
        return LocalProgram(process)

    def _namespace_server(
        self, program: str, workspace: Workspace, path: str, limits: SandboxLimits, network: bool
    ) -> ServerProfile:
        """The namespace server of a run: one per workflow sandbox (its mounts and network) and limits."""
        assert self.isolation is not None
        sandbox = self.isolation.server_command(
            program, workspace=workspace.root, path=path, network=network, interpreter=SERVER_INTERPRETER
        )
        directory = os.stat(workspace.root)
        return ServerProfile(
            # The process limit is the server's too (root is exempt from it, the runs are not): as
            # the workflow's user, or per run in a user namespace of its own.
            self._rlimits(limits, processes=True),
            tuple(sandbox),
            (directory.st_dev, directory.st_ino),
        )

    def _rlimits(self, limits: SandboxLimits, *, processes: bool = False) -> tuple[tuple[int, int, int], ...]:
        """The launcher's limits; with the process count when runs switch to a user of their own.

        The kernel counts ``RLIMIT_NPROC`` per user: only a user that is the run's alone makes it a
        per-run limit (a user namespace sets it inside instead, see :mod:`librarian.runtime.isolation`).
        """
        counted = processes or (self.isolation is not None and self.isolation.as_root)
        return run_rlimits(
            memory_bytes=limits.memory_mb * 1024 * 1024,
            cpu_seconds=limits.cpu_seconds,
            open_files=limits.open_files,
            file_bytes=limits.file_bytes,
            processes=limits.processes if counted else None,
        )

    def _launch(self, limits: SandboxLimits, args: tuple[str, ...]) -> list[str]:
        """The argv that applies ``limits`` to itself, then ``exec``s ``args``."""
        rlimits = self._rlimits(limits)
        if self.prlimit is None:
            return wrapper_command(rlimits, args)
        return prlimit_command(self.prlimit, rlimits, args)


def _give(directory: Path, owner: int) -> None:
    """Make ``directory`` its owner's (runs of an isolated workflow write there as that user).

    Never through a symbolic link: a task may replace its ``tmp`` with a link to any file, and the
    runtime (root) following it would hand that file to the task.
    """
    info = os.lstat(directory)
    if stat.S_ISDIR(info.st_mode) and info.st_uid != owner:
        os.lchown(directory, owner, owner)


def _ensure_tmp(workspace: Path) -> None:
    """Create ``workspace/tmp`` (and the workspace) unless it exists: one system call when it does.

    Runs before every task, so the common case skips ``Path.mkdir``'s extra ``stat``.
    """
    tmp = os.path.join(workspace, "tmp")
    try:
        os.mkdir(tmp, 0o700)
    except FileExistsError:
        return
    except FileNotFoundError:  # a new workspace
        Path(tmp).mkdir(parents=True, exist_ok=True, mode=0o700)


# Where each command last found on a PATH lives: ``(program, PATH) -> path``. A later run checks that
# one file (one ``access``) instead of searching the PATH again (a ``stat`` per directory).
_FOUND_ON_PATH: dict[tuple[str, str], str] = {}
_FOUND_ON_PATH_MAX = 1024


def _find_program(program: str, path: str, workspace: Workspace) -> None:
    """Fail early with a clear error instead of an exit code 127 the caller has to guess about."""
    if "/" in program:
        candidate = Path(program) if program.startswith("/") else workspace.root / program
        if candidate.is_file():
            return
        raise CommandNotFoundError(f"program {program!r} does not exist", hint=f"looked at {candidate}")
    found = _FOUND_ON_PATH.get((program, path))
    if found is not None and os.access(found, os.X_OK):
        return  # the exec searches the PATH itself; this only checks that it will find something
    found = shutil.which(program, path=path)
    if found is None:
        _FOUND_ON_PATH.pop((program, path), None)
        raise CommandNotFoundError(
            f"command {program!r} was not found on the sandbox PATH",
            hint="install it, or give its full path; the PATH is " + path,
        )
    if len(_FOUND_ON_PATH) >= _FOUND_ON_PATH_MAX:
        _FOUND_ON_PATH.clear()  # many distinct commands: start again rather than grow without end
    _FOUND_ON_PATH[(program, path)] = found
