"""Shared plumbing of CLI commands: the facade from the global options, output and errors."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from librarian.app import Librarian
from librarian.cli.answers import json_text
from librarian.config import Settings
from librarian.errors import LibrarianError

# Exit codes: 0 success, 1 failure, 2 usage error (Typer), 3 finished but some inputs failed.
EXIT_FAILURE = 1
EXIT_PARTIAL = 3

# The --json flag of every command that prints a result.
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]

stdout = Console()
stderr = Console(stderr=True)


class GlobalOptions:
    """Options given before the command (``librarian --home DIR search ...``)."""

    home: Path | None = None
    config: Path | None = None
    token: str | None = None


OPTIONS = GlobalOptions()


def load_settings() -> Settings:
    """Settings from ``--home``/``--config``, the environment and the config file."""
    return Settings.load(config_file=OPTIONS.config, home=OPTIONS.home)


@contextmanager
def librarian() -> Iterator[Librarian]:
    """Open the facade for one command; LibrarianErrors become a message on stderr and exit 1."""
    with handle_errors():
        lib = Librarian(load_settings())
        try:
            if OPTIONS.token:
                # Act as the token's user: every search, research and write is filtered by it.
                lib.default_principal = lib.identity.authenticate(OPTIONS.token)
            yield lib
        finally:
            lib.close()


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn a LibrarianError into ``error: ...`` on stderr and exit code 1."""
    try:
        yield
    except LibrarianError as exc:
        stderr.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False)
        if exc.hint:
            stderr.print(f"[dim]hint: {escape(exc.hint)}[/]", highlight=False)
        raise typer.Exit(EXIT_FAILURE) from exc


def print_json(data: Any) -> None:
    """Write ``data`` as JSON on stdout (no colour, no wrapping), for scripts and agents."""
    sys.stdout.write(json_text(data) + "\n")


@contextmanager
def progress_bar(description: str, enabled: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar on stderr naming the stage (files, queries...); yields ``(stage, done, total)``."""
    if not enabled or not stderr.is_terminal:
        yield lambda _stage, _done, _total: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"{description}: {stage}", completed=done, total=total)

        yield update
