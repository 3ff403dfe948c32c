"""CLI commands of version-aware research: ``librarian research`` and ``librarian sdks``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from librarian.budget import MAX_CHARS, MIN_CHARS
from librarian.cli.answers import print_research
from librarian.cli.common import librarian, print_json, stdout
from librarian.research.feedback import record_feedback
from librarian.research.sdks import indexed_sdks
from librarian.research.service import research_api_usage


def research(
    query: Annotated[str, typer.Argument(help="What you want to do, in natural language.")],
    sdk: Annotated[
        str, typer.Option("--sdk", help="SDK or tool name (aliases like aws/awscli/aws-cli work).")
    ],
    version: Annotated[
        str | None, typer.Option("--version", help="Version: exact, prefix (2.15), range (>=2,<3), latest.")
    ] = None,
    error: Annotated[
        str | None, typer.Option("--error", help="The error text the failed command printed.")
    ] = None,
    max_chars: Annotated[
        int | None,
        typer.Option(
            "--max-chars", min=MIN_CHARS, max=MAX_CHARS, help="Budget: the most characters of snippets."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the research result as JSON.")] = False,
) -> None:
    """Version-correct documentation for a task, with a calibrated confidence and fallbacks."""
    with librarian() as lib:
        result = research_api_usage(lib, sdk, query, version=version, error_text=error, max_chars=max_chars)
    if as_json:
        print_json(result)
        return
    print_research(stdout, result)


def sdks(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Indexed SDKs with their versions (newest first) and chunk counts."""
    with librarian() as lib, lib.sessions() as session:
        found = indexed_sdks(session, lib.default_principal.grants)
    if as_json:
        print_json([{"sdk_name": s.name, "versions": s.versions, "chunks": s.chunks} for s in found])
        return
    table = Table("sdk", "versions (newest first)", "chunks")
    for sdk in found:
        table.add_row(escape(sdk.name), escape(", ".join(sdk.versions)), str(sdk.chunks))
    stdout.print(table)


def feedback(
    sdk: Annotated[str, typer.Option("--sdk", help="SDK or tool name the research was about.")],
    error: Annotated[
        str, typer.Option("--error", help="The error text the failed command printed ('-' reads stdin).")
    ],
    source_url: Annotated[
        str, typer.Option("--source-url", help="The snippet's source URL, as research printed it.")
    ],
    entity: Annotated[str | None, typer.Option("--entity", help="The snippet's entity name.")] = None,
    command: Annotated[str | None, typer.Option("--command", help="The failed command line.")] = None,
    version: Annotated[
        str | None, typer.Option("--version", help="The SDK version the snippet documents.")
    ] = None,
    query: Annotated[str | None, typer.Option("--query", help="The research question asked.")] = None,
    unhelpful: Annotated[
        bool, typer.Option("--unhelpful", help="The snippet did NOT resolve the error (ranks it lower).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the stored record as JSON.")] = False,
) -> None:
    """Record which snippet resolved an error, so research ranks it higher for similar errors.

    The error text, command and query are scrubbed of secrets and home directories before storing.
    """
    text = sys.stdin.read() if error == "-" else error
    with librarian() as lib:
        stored = record_feedback(
            lib.sessions,
            sdk_name=sdk,
            error_text=text,
            source_url=source_url,
            entity_name=entity,
            sdk_version=version,
            command=command,
            query=query,
            helpful=not unhelpful,
        )
    if as_json:
        print_json(stored)
        return
    verdict = "resolved" if stored["helpful"] else "did not resolve"
    stdout.print(
        f"recorded #{stored['id']}: {escape(stored['entity_name'] or stored['source_url'])} {verdict} "
        f"errors like [dim]{escape(stored['error_text'].strip().splitlines()[-1][:120])}[/] "
        f"(signature {stored['error_signature'][:12]})",
        highlight=False,
    )
