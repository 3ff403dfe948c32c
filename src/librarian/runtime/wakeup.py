"""Prompt wake-ups of the orchestrator across processes: PostgreSQL ``LISTEN``/``NOTIFY``.

The orchestrator polls the database (the truth) every ``idle_seconds``; on its own that makes a task
whose dependency just succeeded wait up to one poll interval. So whoever changes what the orchestrator
should act on -- the evaluator applying a result, a submitter storing a workflow, a user answering a
clarification or cancelling -- calls :func:`notify` inside the same transaction. PostgreSQL delivers
the notification only when that transaction commits, so a wake-up never announces a change that was
rolled back, and the orchestrator still reads everything from the database: the notification carries
no data. A notification lost with a dropped connection costs at most one poll interval, because the
poll stays as the fallback.

In one process (embedded mode, or ``librarian worker --role all``) the evaluator wakes the
orchestrator directly and no notification is needed; on SQLite :func:`notify` does nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import make_url, text
from sqlalchemy.orm import Session

logger = logging.getLogger(__name__)

CHANNEL = "librarian_runtime"
"""The PostgreSQL notification channel of the runtime."""

_RECONNECT_SECONDS = (0.1, 0.5, 1.0, 2.0, 5.0)


def notify(session: Session) -> None:
    """Ask every listening orchestrator for a pass once ``session``'s transaction commits.

    Does nothing on databases other than PostgreSQL (their orchestrators poll).
    """
    bind = session.get_bind()
    if bind.dialect.name == "postgresql":
        # Identical notifications of one transaction are folded into one by PostgreSQL.
        session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})


class PostgresListener:
    """A thread that ``LISTEN``s on :data:`CHANNEL` and calls ``on_notify`` for each notification.

    It owns one dedicated connection (``LISTEN`` needs a session of its own, outside any pool) and
    reconnects with backoff when it loses it; every (re)connection also calls ``on_notify`` once,
    because notifications sent while it was away are gone.

    Args:
        database_url: a SQLAlchemy PostgreSQL URL (``postgresql+psycopg://...``).
        on_notify: called from the listener thread; must be quick and thread-safe (``Event.set``).
    """

    def __init__(self, database_url: str, on_notify: Callable[[], None]) -> None:
        url = make_url(database_url).set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)
        self._on_notify = on_notify
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.connected = threading.Event()

    def start(self) -> None:
        """Start listening in a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="librarian-listener", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread; it notices within about a second."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        import psycopg  # the postgres extra; only reached with a PostgreSQL URL

        failures = 0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    self.connected.set()
                    failures = 0
                    self._on_notify()  # whatever happened while not listening
                    while not self._stop.is_set():
                        # Returns after a second without notifications, so ``stop`` is noticed.
                        for _ in connection.notifies(timeout=1.0):
                            self._on_notify()
            except psycopg.Error as exc:
                self.connected.clear()
                delay = _RECONNECT_SECONDS[min(failures, len(_RECONNECT_SECONDS) - 1)]
                failures += 1
                logger.warning(
                    "listening for runtime notifications failed (%s); retrying in %.1fs", exc, delay
                )
                self._stop.wait(delay)


def listener_for(database_url: str, on_notify: Callable[[], None]) -> PostgresListener | None:
    """A started :class:`PostgresListener` for a PostgreSQL URL, ``None`` for any other database."""
    if make_url(database_url).get_backend_name() != "postgresql":
        return None
    listener = PostgresListener(database_url, on_notify)
    listener.start()
    return listener
