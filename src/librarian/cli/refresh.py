"""CLI commands that keep sources fresh: ``refresh``, ``refresh-interval`` and ``schedule``."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Annotated

import typer
from rich.markup import escape

from librarian.cli.common import (
    EXIT_PARTIAL,
    JsonOption,
    handle_errors,
    librarian,
    print_json,
    progress_bar,
    stdout,
)
from librarian.errors import InvalidInputError
from librarian.refresh import RefreshOutcome, refresh_sources
from librarian.refresh_schedule import Scheduler, set_refresh_interval

# 128 + SIGINT, as shells report a command stopped by Ctrl-C.
EXIT_INTERRUPTED = 130


def refresh(
    source: Annotated[
        str | None,
        typer.Argument(help="Source id, key prefix, URI or SDK name (all versions); default: every source."),
    ] = None,
    due: Annotated[bool, typer.Option("--due", help="Only the sources whose interval has passed.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Ingest sources again, incrementally: only changed files and entities are re-chunked.

    Folders, git refs and websites keep their version. CLIs, installed packages and OpenAPI documents
    report theirs again: after an upgrade the new version is ingested as a new source and the old
    version is kept. Exit code 3 when a source failed or was only partly ingested.
    """
    with librarian() as lib, progress_bar("refreshing", enabled=not as_json) as progress:
        outcomes = refresh_sources(lib, source, due_only=due, progress=progress)
    _print_outcomes(outcomes, as_json)
    if any(outcome.status in ("failed", "partial") for outcome in outcomes):
        raise typer.Exit(EXIT_PARTIAL)


def refresh_interval(
    source: Annotated[str, typer.Argument(help="Source id, key prefix, URI or SDK name (all versions).")],
    seconds: Annotated[
        str, typer.Argument(help="Seconds between refreshes (at least 60), or `default` for the setting's.")
    ],
    as_json: JsonOption = False,
) -> None:
    """Set how often `librarian schedule` refreshes a source."""
    with handle_errors():
        interval = _parse_interval(seconds)
    with librarian() as lib:
        updated = set_refresh_interval(lib, source, interval)
    if as_json:
        print_json([target.to_dict() for target in updated])
        return
    for target in updated:
        own = "" if target.own_interval else " (the default)"
        stdout.print(
            f"source {target.id} [bold]{escape(target.uri)}[/]: every {target.interval_seconds} s{own}",
            highlight=False,
        )


def schedule(
    poll_seconds: Annotated[
        float, typer.Option("--poll-seconds", min=0.1, help="How often to look for due sources.")
    ] = 60.0,
    once: Annotated[
        bool, typer.Option("--once", help="Refresh what is due now, print the outcomes, and exit.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Refresh each source when its interval has passed, until stopped (SIGTERM or Ctrl-C).

    One source is refreshed at a time; outcomes are logged on stderr. The first SIGTERM or SIGINT
    lets the source being refreshed finish and exits 0; a second one interrupts it (exit 130), which
    is safe: the next refresh completes what the interrupted one left.
    """
    _configure_logging()
    stop = threading.Event()
    with librarian() as lib:
        scheduler = Scheduler(lib, poll_seconds=poll_seconds, stop=stop)
        if once:
            outcomes = scheduler.run_once()
            _print_outcomes(outcomes, as_json)
            if any(outcome.status in ("failed", "partial") for outcome in outcomes):
                raise typer.Exit(EXIT_PARTIAL)
            return
        with _stop_on_signals(stop):
            try:
                scheduler.run()
            except KeyboardInterrupt:
                raise typer.Exit(EXIT_INTERRUPTED) from None


def _print_outcomes(outcomes: list[RefreshOutcome], as_json: bool) -> None:
    if as_json:
        print_json([outcome.to_dict() for outcome in outcomes])
        return
    if not outcomes:
        stdout.print("nothing to refresh", style="yellow")
    for outcome in outcomes:
        label = escape(" ".join(filter(None, [outcome.sdk_name, outcome.sdk_version])))
        head = f"source {outcome.source_id} [bold]{escape(outcome.uri)}[/] {label}: {outcome.status}"
        report = outcome.report
        if report is not None:
            head += (
                f" — {report['added']} added, {report['updated']} updated, {report['unchanged']} unchanged, "
                f"{report['deleted']} deleted, {report['failed']} failed; {report['chunks_written']} chunks "
                f"in {outcome.seconds:.1f} s"
            )
        stdout.print(head, highlight=False)
        if outcome.error is not None:
            stdout.print(f"   [red]{escape(str(outcome.error.get('message')))}[/]", highlight=False)
        if outcome.note:
            stdout.print(f"   [dim]{escape(outcome.note)}[/]", highlight=False)
        for problem in (report or {}).get("problems", []):
            stdout.print(f"   [yellow]skipped[/] {escape(problem['path'])}: {escape(problem['reason'])}")


def _parse_interval(text: str) -> int | None:
    if text.strip().lower() == "default":
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidInputError(
            f"the interval {text!r} is not a whole number of seconds",
            hint="e.g. 3600 for hourly, 86400 for daily, or `default`",
        ) from None


def _configure_logging() -> None:
    """Log lines with timestamps on stderr: the scheduler runs unattended, its log is its report."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("librarian")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """First SIGTERM/SIGINT: set ``stop`` (finish the current source). Second: interrupt at once."""

    def handle(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        logging.getLogger("librarian").info(
            "%s received: stopping after the current source", signal.Signals(signum).name
        )
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
