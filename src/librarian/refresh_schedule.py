"""The refresh schedule: how often each source is refreshed, and the loop that refreshes what is due
(``librarian refresh-interval``, ``librarian schedule``).

A source is due ``refresh_interval_seconds`` (its own, else the setting) after its last ingest; see
:mod:`librarian.refresh` for what a refresh does.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from sqlalchemy import select

from librarian.app import Librarian
from librarian.errors import InvalidInputError
from librarian.knowledge.access import Principal, Scope
from librarian.refresh import (
    MIN_INTERVAL_SECONDS,
    RefreshOutcome,
    RefreshTarget,
    all_sources,
    due_sources,
    refresh_targets,
    select_sources,
)
from librarian.storage.models import Source

logger = logging.getLogger(__name__)


def set_refresh_interval(
    lib: Librarian, selector: str, seconds: int | None, principal: Principal | None = None
) -> list[RefreshTarget]:
    """Give the sources ``selector`` names their own refresh interval; ``None`` restores the default.

    Only sources ``principal`` may refresh are selected (default: every source, as on the server's
    CLI); setting an interval needs the ``write`` scope.

    Returns the updated sources.

    Raises:
        InvalidInputError: ``seconds`` below :data:`~librarian.refresh.MIN_INTERVAL_SECONDS` (the
            scheduler is not a busy loop).
        NotFoundError: nothing ``principal`` may refresh matches ``selector``.
        ForbiddenError: ``principal``'s token lacks the ``write`` scope.
    """
    if principal is not None:
        principal.require(Scope.WRITE, "setting a refresh interval")
    if seconds is not None and seconds < MIN_INTERVAL_SECONDS:
        raise InvalidInputError(
            f"a refresh interval of {seconds} s is too short",
            hint=f"use at least {MIN_INTERVAL_SECONDS} seconds",
        )
    ids = {target.id for target in select_sources(lib, selector, principal)}
    with lib.sessions.begin() as session:
        for row in session.scalars(select(Source).where(Source.id.in_(ids))):
            row.refresh_interval_seconds = seconds
    return [target for target in all_sources(lib, principal) if target.id in ids]


class Scheduler:
    """Refreshes due sources one at a time until ``stop`` is set.

    Each round refreshes every source due at that moment, then waits ``poll_seconds`` (or less, when
    ``stop`` is set meanwhile). Every outcome is logged; no exception ends the loop.

    Example:
        >>> stop = threading.Event()
        >>> Scheduler(lib, poll_seconds=60, stop=stop).run()  # doctest: +SKIP
    """

    def __init__(self, lib: Librarian, *, poll_seconds: float, stop: threading.Event) -> None:
        """Schedule refreshes over ``lib``, looking for due sources every ``poll_seconds``."""
        if poll_seconds <= 0:
            raise InvalidInputError(f"the poll interval must be positive, got {poll_seconds}")
        self._lib = lib
        self._poll_seconds = poll_seconds
        self._stop = stop
        self.rounds = 0

    def run(self) -> None:
        """Loop until ``stop`` is set: refresh what is due, wait, repeat."""
        logger.info("scheduler started: looking for due sources every %s s", self._poll_seconds)
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # the scheduler's top-level handler: e.g. the database was unreachable
                logger.exception("a refresh round failed; trying again in %s s", self._poll_seconds)
            self._stop.wait(self._poll_seconds)
        logger.info("scheduler stopped after %d rounds", self.rounds)

    def run_once(self, now: datetime | None = None) -> list[RefreshOutcome]:
        """Refresh every source due at ``now`` (default: the current time); return the outcomes."""
        self.rounds += 1
        due = due_sources(self._lib, now)
        if due:
            logger.info("%d source(s) due", len(due))
        return refresh_targets(self._lib, due, on_outcome=log_outcome, stop=self._stop)


def log_outcome(outcome: RefreshOutcome) -> None:
    """Log one refresh outcome: a line per source, a warning when it failed or was partial."""
    label = " ".join(filter(None, [outcome.sdk_name, outcome.sdk_version])) or "-"
    if outcome.status == "failed":
        message = (outcome.error or {}).get("message", "")
        logger.warning("source %d %s (%s): failed: %s", outcome.source_id, outcome.uri, label, message)
        return
    report = outcome.report or {}
    level = logging.WARNING if outcome.status == "partial" else logging.INFO
    logger.log(
        level,
        "source %d %s (%s): %s; %s added, %s updated, %s unchanged, %s deleted, %s failed in %.1f s%s",
        outcome.source_id,
        outcome.uri,
        label,
        outcome.status,
        report.get("added", 0),
        report.get("updated", 0),
        report.get("unchanged", 0),
        report.get("deleted", 0),
        report.get("failed", 0),
        outcome.seconds,
        f"; {outcome.note}" if outcome.note else "",
    )
