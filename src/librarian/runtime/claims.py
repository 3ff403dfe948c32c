"""An executor's claims of the attempts it is handed: the one database write before a task runs.

On PostgreSQL a claim and its ``started`` event are one statement
(:data:`~librarian.runtime.attempts.CLAIM_AND_LOG`), atomic on its own. :class:`Claims` runs it in
autocommit on a driver connection each executor thread keeps between tasks, not pinged before each
use, compiled once (and prepared server-side by psycopg): one round trip per task instead of four (the
pool's pre-ping, ``BEGIN``, the statement, ``COMMIT``), and none of SQLAlchemy's per-execution work,
which together had been a third of an executor's CPU for a no-op task. A connection found broken is
replaced and the claim tried once more; the claim is a compare-and-set, so trying it twice can never
claim twice.

A message that is not claimed (a duplicate, a superseded attempt, a cancelled workflow) takes the slow
path through a session, which writes *why* to the event log. On SQLite every claim takes a session:
writes are serialised there anyway, and SQLite has no ``UPDATE`` inside ``WITH``.
"""

from __future__ import annotations

import json
import logging
import threading

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import Compiled
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool, PoolProxiedConnection

from librarian.errors import BackendUnavailableError
from librarian.runtime import attempts
from librarian.runtime.contracts import TaskSpec

logger = logging.getLogger(__name__)


class Claims:
    """Claims attempts for the executors of one worker (thread-safe: each thread keeps its connection).

    Args:
        sessions: session factory of the runtime database.
        lease_seconds: the lease a claim takes (renewed by the executor's heartbeat).
    """

    def __init__(self, sessions: sessionmaker[Session], *, lease_seconds: float) -> None:
        self._sessions = sessions
        self._lease_seconds = lease_seconds
        self._engine: Engine | None = None
        self._statement: Compiled | None = None
        self._local = threading.local()
        self._kept: set[PoolProxiedConnection] = set()  # every thread's, so that ``close`` ends them
        self._lock = threading.Lock()
        bind = sessions.kw.get("bind")
        if isinstance(bind, Engine) and bind.dialect.name == "postgresql":
            # Connections are kept by the threads themselves (no pool, never pinged): a broken one
            # fails its statement, which is then retried on a new one.
            self._engine = create_engine(bind.url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
            self._statement = attempts.CLAIM_AND_LOG.compile(dialect=self._engine.dialect)

    def claim(self, spec: TaskSpec, *, worker: str) -> bool:
        """Claim ``spec``'s attempt for ``worker`` (``in_progress``, with a lease and a ``started`` event).

        Returns ``False``, after logging why in the event log, when the attempt is no longer current.
        """
        if self._statement is None:  # not PostgreSQL
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
        """Close the kept connections (the executors have stopped); later claims raise
        :class:`~librarian.errors.BackendUnavailableError` on PostgreSQL."""
        with self._lock:
            kept, self._kept = self._kept, set()
            self._engine = None
        for connection in kept:
            connection.close()

    def _claim_in_one_statement(self, spec: TaskSpec, worker: str) -> bool:
        statement = self._statement
        assert statement is not None
        sql = statement.string
        for attempt in (1, 2):
            bound = statement.construct_params(
                attempts.claim_parameters(spec, worker=worker, lease_seconds=self._lease_seconds)
            )
            assert bound is not None
            # The statement's own constants included; the event's data goes as text, cast to JSONB.
            params = {**bound, "p_data": json.dumps(bound["p_data"])}
            kept = self._connection()
            driver = kept.driver_connection  # psycopg's: its execute is all the work a claim needs
            if driver is None:  # closed by ``close`` while this thread was still running
                raise BackendUnavailableError("the executors' claims are closed")
            try:
                with driver.cursor() as cursor:
                    # Prepared server-side after a few runs, as psycopg does with every statement.
                    cursor.execute(sql, params)
                    if cursor.fetchone() is not None:
                        return True
            except Exception:
                if not (driver.broken or driver.closed):
                    raise  # a failed statement, not a lost connection: the caller's to handle
                # The connection died (a database restart, an idle-connection reaper): retry once on
                # a new one. A second failure is the caller's to handle.
                self._discard(kept)
                if attempt == 2:
                    raise
                logger.warning("claiming task %s: database connection lost; retrying", spec.task_id)
                continue
            # A retry: the first try may have committed before its answer was lost.
            if attempt == 1:
                return False
            with self._sessions() as session:
                return attempts.holds_attempt(session.connection(), spec, worker=worker)
        return False  # unreachable: the loop returns or raises

    def _connection(self) -> PoolProxiedConnection:
        """This thread's kept connection, opened on first use."""
        kept: PoolProxiedConnection | None = getattr(self._local, "connection", None)
        if kept is None:
            with self._lock:
                if self._engine is None:
                    raise BackendUnavailableError("the executors' claims are closed")
                kept = self._engine.raw_connection()
                self._kept.add(kept)
            self._local.connection = kept
        return kept

    def _discard(self, kept: PoolProxiedConnection) -> None:
        self._local.connection = None
        with self._lock:
            self._kept.discard(kept)
        kept.invalidate()
