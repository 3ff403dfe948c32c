"""The worker's side of the fork servers (:mod:`librarian.runtime.forkserver_process`).

A :class:`ForkServer` serves one :class:`ServerProfile`: its process lives under those limits and every
program it starts inherits them. A profile with a sandbox makes it a namespace server: it runs inside
that ``bwrap`` sandbox (one workflow's mounts, network and PID namespace), so a program it starts
costs a spawn instead of a new sandbox (``NamespaceSandbox.task_command`` in
:mod:`librarian.runtime.isolation` says what each program still gets of its own). :class:`ForkServers`
keeps one per profile in use (a few dozen at most), starts each on first use and again when it died,
and retires one whose own CPU time nears its CPU limit (the server lives under the tasks'
``RLIMIT_CPU`` too). Spawns from several threads share a server's control
socket under a lock; each run has its own reply socket, so no answer reaches the wrong thread.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SERVER = Path(__file__).with_name("forkserver_process.py")
# What a namespace server runs: the interpreter itself, not a virtualenv's link to it (the sandbox
# binds the interpreter's installation, see NamespaceSandbox.server_command).
SERVER_INTERPRETER = Path(os.path.realpath(sys.executable))
_REPLY_BYTES = 4096
# One request is one packet, and a packet must fit the socket's send buffer (about 200 KiB by
# default); larger argv and environments go through another launcher.
MAX_REQUEST_BYTES = 128 * 1024
# What sending to a server that has exited fails with.
_SERVER_GONE = {errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ECONNREFUSED}
# Profiles with a server at once (a namespace server per workflow sandbox in use); the least recently
# used one retires beyond that.
_MAX_SERVERS = 16
# A server retires once its own CPU time passes this share of its CPU limit.
_CPU_SHARE_BEFORE_RETIRING = 0.5

Limits = tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class ServerProfile:
    """What one fork server serves: the limits it lives under and, for a namespace server, its sandbox.

    Attributes:
        limits: ``(resource, soft, hard)`` triples the server sets on itself; its programs inherit them.
        sandbox: the ``bwrap`` command line (ending with ``--``) the server runs in, or empty.
        workspace: the device and inode of the directory the sandbox binds as the workspace: one
            deleted and made again under the same name is another directory, and gets another server.
    """

    limits: Limits
    sandbox: tuple[str, ...] = ()
    workspace: tuple[int, int] = (0, 0)


class ForkServerError(OSError):
    """The fork server could not start the program.

    ``exec_failed`` says the program itself could not be executed (missing, not executable, too big
    for its memory limit): the task's failure. Otherwise the machine could not start a process.
    """

    exec_failed: bool = False


class RequestTooLargeError(OSError):
    """The argv and environment do not fit in one message to a fork server; use another launcher."""


def kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid``; nothing if it is already empty."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _RetiredError(Exception):
    """The server was retired after it was picked for a spawn: the pool picks another."""


class ServedProgram:
    """A program a fork server started: ``pid`` (also its process group), its exit, ``kill``."""

    def __init__(self, pid: int, reply: socket.socket, *, local: bool = True) -> None:
        self.pid = pid
        self._reply = reply
        self._local = local  # the pid is this machine's, not one inside a sandbox's PID namespace
        self.returncode: int | None = None

    @property
    def exit_fd(self) -> int:
        """Readable once the program has exited (and its group was killed and it was reaped)."""
        return self._reply.fileno()

    def has_exited(self) -> bool:
        """Whether the exit has been reported, reading the report if it is waiting (never blocks)."""
        if self.returncode is None:
            self._read_exit(blocking=False)
        return self.returncode is not None

    def kill(self) -> None:
        """SIGKILL the program's group; the server does it, and it alone reaps, so never a reused pid."""
        if self.returncode is None:
            with contextlib.suppress(OSError):  # the server is gone, and killed its programs first
                self._reply.send(b"kill")

    def wait(self) -> int:
        """Block until the exit is reported; the exit code (``-N``: killed by signal N)."""
        while self.returncode is None:
            self._read_exit(blocking=True)
        return self.returncode

    def close(self) -> None:
        """Release the reply socket (the server kills the group if the program still runs)."""
        self._reply.close()

    def _read_exit(self, *, blocking: bool) -> None:
        try:
            data = self._reply.recv(_REPLY_BYTES, 0 if blocking else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.returncode = int(json.loads(data)["exit"])
            return
        # No answer: the server was killed from outside (when closed, it reports every end first)
        # and the program was orphaned. Its group is killed from here, best effort: reaped by init
        # meanwhile, its id could in principle have been reused. A namespace server's programs
        # died with it (its sandbox's PID namespace ended), and their pids are not this machine's.
        if self._local:
            kill_group(self.pid)
        self.returncode = -signal.SIGKILL


class ForkServer:
    """One fork server process and the profile it serves."""

    def __init__(self, profile: ServerProfile) -> None:
        self.profile = profile
        limits = profile.limits
        self._cpu_limit = next((soft for which, soft, _ in limits if which == resource.RLIMIT_CPU), None)
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.retiring = False

    def spawn(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdin: int, stdout: int, stderr: int
    ) -> ServedProgram:
        """Start ``argv`` in its own session, under this server's limits.

        Raises:
            ForkServerError: the program could not be started (the fork server's report).
            OSError: the fork server could not be started or reached.
        """
        request = json.dumps({"argv": list(argv), "cwd": str(cwd), "env": dict(env)}).encode()
        if len(request) > MAX_REQUEST_BYTES:
            raise RequestTooLargeError(errno.EMSGSIZE, f"a {len(request):,}-byte request to a fork server")
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                self._send(request, [stdin, stdout, stderr, theirs.fileno()])
            theirs.close()
            answer = mine.recv(_REPLY_BYTES)
            if not answer:
                raise OSError("the fork server stopped before starting the program")
            reply: dict[str, Any] = json.loads(answer)
            if "error" in reply:
                failure = ForkServerError(reply.get("errno") or 0, reply["error"])
                failure.exec_failed = bool(reply.get("exec_failed"))
                raise failure
        except BaseException:
            theirs.close()
            mine.close()
            raise
        if self._cpu_limit is not None and reply["cpu"] > self._cpu_limit * _CPU_SHARE_BEFORE_RETIRING:
            self.retire()
        return ServedProgram(int(reply["pid"]), mine, local=not self.profile.sandbox)

    @property
    def pid(self) -> int | None:
        """The server process's pid, or ``None`` before it starts (or once it retired)."""
        process = self._process
        return process.pid if process is not None else None

    def retire(self) -> None:
        """Start nothing more here; the process exits once its programs have ended."""
        with self._lock:
            self.retiring = True
            control, self._control, self._process = self._control, None, None
        if control is not None:
            with contextlib.suppress(OSError):
                socket.send_fds(control, [json.dumps({"retire": True}).encode()], [])
            control.close()  # after the retire message: the server drains instead of killing

    def close(self) -> None:
        """Stop the server now: it kills whatever it still runs (and reports their ends)."""
        with self._lock:
            self.retiring = True  # never started again
            control, self._control = self._control, None
            process, self._process = self._process, None
        if control is not None:
            control.close()
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)

    def _send(self, request: bytes, fds: list[int]) -> None:
        """Send one request, starting (or restarting) the server when needed; called under the lock."""
        if self.retiring:
            raise _RetiredError  # starting it again would leave a server no pool knows about
        gone = False
        for attempt in (1, 2):
            # A killed server's socket closes before its exit can be reaped: in that window poll()
            # still says it runs, so a send that found the socket gone is what replaces it.
            exited = self._process is not None and self._process.poll() is not None
            if gone or exited or self._control is None:
                self._start()
            assert self._control is not None
            try:
                socket.send_fds(self._control, [request], fds)
                return
            except OSError as exc:
                # Only a server that is gone is replaced: dropping a live one's socket would make it
                # kill every program it runs.
                gone = exc.errno in _SERVER_GONE or (
                    self._process is not None and self._process.poll() is not None
                )
                if not gone or attempt == 2:
                    raise

    def _start(self) -> None:
        """Start the server process (called under the lock), after releasing a dead one."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None and self._process.poll() is None:
            # Its socket is gone but its exit not yet reapable (it is dying): wait for it, so it is
            # reaped here rather than left a zombie. Not yet reaped, its pid cannot have been reused.
            self._process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(5)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # -I -S: none of the worker's Python environment; only the descriptor is passed down.
            # Its own session: a Ctrl-C or SIGTERM to the worker's group is the worker's to handle.
            self._process = subprocess.Popen(
                self._command(theirs.fileno()),
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env={"PATH": os.defpath},
                close_fds=True,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._control = mine

    def _command(self, control: int) -> list[str]:
        """The server's command line, serving the socket ``control``."""
        profile = self.profile
        arguments = [str(control), json.dumps(profile.limits)]
        if not profile.sandbox:
            return [sys.executable, "-I", "-S", str(_SERVER), *arguments]
        # Inside the sandbox only the interpreter's installation is bound, not this package: the
        # server's code goes on its command line.
        source = _SERVER.read_text(encoding="utf-8")
        return [*profile.sandbox, str(SERVER_INTERPRETER), "-I", "-S", "-c", source, *arguments]


