"""The programs of the runs in progress, so that all of them can be killed at once."""

from __future__ import annotations

import threading

from librarian.runtime.program_io import Program

__all__ = ["ProcessGroups"]


class ProcessGroups:
    """The programs of the runs in progress, so they can all be killed at once (thread-safe).

    A program leaves the registry before it is reaped, and killing holds the same lock: a group id
    signalled here is always still a live group's, never a reused pid.

    A program already runs before it can be registered. So a run announces itself first
    (:meth:`starting`), and one that was starting when :meth:`kill_all` struck is killed as it
    registers: nothing slips between the start and the registry.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[Program] = set()
        self._starting = 0
        self._kills = 0  # how many times kill_all ran: a run starting across one is killed too
        self.closed = False

    def starting(self) -> int:
        """Announce a program about to start; its ticket goes to :meth:`add` or :meth:`not_started`."""
        with self._lock:
            self._starting += 1
            return self._kills

    def not_started(self) -> None:
        """The announced program could not be started."""
        with self._lock:
            self._starting -= 1

    def add(self, program: Program, ticket: int) -> bool:
        """Register a started program; killed at once instead if :meth:`kill_all` ran while it started."""
        with self._lock:
            self._starting -= 1
            if self.closed or ticket != self._kills:
                program.kill()
                return False
            self._live.add(program)
            return True

    def discard(self, program: Program) -> None:
        """Forget a program that is about to be reaped."""
        with self._lock:
            self._live.discard(program)

    def kill_all(self, *, close: bool = False) -> int:
        """SIGKILL every registered group (and, with ``close``, every later one); how many there were."""
        with self._lock:
            self.closed = self.closed or close
            self._kills += 1
            for program in self._live:
                program.kill()
            return len(self._live) + self._starting
