"""Which process drives an execution: a lease in the execution's row.

One process drives an execution at a time. It claims the row (``runner``, ``lease_until``) before
running steps, renews the lease while a long step runs and releases it when it stops. A run whose
driver died is free once the lease expires, or at once when the driver was a process of this
machine that no longer exists (an embedded run killed with ``kill -9``).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import ConflictError, NotFoundError
from librarian.runbooks.models import RunbookExecution
from librarian.storage.models import as_utc, utcnow

LEASE_SECONDS = 60.0
_RUNNING = "running"


def runner_name() -> str:
    """This process, as a lease holder (``host:pid``)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class ExecutionLease:
    """Claims, renews and releases executions for the process named ``name``."""

    def __init__(self, sessions: sessionmaker[Session], name: str | None = None) -> None:
        self._sessions = sessions
        self.name = name or runner_name()

    def claim(self, execution_id: str) -> None:
        """Take the execution for this process.

        Raises:
            NotFoundError: no such execution.
            ConflictError: a live process holds it.
        """
        now = utcnow()
        until = now + timedelta(seconds=LEASE_SECONDS)
        with self._sessions.begin() as session:
            claimed = session.execute(
                update(RunbookExecution)
                .where(
                    RunbookExecution.id == execution_id,
                    or_(
                        RunbookExecution.runner.is_(None),
                        RunbookExecution.runner == self.name,
                        RunbookExecution.lease_until < now,
                    ),
                )
                .values(runner=self.name, lease_until=until)
            ).rowcount  # type: ignore[attr-defined]
            if claimed:
                return
            holder = session.scalar(
                select(RunbookExecution.runner).where(RunbookExecution.id == execution_id)
            )
            if holder is None and session.get(RunbookExecution, execution_id) is None:
                raise NotFoundError(f"no runbook execution {execution_id}")
            if holder is not None and dead_here(holder):
                # Killed on this machine: its lease need not run out before the run goes on.
                session.execute(
                    update(RunbookExecution)
                    .where(RunbookExecution.id == execution_id, RunbookExecution.runner == holder)
                    .values(runner=self.name, lease_until=until)
                )
                return
            raise ConflictError(
                f"execution {execution_id} is being run by {holder}",
                hint=f"wait, or resume it once that process has stopped (leases last {LEASE_SECONDS:g}s)",
            )

    def renew(self) -> None:
        """Extend the leases of the running executions this process drives."""
        with self._sessions.begin() as session:
            session.execute(
                update(RunbookExecution)
                .where(RunbookExecution.runner == self.name, RunbookExecution.status == _RUNNING)
                .values(lease_until=utcnow() + timedelta(seconds=LEASE_SECONDS))
            )

    def release(self, execution_id: str) -> None:
        """Let the execution go (another process, or a later call, may drive it)."""
        with self._sessions.begin() as session:
            session.execute(
                update(RunbookExecution)
                .where(RunbookExecution.id == execution_id, RunbookExecution.runner == self.name)
                .values(runner=None, lease_until=None)
            )

    def interrupted(self) -> list[str]:
        """Running ``auto`` executions no live process drives: none holds them, the holder's lease
        expired, or the holder was a process of this machine that no longer runs."""
        now = utcnow()
        with self._sessions() as session:
            rows = session.execute(
                select(RunbookExecution.id, RunbookExecution.runner, RunbookExecution.lease_until).where(
                    RunbookExecution.status == _RUNNING, RunbookExecution.mode == "auto"
                )
            ).all()
        return [
            identifier
            for identifier, runner, until in rows
            if runner is None or (until is not None and as_utc(until) < now) or dead_here(runner)
        ]


def dead_here(holder: str) -> bool:
    """Whether ``holder`` (``host:pid``) names a process of this machine that no longer runs."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False