class ForkServers:
    """The fork servers of one sandbox: one per profile in use, a few dozen at most."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: OrderedDict[ServerProfile, ForkServer] = OrderedDict()

    def spawn(
        self,
        argv: Sequence[str],
        *,
        profile: ServerProfile,
        cwd: Path,
        env: Mapping[str, str],
        stdin: int,
        stdout: int,
        stderr: int,
    ) -> ServedProgram:
        """Start ``argv`` through the server of ``profile`` (see :meth:`ForkServer.spawn`)."""
        while True:
            with self._lock:
                server = self._servers.get(profile)
                if server is None or server.retiring:
                    server = self._servers[profile] = ForkServer(profile)
                self._servers.move_to_end(profile)
                while len(self._servers) > _MAX_SERVERS:
                    _, oldest = self._servers.popitem(last=False)
                    oldest.retire()
            try:
                return server.spawn(argv, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr)
            except _RetiredError:
                continue  # another thread's spawn retired it meanwhile

    def server_pids(self) -> list[int]:
        """The pids of the servers running now, least recently used first."""
        with self._lock:
            servers = list(self._servers.values())
        return [pid for server in servers if (pid := server.pid) is not None]

    def close(self) -> None:
        """Stop every server; each kills what it still runs."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), OrderedDict()
        for server in servers:
            server.close()
