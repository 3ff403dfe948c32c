"""``librarian tour``: the main job on the embedded default, with real documentation.

It ingests the reStructuredText examples that ship inside the installed ``awscli`` package (the
``demo`` extra) as SDK ``aws-cli`` at the installed version, then runs a few searches a person can
read. A second run finds the documents unchanged and only searches.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from librarian.cli.common import handle_errors, librarian, print_json, progress_bar, stdout
from librarian.errors import MissingExtraError

DEFAULT_SERVICES = ["s3", "s3api", "sts", "dynamodb", "sqs", "lambda"]
QUERIES = [
    "upload a file to a bucket with tags",
    "set tags on an existing object",
    "create a queue and send a message",
    "who am I: show the caller identity",
]


def tour(
    service: Annotated[
        list[str] | None, typer.Option("--service", help="AWS CLI example folders to ingest (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Ingest the AWS CLI's bundled examples and run a few searches over them."""
    with handle_errors():
        try:
            import awscli  # type: ignore[import-untyped]
        except ImportError as exc:
            raise MissingExtraError("awscli", "demo") from exc
    version = metadata.version("awscli")
    examples = Path(awscli.__file__).parent / "examples"
    output: dict[str, object] = {"sdk_name": "aws-cli", "sdk_version": version, "ingests": [], "searches": []}
    with librarian() as lib:
        for name in service or DEFAULT_SERVICES:
            with progress_bar(f"ingesting aws {name} examples", enabled=not as_json) as progress:
                report = lib.ingest(
                    str(examples / name), sdk_name="aws-cli", sdk_version=version, progress=progress
                )
            output["ingests"].append(report.to_dict())  # type: ignore[attr-defined]
            if not as_json:
                stdout.print(
                    f"ingested [bold]aws {name}[/] examples: {report.files_seen} files, "
                    f"{report.chunks_written} new chunks, {report.unchanged} unchanged "
                    f"({report.seconds:.1f} s)"
                )
        for query in QUERIES:
            results = lib.search(query, sdk_name="aws-cli", sdk_version=version, top_k=3)
            output["searches"].append(  # type: ignore[attr-defined]
                {"query": query, "results": [r.to_dict() for r in results]}
            )
            if as_json:
                continue
            stdout.print(f"\n[bold magenta]search:[/] {escape(query)}")
            for rank, result in enumerate(results, start=1):
                first_line = next((line for line in result.content.splitlines() if line.strip()), "")
                stdout.print(
                    f"  {rank}. [cyan]{escape(result.entity_name or result.section_path)}[/] "
                    f"[dim](aws-cli {result.sdk_version}, score {result.score:.2f})[/]\n"
                    f"     {escape(first_line[:110])}\n     [dim]{escape(result.source_url)}[/]",
                    highlight=False,
                )
    if as_json:
        print_json(output)
