"""CLI commands of the connectors: ``ingest-cli``, ``ingest-package``, ``ingest-openapi``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from librarian.cli.common import EXIT_PARTIAL, librarian, print_json, progress_bar, stderr, stdout
from librarian.ingest.pipeline import IngestReport
from librarian.ingest.sources.cli_help import DEFAULT_MAX_COMMANDS, DEFAULT_MAX_DEPTH

JsonOption = Annotated[bool, typer.Option("--json", help="Print the ingest report as JSON.")]


def _report(report: IngestReport, as_json: bool) -> None:
    if as_json:
        print_json(report.to_dict())
    else:
        stdout.print(
            f"[bold]{escape(report.uri)}[/]: {report.status} — {report.files_seen} entities, "
            f"{report.added} added, {report.updated} updated, {report.unchanged} unchanged, "
            f"{report.deleted} deleted, {len(report.problems)} skipped; {report.chunks_written} chunks "
            f"in {report.seconds:.1f} s",
            highlight=False,
        )
        for problem in report.problems:
            stderr.print(f"[yellow]skipped[/] {escape(problem['path'])}: {escape(problem['reason'])}")
    if report.problems:
        raise typer.Exit(EXIT_PARTIAL)


def ingest_cli(
    command: Annotated[str, typer.Argument(help="The tool to document (aws, git, pip, ...).")],
    sdk: Annotated[str, typer.Option("--sdk", help="SDK name to file it under.")],
    scope: Annotated[
        list[str] | None, typer.Option("--scope", help="Only this top-level subcommand tree (repeatable).")
    ] = None,
    version: Annotated[
        str | None, typer.Option("--version", help="Override the version the tool reports.")
    ] = None,
    max_depth: Annotated[
        int, typer.Option("--max-depth", min=1, max=8, help="Subcommand depth.")
    ] = DEFAULT_MAX_DEPTH,
    max_commands: Annotated[
        int, typer.Option("--max-commands", min=1, help="Stop after this many.")
    ] = DEFAULT_MAX_COMMANDS,
    path: Annotated[
        str | None,
        typer.Option(
            "--path",
            help="PATH to find and run the tool with (e.g. a virtualenv's bin first), "
            "to document the version installed there.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a CLI's help over its subcommands (sandboxed, in parallel) and ingest one entity per command."""
    with librarian() as lib, progress_bar("ingesting help", enabled=not as_json) as progress:
        report = lib.ingest_cli(
            command,
            sdk_name=sdk,
            sdk_version=version,
            scopes=tuple(scope or ()),
            max_depth=max_depth,
            max_commands=max_commands,
            path=path,
            progress=progress,
        )
    _report(report, as_json)


def ingest_package(
    distribution: Annotated[str, typer.Argument(help="An installed distribution (e.g. requests).")],
    sdk: Annotated[str | None, typer.Option("--sdk", help="SDK name (default: the distribution).")] = None,
    python: Annotated[
        str | None, typer.Option("--python", help="Interpreter of the environment to introspect.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Introspect an installed Python distribution (in a subprocess) and ingest its public API."""
    with librarian() as lib, progress_bar("ingesting package", enabled=not as_json) as progress:
        report = lib.ingest_package(distribution, sdk_name=sdk, python=python, progress=progress)
    _report(report, as_json)


def ingest_openapi(
    location: Annotated[str, typer.Argument(help="OpenAPI 3.x document: a file or an http(s) URL.")],
    sdk: Annotated[str, typer.Option("--sdk", help="SDK (API) name.")],
    version: Annotated[
        str | None, typer.Option("--version", help="API version (default: the document's info.version).")
    ] = None,
    allow_private: Annotated[
        bool, typer.Option("--allow-private", help="Allow URLs on loopback or private networks.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Ingest an OpenAPI document, one entity per operation (e.g. `POST /v1/pets`)."""
    with librarian() as lib, progress_bar("ingesting operations", enabled=not as_json) as progress:
        report = lib.ingest_openapi(
            location, sdk_name=sdk, sdk_version=version, allow_private=allow_private, progress=progress
        )
    _report(report, as_json)


def crawl(
    url: Annotated[str, typer.Argument(help="Start page of the documentation site (http or https).")],
    sdk: Annotated[str, typer.Option("--sdk", help="SDK name to file the pages under.")],
    version: Annotated[str, typer.Option("--version", help="SDK version the site documents.")],
    max_pages: Annotated[
        int | None,
        typer.Option("--max-pages", min=1, help="Pages fetched at most (default: crawl_max_pages)."),
    ] = None,
    max_depth: Annotated[
        int | None,
        typer.Option(
            "--max-depth", min=0, help="Links followed from the start page (default: crawl_max_depth)."
        ),
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option(
            "--scope", help="Path prefix or URL to stay under (default: the start URL's directory)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Crawl a documentation website (robots.txt, rate limit, llms.txt) and ingest one document per page.

    A second crawl of the same URL and version asks for each known page conditionally and keeps pages
    that answer 304 Not Modified. Private addresses need the allowed_private_hosts setting.
    """
    with librarian() as lib, progress_bar("crawling", enabled=not as_json) as progress:
        report = lib.crawl(
            url,
            sdk_name=sdk,
            sdk_version=version,
            max_pages=max_pages,
            max_depth=max_depth,
            scope=scope,
            progress=progress,
        )
    _report(report, as_json)
