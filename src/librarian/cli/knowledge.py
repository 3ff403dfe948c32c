"""``librarian knowledge``: hand-written knowledge documents, their versions, search and feedback."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from librarian.cli.common import JsonOption, librarian, print_json, stdout
from librarian.errors import InvalidInputError
from librarian.knowledge.documents import DocumentDraft
from librarian.knowledge.search import KnowledgeFilters

knowledge_app = typer.Typer(
    help="Knowledge documents: add, edit (versioned), read, search, give feedback.", no_args_is_help=True
)

Title = Annotated[str | None, typer.Option("--title", help="The document's title.")]
Content = Annotated[str | None, typer.Option("--content", help="Markdown content.")]
ContentFile = Annotated[Path | None, typer.Option("--file", help="Read the Markdown content from this file.")]
Kind = Annotated[
    str | None, typer.Option("--type", help="runbook, incident_report, documentation, wiki or solution.")
]
Category = Annotated[str | None, typer.Option("--category", help="e.g. kubernetes, database.")]
Tags = Annotated[list[str] | None, typer.Option("--tag", help="A tag; repeat for several.")]
Visibility = Annotated[
    str | None,
    typer.Option("--visibility", help="private, teams, organization (default) or public (admins)."),
]
Teams = Annotated[
    list[str] | None, typer.Option("--team", help="A team that may read it (with --visibility teams).")
]
Description = Annotated[str | None, typer.Option("--description", help="A one-paragraph summary.")]
Severity = Annotated[str | None, typer.Option("--severity", help="critical, high, medium or low.")]
BaseVersion = Annotated[
    int | None,
    typer.Option(
        "--base-version",
        help="The version you edited; refused if someone saved a newer one (default: current).",
    ),
]


def _content(content: str | None, file: Path | None) -> str | None:
    if content is not None and file is not None:
        raise InvalidInputError("give --content or --file, not both")
    if file is None:
        return content
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"--file {file}: cannot be read as UTF-8 text: {exc}") from exc


def _draft(**fields: Any) -> DocumentDraft:
    tags, teams = fields.pop("tags"), fields.pop("teams")
    return DocumentDraft(
        **fields,
        tags=None if tags is None else tuple(tags),
        allowed_teams=None if teams is None else tuple(teams),
    )


def _print_document(document: dict[str, Any], *, content: bool = True) -> None:
    flags = ", ".join(f"{kind}: {count}" for kind, count in document.get("flags", {}).items())
    stdout.print(
        f"[bold]{escape(document['title'] or '')}[/] (id {document['id']}, version {document['version']}, "
        f"{document['document_type']}, {document['visibility']})",
        highlight=False,
    )
    stdout.print(
        f"usefulness {document['usefulness_score']} from {document['feedback_count']} votes"
        + (f"; [yellow]flagged {flags}[/]" if flags else ""),
        highlight=False,
    )
    if content and "content" in document:
        stdout.print(escape(document["content"]), highlight=False)


@knowledge_app.command("add")
def add(
    title: Annotated[str, typer.Option("--title", help="The document's title.")],
    content: Content = None,
    file: ContentFile = None,
    document_type: Kind = None,
    category: Category = None,
    tag: Tags = None,
    visibility: Visibility = None,
    team: Teams = None,
    description: Description = None,
    severity: Severity = None,
    as_json: JsonOption = False,
) -> None:
    """Add a knowledge document (version 1); it is searchable at once."""
    with librarian() as lib:
        document = lib.knowledge.documents.create(
            lib.default_principal,
            _draft(
                title=title,
                content=_content(content, file),
                document_type=document_type,
                category=category,
                tags=tag,
                visibility=visibility,
                teams=team,
                description=description,
                severity=severity,
            ),
        )
    print_json(document) if as_json else _print_document(document, content=False)


@knowledge_app.command("edit")
def edit(
    document_id: Annotated[int, typer.Argument(help="The document's id.")],
    base_version: BaseVersion = None,
    title: Title = None,
    content: Content = None,
    file: ContentFile = None,
    document_type: Kind = None,
    category: Category = None,
    tag: Tags = None,
    visibility: Visibility = None,
    team: Teams = None,
    description: Description = None,
    severity: Severity = None,
    as_json: JsonOption = False,
) -> None:
    """Save a new version with the given fields changed (the others stay as they are)."""
    with librarian() as lib:
        principal = lib.default_principal
        base = (
            base_version or lib.knowledge.documents.get(principal, document_id, count_view=False)["version"]
        )
        document = lib.knowledge.documents.update(
            principal,
            document_id,
            base,
            _draft(
                title=title,
                content=_content(content, file),
                document_type=document_type,
                category=category,
                tags=tag,
                visibility=visibility,
                teams=team,
                description=description,
                severity=severity,
            ),
        )
    print_json(document) if as_json else _print_document(document, content=False)


@knowledge_app.command("show")
def show(
    document_id: Annotated[int, typer.Argument(help="The document's id.")],
    version: Annotated[
        int | None, typer.Option("--version", help="An earlier version (default: current).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """A document with its full content."""
    with librarian() as lib:
        document = lib.knowledge.documents.get(lib.default_principal, document_id, version)
    print_json(document) if as_json else _print_document(document)


@knowledge_app.command("history")
def history(
    document_id: Annotated[int, typer.Argument(help="The document's id.")], as_json: JsonOption = False
) -> None:
    """Every version of a document, newest first."""
    with librarian() as lib:
        versions = lib.knowledge.documents.history(lib.default_principal, document_id)
    if as_json:
        print_json(versions)
        return
    for version in versions:
        stdout.print(
            f"version {version['version']}  {version['version_created_at']}  "
            f"by user {version['version_created_by']}  {escape(version['version_title'] or '')}",
            highlight=False,
        )


@knowledge_app.command("restore")
def restore(
    document_id: Annotated[int, typer.Argument(help="The document's id.")],
    version: Annotated[int, typer.Argument(help="The version to bring back.")],
    base_version: BaseVersion = None,
    as_json: JsonOption = False,
) -> None:
    """Save a new version equal to an earlier one."""
    with librarian() as lib:
        principal = lib.default_principal
        base = (
            base_version or lib.knowledge.documents.get(principal, document_id, count_view=False)["version"]
        )
        document = lib.knowledge.documents.restore(principal, document_id, version, base)
    print_json(document) if as_json else _print_document(document, content=False)


@knowledge_app.command("delete")
def delete(
    document_id: Annotated[int, typer.Argument(help="The document's id.")],
    base_version: BaseVersion = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a document from search (its history is kept)."""
    with librarian() as lib:
        result = lib.knowledge.documents.delete(lib.default_principal, document_id, base_version)
    print_json(result) if as_json else stdout.print(f"document {document_id} deleted")


