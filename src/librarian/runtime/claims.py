"""An executor's claims of the attempts it is handed: the one database write before a task runs.

On PostgreSQL a claim and its ``started`` event are one statement
(:data:`~librarian.runtime.attempts.CLAIM_AND_LOG`), atomic on its own. :class:`Claims` runs it in
autocommit on a connection of its own, kept between tasks and not pinged before each use: one round
trip per task instead of four (the pool's pre-ping, ``BEGIN``, the statement, ``COMMIT``), which was a
quarter of an executor's CPU for a no-op task. A connection found broken is replaced and the claim
tried once more; the claim is a compare-and-set, so trying it twice can never claim twice.

A message that is not claimed (a duplicate, a superseded attempt, a cancelled workflow) takes the slow
path through a session, which writes *why* to the event log. On SQLite every claim takes a session:
writes are serialised there anyway, and SQLite has no ``UPDATE`` inside ``WITH``.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from librarian.runtime import attempts
from librarian.runtime.contracts import TaskSpec

logger = logging.getLogger(__name__)


class Claims:
    """Claims attempts for the executors of one worker (thread-safe: a kept connection per claim in flight).

    Args:
        sessions: session factory of the runtime database.
        lease_seconds: the lease a claim takes (renewed by the executor's heartbeat).
        connections: connections kept (PostgreSQL), one per executor thread that claims.
    """

    def __init__(
        self, sessions: sessionmaker[Session], *, lease_seconds: float, connections: int = 1
    ) -> None:
        self._sessions = sessions
        self._lease_seconds = lease_seconds
        self._engine: Engine | None = None
        self._lock = threading.Lock()
        bind = sessions.kw.get("bind")
        if isinstance(bind, Engine) and bind.dialect.name == "postgresql":
            # The executor threads' own small pool, never pinged: a broken connection fails its
            # statement, which is then retried on a new one.
            self._engine = create_engine(
                bind.url,
                isolation_level="AUTOCOMMIT",
                pool_size=connections,
                max_overflow=0,
                pool_pre_ping=False,
            )

    def claim(self, spec: TaskSpec, *, worker: str) -> bool:
        """Claim ``spec``'s attempt for ``worker`` (``in_progress``, with a lease and a ``started`` event).

        Returns ``False``, after logging why in the event log, when the attempt is no longer current.
        """
        if self._engine is None:
            with self._sessions.begin() as session:
                return attempts.mark_in_progress(
                    session, spec, worker=worker, lease_seconds=self._lease_seconds
                )
        if self._claim_in_one_statement(spec, worker):
            return True
        with self._sessions.begin() as session:
            attempts.explain_unclaimed(session, spec, worker=worker)
        return False

    def close(self) -> None:
        """Close the kept connections (the executors have stopped)."""
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()

    def _claim_in_one_statement(self, spec: TaskSpec, worker: str) -> bool:
        engine = self._engine
        assert engine is not None
        for attempt in (1, 2):
            params = attempts.claim_parameters(spec, worker=worker, lease_seconds=self._lease_seconds)
            try:
                with engine.connect() as connection:
                    if connection.execute(attempts.CLAIM_AND_LOG, params).first() is not None:
                        return True
                    # A retry: the first try may have committed before its answer was lost.
                    return attempt == 2 and attempts.holds_attempt(connection, spec, worker=worker)
            except DBAPIError as exc:
                # The pool has dropped the dead connection (and its idle siblings): retry once on a
                # new one. Anything else, or a second failure, is the caller's to handle.
                if not exc.connection_invalidated or attempt == 2:
                    raise
                logger.warning("claiming task %s: database connection lost; retrying", spec.task_id)
        return False  # unreachable: the loop returns or raises
