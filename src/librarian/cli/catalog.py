"""``librarian delete-source``, ``librarian page`` and ``librarian libraries``: the documentation catalog."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from librarian.catalog.pages import DEFAULT_MAX_CHARS, MAX_CHARS, PageRequest
from librarian.cli.common import JsonOption, librarian, print_json, stdout


def delete_source(
    selector: Annotated[str, typer.Argument(help="A source id, key prefix, URI or SDK name.")],
    every_match: Annotated[
        bool, typer.Option("--all", help="Delete every source the selector names (each version of an SDK).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete a source with its documents, their versions, chunks and vectors."""
    with librarian() as lib:
        deleted = lib.catalog.delete_sources(lib.default_principal, selector, every_match=every_match)
    if as_json:
        print_json({"deleted": deleted})
        return
    for row in deleted:
        label = " ".join(filter(None, [row["sdk_name"], row["sdk_version"]]))
        stdout.print(
            f"deleted source {row['id']} {escape(row['uri'])} {escape(label)}: "
            f"{row['documents']} documents, {row['chunks']} chunks"
        )


def page(
    target: Annotated[str, typer.Argument(help="A result's source_url, or a document id.")],
    version: Annotated[str | None, typer.Option(help="The SDK version, when several are indexed.")] = None,
    start: Annotated[int, typer.Option(min=0, help="The chunk to start at (a previous next_chunk).")] = 0,
    max_chars: Annotated[int, typer.Option(min=200, max=MAX_CHARS, help="The most text to print.")] = (
        DEFAULT_MAX_CHARS
    ),
    as_json: JsonOption = False,
) -> None:
    """Print a whole indexed page (a document reassembled from its chunks in order)."""
    by_id = target.isdecimal()
    request = PageRequest(
        url=None if by_id else target,
        document_id=int(target) if by_id else None,
        sdk_version=version,
        start_chunk=start,
        max_chars=max_chars,
    )
    with librarian() as lib:
        found = lib.catalog.read_page(lib.default_principal, request)
    if as_json:
        print_json(found)
        return
    label = " ".join(filter(None, [found["sdk_name"], found["sdk_version"]]))
    stdout.print(
        f"[bold]{escape(found['title'] or found['url'])}[/]  [dim]{escape(label)}[/]", highlight=False
    )
    stdout.print(f"[dim]{escape(found['url'])}  version {found['document_version']}[/]", highlight=False)
    if found["other_versions"]:
        stdout.print(f"[dim]also indexed at: {escape(', '.join(found['other_versions']))}[/]")
    stdout.print()
    stdout.print(escape(found["content"]), highlight=False)
    if found["next_chunk"] is not None:
        stdout.print(
            f"\n[dim]… {found['chunk_count'] - found['next_chunk']} more chunks:"
            f" --start {found['next_chunk']}[/]"
        )


def libraries(
    name: Annotated[str | None, typer.Argument(help="Resolve this name (aws, requests...).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=50, help="How many candidates.")] = 5,
    as_json: JsonOption = False,
) -> None:
    """List indexed libraries, or resolve a name to the libraries it may mean."""
    with librarian() as lib:
        rows: list[dict[str, Any]]
        if name is None:
            rows = lib.catalog.libraries(lib.default_principal)
        else:
            rows = lib.catalog.resolve_library(lib.default_principal, name, limit=limit)
    if as_json:
        print_json(rows)
        return
    if not rows:
        stdout.print(
            f"nothing indexed looks like {escape(name or '')!r}" if name else "nothing is indexed yet"
        )
        return
    for row in rows:
        versions = row["versions"]
        shown = [v["version"] if isinstance(v, dict) else v for v in versions]
        score = f"  score {row['score']:.2f}" if "score" in row else ""
        stdout.print(f"[bold]{escape(row['library_id'])}[/]{score}  versions: {escape(', '.join(shown))}")
        if "sources" in row:
            for source in row["sources"]:
                stdout.print(
                    f"   source {source['id']} {escape(source['kind'])} {escape(source['uri'])}"
                    f"  {source['last_status'] or ''} {source['last_ingested_at'] or ''}"
                )
