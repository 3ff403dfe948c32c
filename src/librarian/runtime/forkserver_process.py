"""A fork server's own process: starts sandboxed programs for a worker, all under the same limits.

Run as ``python -I -S forkserver_process.py FD LIMITS`` by
:class:`librarian.runtime.forkserver.ForkServer`, so it imports the standard library only. It first
sets ``LIMITS`` (a JSON list of ``[resource, soft, hard]``) on itself, with hard limits it can never
raise again; every program it starts inherits them. So nothing runs between ``fork`` and ``exec``
(``subprocess`` uses ``vfork``), and no launcher program is executed first: a no-op task costs about
a millisecond of CPU less than through ``prlimit``. The server is single-threaded and serves one limit
profile; a worker keeps one per profile in use.

Protocol, over the ``SOCK_SEQPACKET`` socket ``FD`` (one JSON message per packet):

- the worker sends ``{"argv", "cwd", "env"}`` with four file descriptors: the program's stdin, stdout
  and stderr, and the run's own reply socket; or ``{"retire": true}``: start nothing more, and exit
  once the programs running have ended;
- on the reply socket the server answers ``{"pid": N, "cpu": S}`` (``S``: the server's own CPU
  seconds, so the worker can retire it long before its CPU limit) or ``{"error": text, "errno": N,
  "exec_failed": bool}`` when the program could not start; then ``{"exit": code}`` once the program
  has exited, its process group has been killed (background children do not outlive their task)
  and it has been reaped;
- the worker may send ``kill`` on the reply socket (or close it): the process group is killed. Only
  the server reaps, so it never signals a group whose leader's pid was reused;
- when the worker goes away or closes the server (the control socket closes), every running group is
  killed, reaped and reported, and the server exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass

_MAX_REQUEST = 1 << 20  # argv and environment of one run
_FDS_PER_REQUEST = 4


@dataclass
class _Run:
    process: subprocess.Popen[bytes]
    reply: socket.socket
    pidfd: int


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already empty
        os.killpg(pgid, signal.SIGKILL)


def _send(reply: socket.socket, message: dict[str, object]) -> None:
    with contextlib.suppress(OSError):  # the worker gave up on this run
        reply.send(json.dumps(message).encode())


class _Server:
    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.poller = select.poll()
        self.poller.register(control, select.POLLIN)
        self.by_pidfd: dict[int, _Run] = {}
        self.by_reply: dict[int, _Run] = {}
        self.retired = False

    def serve(self) -> None:
        while not (self.retired and not self.by_pidfd):
            for fd, _ in self.poller.poll():
                if fd == self.control.fileno():
                    if self._accept():
                        continue
                    if not self.retired:
                        self._kill_everything()
                        return
                    # Retired: the runs still going end on their own, or when their worker closes
                    # their reply sockets (it exited), which kills them.
                    self.poller.unregister(self.control)
                elif fd in self.by_pidfd:
                    self._finish(self.by_pidfd[fd])
                elif fd in self.by_reply:
                    self._on_reply(self.by_reply[fd])

    def _accept(self) -> bool:
        """Handle one request; ``False`` once the worker has gone."""
        try:
            data, fds, _, _ = socket.recv_fds(self.control, _MAX_REQUEST, _FDS_PER_REQUEST)
        except OSError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        if len(fds) != _FDS_PER_REQUEST:
            for fd in fds:
                os.close(fd)
            if json.loads(data).get("retire"):
                self.retired = True
            return True
        stdin, stdout, stderr, reply_fd = fds
        reply = socket.socket(fileno=reply_fd)
        try:
            request = json.loads(data)
            if self.retired:
                raise OSError("the fork server is retiring")
            process = subprocess.Popen(
                request["argv"],
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                cwd=request["cwd"],
                env=request["env"],
                start_new_session=True,  # its own process group, killed as a whole
                close_fds=True,
            )
        except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError) as exc:
            errno = exc.errno if isinstance(exc, OSError) else None
            # subprocess names the program only when its exec failed (not when fork did): that
            # failure is the task's (a missing or non-executable file), not the machine's.
            exec_failed = isinstance(exc, OSError) and exc.filename is not None
            _send(reply, {"error": str(exc), "errno": errno, "exec_failed": exec_failed})
            reply.close()
            return True
        finally:
            for fd in (stdin, stdout, stderr):
                os.close(fd)  # the program has its own copies
        try:
            pidfd = os.pidfd_open(process.pid)
        except OSError as exc:  # out of descriptors: this run cannot be watched, so it cannot run
            _kill_group(process.pid)
            process.wait()
            _send(reply, {"error": f"cannot watch the program: {exc}", "errno": exc.errno})
            reply.close()
            return True
        run = _Run(process, reply, pidfd)
        self.by_pidfd[run.pidfd] = run
        self.by_reply[reply.fileno()] = run
        self.poller.register(run.pidfd, select.POLLIN)
        self.poller.register(reply, select.POLLIN)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _send(reply, {"pid": process.pid, "cpu": usage.ru_utime + usage.ru_stime})
        return True

    def _on_reply(self, run: _Run) -> None:
        """The worker asked to kill the run (or gave up on it, closing its socket)."""
        try:
            message = run.reply.recv(16)
        except OSError:
            message = b""
        if message == b"kill" or not message:
            _kill_group(run.process.pid)  # not reaped yet: the group id is still this run's
        if not message:
            self.poller.unregister(run.reply)
            del self.by_reply[run.reply.fileno()]

    def _finish(self, run: _Run) -> None:
        """The program exited: kill what it left running, reap it, report its exit code."""
        _kill_group(run.process.pid)
        code = run.process.wait()
        self.poller.unregister(run.pidfd)
        del self.by_pidfd[run.pidfd]
        os.close(run.pidfd)
        if self.by_reply.pop(run.reply.fileno(), None) is not None:
            self.poller.unregister(run.reply)
            _send(run.reply, {"exit": code})
        run.reply.close()

    def _kill_everything(self) -> None:
        """The worker is gone or closed this server: kill every program, reap it, report its end."""
        for run in list(self.by_pidfd.values()):
            _kill_group(run.process.pid)
        for run in list(self.by_pidfd.values()):
            code = run.process.wait()
            if self.by_reply.pop(run.reply.fileno(), None) is not None:
                # Reported, so no thread of the worker signals the group of a reaped program.
                _send(run.reply, {"exit": code})
            run.reply.close()


def main() -> None:
    """Set the limits given as the second argument, then serve the socket of the first.

    Signal dispositions stay the defaults: an ignored signal would stay ignored in every program
    started from here. The server runs in a session of its own, so a Ctrl-C or a SIGTERM sent to the
    worker's process group does not reach it; it ends when the worker has gone.
    """
    control = socket.socket(fileno=int(sys.argv[1]))
    for which, soft, hard in json.loads(sys.argv[2]):
        resource.setrlimit(which, (soft, hard))
    _Server(control).serve()


if __name__ == "__main__":
    main()