@knowledge_app.command("list")
def list_documents(
    document_type: Kind = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1-500).")] = 50,
    after: Annotated[int, typer.Option("--after", help="Start after this document id (paging).")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Documents you may read, by id."""
    with librarian() as lib:
        documents = lib.knowledge.documents.list_documents(
            lib.default_principal, document_type=document_type, limit=limit, after_id=after
        )
    if as_json:
        print_json(documents)
        return
    for document in documents:
        stdout.print(
            f"{document['id']:>6}  v{document['version']}  {document['document_type'] or '-':<16} "
            f"{escape(document['title'] or document['source_url'])}",
            highlight=False,
        )


@knowledge_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What you are looking for, in plain words.")],
    document_type: Annotated[
        list[str] | None, typer.Option("--type", help="Only these types; repeatable.")
    ] = None,
    category: Category = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Documents must carry every one.")] = None,
    severity: Annotated[list[str] | None, typer.Option("--severity", help="Only these severities.")] = None,
    min_usefulness: Annotated[float | None, typer.Option("--min-usefulness", help="0 to 5.")] = None,
    since: Annotated[datetime | None, typer.Option("--since", help="Changed on or after (ISO date).")] = None,
    until: Annotated[
        datetime | None, typer.Option("--until", help="Changed on or before (ISO date).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="How many documents (1-50).")] = 10,
    as_json: JsonOption = False,
) -> None:
    """search_knowledge: documents ranked by relevance and usefulness, with highlighted snippets."""
    filters = KnowledgeFilters(
        document_type=tuple(document_type or ()),
        category=category,
        tags=tuple(tag or ()),
        severity=tuple(severity or ()),
        min_usefulness_score=min_usefulness,
        created_after=since,
        created_before=until,
    )
    with librarian() as lib:
        results = lib.knowledge.search(query, filters=filters, limit=limit, principal=lib.default_principal)
    if as_json:
        print_json({"results": results})
        return
    for result in results:
        flags = "".join(f" [yellow]{kind}[/]" for kind in result["flags"])
        stdout.print(
            f"[bold]{escape(result['title'] or '')}[/] (id {result['id']}, {result['document_type']}, "
            f"score {result['score']:.3f}, usefulness {result['usefulness_score']}){flags}",
            highlight=False,
        )
        stdout.print("   " + _marked(result["snippet"], result["highlights"]), highlight=False)


def _marked(snippet: str, highlights: list[list[int]]) -> str:
    out, last = [], 0
    for start, end in highlights:
        out.append(escape(snippet[last:start]))
        out.append(f"[bold yellow]{escape(snippet[start:end])}[/]")
        last = end
    out.append(escape(snippet[last:]))
    return "".join(out).replace("\n", " ")


@knowledge_app.command("feedback")
def feedback(
    document_id: Annotated[int, typer.Argument(help="The document's id.")],
    feedback_type: Annotated[str, typer.Argument(help="helpful, not_helpful, outdated or incorrect.")],
    rating: Annotated[int | None, typer.Option("--rating", help="1 to 5 stars.")] = None,
    comment: Annotated[str | None, typer.Option("--comment", help="Why.")] = None,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            help="What you were looking for; with helpful (or 4-5 stars), similar searches rank it higher.",
        ),
    ] = None,
    used: Annotated[bool, typer.Option("--used", help="You acted on this document.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Say whether a document helped; its usefulness (and so its ranking) follows."""
    with librarian() as lib:
        result = lib.knowledge.feedback(
            document_id,
            feedback_type,
            rating=rating,
            comment=comment,
            search_query=query,
            was_used=used,
            principal=lib.default_principal,
        )
    if as_json:
        print_json(result)
        return
    stdout.print(
        f"usefulness of {document_id} is now {result['usefulness_score']} ({result['feedback_count']} votes)"
    )
