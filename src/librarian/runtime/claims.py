"""An executor's claims of the attempts it is handed: the one database write before a task runs.

On PostgreSQL a claim and its ``started`` event are one statement
(:data:`~librarian.runtime.attempt_claims.CLAIM_AND_LOG`), atomic on its own. :class:`Claims` runs it in
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
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import Compiled
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool, PoolProxiedConnection

from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.runtime import attempt_claims
from librarian.runtime.contracts import TaskSpec
from librarian.runtime.store import as_uuid

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
        self._many_statement: Compiled | None = None
        self._local = threading.local()
        self._kept: set[PoolProxiedConnection] = set()  # every thread's, so that ``close`` ends them
        self._lock = threading.Lock()
        bind = sessions.kw.get("bind")
        if isinstance(bind, Engine) and bind.dialect.name == "postgresql":
            # Connections are kept by the threads themselves (no pool, never pinged): a broken one
            # fails its statement, which is then retried on a new one.
            self._engine = create_engine(bind.url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
            self._statement = attempt_claims.CLAIM_AND_LOG.compile(dialect=self._engine.dialect)
            self._many_statement = attempt_claims.CLAIM_MANY_AND_LOG.compile(dialect=self._engine.dialect)

    @property
    def sessions(self) -> sessionmaker[Session]:
        """The session factory of the runtime database."""
        return self._sessions

    @property
    def lease_seconds(self) -> float:
        """The lease a claim takes."""
        return self._lease_seconds

    def claim(self, spec: TaskSpec, *, worker: str) -> bool:
        """Claim ``spec``'s attempt for ``worker`` (``in_progress``, with a lease and a ``started`` event).

        Returns ``False``, after logging why in the event log, when the attempt is no longer current.
        """
        if self._statement is None:  # not PostgreSQL
            with self._sessions.begin() as session:
                return attempt_claims.mark_in_progress(
                    session, spec, worker=worker, lease_seconds=self._lease_seconds
                )
        if self._claim_in_one_statement(spec, worker):
            return True
        with self._sessions.begin() as session:
            attempt_claims.explain_unclaimed(session, spec, worker=worker)
        return False

    def claim_many(self, specs: Sequence[TaskSpec], *, worker: str) -> set[tuple[str, int]]:
        """Claim the attempts of ``specs`` for ``worker`` together; the ``(task_id, attempt)`` claimed.

        On PostgreSQL one statement claims them all and writes their ``started`` events (one round
        trip and one commit for an executor's whole batch); elsewhere they are claimed one by one.
        Those not claimed get their reason in the event log, as with :meth:`claim`.
        """
        if not specs:
            return set()
        if self._many_statement is None:  # not PostgreSQL
            return {(spec.task_id, spec.attempt) for spec in specs if self.claim(spec, worker=worker)}
        claimed = self._claim_many_in_one_statement(specs, worker)
        for spec in specs:
            if (spec.task_id, spec.attempt) not in claimed:
                try:  # best effort: the claims are committed and must reach the caller
                    with self._sessions.begin() as session:
                        attempt_claims.explain_unclaimed(session, spec, worker=worker)
                except Exception:
                    logger.warning("logging why task %s was not claimed failed", spec.task_id, exc_info=True)
        return claimed

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
        rows, retried = self._execute(
            statement,
            lambda: attempt_claims.claim_parameters(spec, worker=worker, lease_seconds=self._lease_seconds),
            spec.task_id,
        )
        if rows:
            return True
        if not retried:
            return False
        # A retry: the first try may have committed before its answer was lost.
        with self._sessions() as session:
            return attempt_claims.holds_attempt(session.connection(), spec, worker=worker)

    def _claim_many_in_one_statement(self, specs: Sequence[TaskSpec], worker: str) -> set[tuple[str, int]]:
        statement = self._many_statement
        assert statement is not None
        rows, retried = self._execute(
            statement,
            lambda: attempt_claims.claim_many_parameters(
                specs, worker=worker, lease_seconds=self._lease_seconds
            ),
            f"{len(specs)} tasks",
        )
        # Keyed by attempt too: of two attempts of one task in a batch, only the current is claimed.
        won = {(uuid.UUID(str(task_id)), int(attempt)) for task_id, attempt in rows}
        claimed = {
            (spec.task_id, spec.attempt)
            for spec in specs
            if (as_uuid(spec.task_id, "task id"), spec.attempt) in won
        }
        if retried:  # the first try may have committed before its answer was lost
            with self._sessions() as session:
                connection = session.connection()
                for spec in specs:
                    if attempt_claims.holds_attempt(connection, spec, worker=worker):
                        claimed.add((spec.task_id, spec.attempt))
        return claimed

    def _execute(
        self, statement: Compiled, values: Callable[[], dict[str, Any]], what: str
    ) -> tuple[list[Any], bool]:
        """Run a claim statement on this thread's kept connection: its rows, and whether it was retried.

        A connection found broken is replaced and the statement tried once more (claims are
        compare-and-sets, so a second try can never claim twice), with ``values`` taken again: a
        retry after a long hang must not take a lease that has already run out.
        """
        sql = statement.string
        for attempt in (1, 2):
            bound = statement.construct_params(values())
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
                    return cursor.fetchall(), attempt == 2
            except Exception:
                if not (driver.broken or driver.closed):
                    raise  # a failed statement, not a lost connection: the caller's to handle
                # The connection died (a database restart, an idle-connection reaper): retry once on
                # a new one. A second failure is the caller's to handle.
                self._discard(kept)
                if attempt == 2:
                    raise
                logger.warning("claiming %s: database connection lost; retrying", what)
        raise AssertionError("unreachable: the loop returns or raises")

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


class Claimer(Protocol):
    """What an executor claims its attempts through: :class:`Claims` or :class:`BatchClaims`."""

    def claim(self, spec: TaskSpec, *, worker: str) -> bool:
        """Whether ``worker`` may run ``spec``'s attempt (it holds its lease)."""
        ...


class BatchClaims:
    """The claims of one executor thread that runs batches: taken together, used as each task starts.

    :meth:`claim_batch` claims every attempt of a batch in one statement before the first one runs.
    :meth:`claim` then answers for each task as it starts. A task that waited behind its batch-mates
    for more than a third of its lease has its lease renewed first, and does not run if that fails:
    its lease ran out meanwhile and the orchestrator dispatched it again to a free executor, which is
    how a long task does not hold the rest of its batch back for good. What a stopping executor
    claimed but never started is handed back (:meth:`release_unstarted`).
    """

    def __init__(self, claims: Claims, *, worker: str) -> None:
        self._claims = claims
        self._worker = worker
        self._unstarted: dict[tuple[str, int], TaskSpec] = {}
        self._claimed_at = 0.0

    def claim_batch(self, specs: Sequence[TaskSpec]) -> None:
        """Claim the attempts of ``specs`` (those not claimed have their reason in the event log).

        Malformed ones (a task id that is not a UUID, an attempt that is not a number) are left out;
        :meth:`claim` refuses them with :class:`~librarian.errors.InvalidInputError`, so the executor
        drops their messages and runs the rest.
        """
        valid = [spec for spec in specs if _well_formed(spec)]
        self._unstarted = {}
        # Before the claim: a claim that hung counts against the time its tasks may start unchecked.
        self._claimed_at = time.monotonic()
        claimed = self._claims.claim_many(valid, worker=self._worker)
        self._unstarted = {
            (spec.task_id, spec.attempt): spec for spec in valid if (spec.task_id, spec.attempt) in claimed
        }

    def claim(self, spec: TaskSpec, *, worker: str) -> bool:
        """Whether ``spec``'s attempt was claimed with the batch and is still held; once per attempt.

        Raises:
            InvalidInputError: the message's task id is not a UUID.
        """
        as_uuid(spec.task_id, "task id")
        if self._unstarted.pop((spec.task_id, spec.attempt), None) is None:
            return False  # not claimed with the batch (its reason is logged), or a duplicate in it
        lease = self._claims.lease_seconds
        if time.monotonic() - self._claimed_at < lease / 3:
            return True  # the claim's lease has at least two thirds left; the heartbeat renews it next
        # An expired lease is not renewed: the orchestrator may be dispatching the task again.
        with self._claims.sessions.begin() as session:
            return attempt_claims.renew_lease(
                session, spec, worker=self._worker, lease_seconds=lease, unexpired=True
            )

    def release_unstarted(self) -> None:
        """Hand back the attempts claimed with the batch that never started (the executor is stopping)."""
        unstarted, self._unstarted = list(self._unstarted.values()), {}
        for spec in unstarted:
            try:
                with self._claims.sessions.begin() as session:
                    attempt_claims.release_claim(
                        session, spec, worker=self._worker, lease_seconds=self._claims.lease_seconds
                    )
            except Exception:  # its lease expires instead, and it is dispatched again then
                logger.warning("handing back task %s failed", spec.task_id, exc_info=True)


def _well_formed(spec: TaskSpec) -> bool:
    """Whether ``spec`` can be claimed at all: a UUID task id and an integer attempt."""
    try:
        as_uuid(spec.task_id, "task id")
    except InvalidInputError:
        return False
    return isinstance(spec.attempt, int)
