"""Documents of a walked command-line tool: one Markdown page per command, ready for ingestion.

:func:`cli_documents` turns what :func:`~librarian.ingest.sources.cli_help.walk_cli_help` found into
one :class:`~librarian.ingest.sources.base.SourceDocument` per command.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from librarian.ingest.parsed import ParsedDocument, Section
from librarian.ingest.sources.base import SourceDocument
from librarian.ingest.sources.cli_help_parse import CliCommand, CliExample, CliOption

if TYPE_CHECKING:
    from librarian.ingest.sources.cli_help import CliHelpResult

__all__ = ["cli_documents"]


def cli_documents(result: CliHelpResult, *, command: str) -> list[SourceDocument]:
    """One document per command of a walk, ready for the ingest pipeline.

    Each document has path ``s3api/put-object`` (the tool's name for the tool itself), URL
    ``cli://aws/s3api/put-object``, Markdown text (heading, synopsis in a code block, description,
    options with their descriptions, subcommands, global option names) and one ``command`` section
    ``(command, "s3api put-object")`` that holds all of it, so an option is always found with its
    command. Metadata: ``command``, ``subcommand_path``, ``options`` (every spelling of the command's
    own options), ``global_options``, ``synopsis`` and ``version``.

    Args:
        result: what :func:`walk_cli_help` returned.
        command: the tool's name as users type it (``aws``; a path is cut to its last part), used in
            paths, URLs and headings.
    """
    # A tool given by path (/usr/bin/aws) is still documented under the name users type.
    command = Path(command).name or command
    documents: list[SourceDocument] = []
    for cmd in result.commands:
        entity = cmd.name or command
        own = [o for o in cmd.options if not cmd.path or not o.is_global]
        inherited = [o for o in cmd.options if cmd.path and o.is_global]
        body = _markdown_body(cmd, own, inherited)
        title = f"{command} {cmd.name}".strip()
        documents.append(
            SourceDocument(
                path="/".join(cmd.path) or command,
                url=f"cli://{command}/{'/'.join(cmd.path)}",
                # The canonical text decides whether a re-ingest changed anything: it holds all sections.
                text="\n\n".join([f"# {title}", body, *(_example_text(e) for e in cmd.examples)]),
                parsed=ParsedDocument(
                    title=title,
                    sections=[
                        Section(path=(command, entity), text=_summary(cmd), entity_type="command"),
                        Section(path=(command, entity), text=body, entity_type="command"),
                        # Examples stay under the command's name: a question phrased like an
                        # example's title ("upload a file") must find the command it shows.
                        *(
                            Section(
                                path=(command, entity), text=_example_text(example), entity_type="example"
                            )
                            for example in cmd.examples
                        ),
                    ],
                    metadata={"entity_type": "command"},
                ),
                metadata={
                    "command": command,
                    "subcommand_path": list(cmd.path),
                    "options": list(dict.fromkeys(s for o in own for s in o.spellings)),
                    "global_options": list(dict.fromkeys(s for o in inherited for s in o.spellings)),
                    "synopsis": cmd.synopsis,
                    "version": result.version,
                },
            )
        )
    return documents


# Paragraphs that warn or note rather than say what a command does.
_THIRD_PERSON = re.compile(
    r"^(?!(?:This|Its|As|Has|Is|Was|Does|Thus|Unless|Always|Sometimes|Perhaps|Various|Previous)\b)"
    r"[A-Z][a-z]+(?<!ss)s\b"
)
_ASIDE = re.compile(r"^\s*(warning|note|important|caution|deprecated|tip)\b\s*[:!-]", re.IGNORECASE)


def _summary(cmd: CliCommand) -> str:
    """A short first chunk: what the command does.

    An embedder reads only the first ~256 word pieces of a chunk; real help pages often open with
    warnings and kilobytes of synopsis, which would hide what the command is for.
    """
    paragraphs = [p.strip() for p in (cmd.description or "").split("\n\n") if p.strip()]
    # Reference docs conventionally open the real description with a third-person verb ("Adds an
    # object to a bucket", "Creates a queue"); notices about regions or dates do not.
    plain = [p for p in paragraphs if not _ASIDE.match(p)]
    purpose = next(
        (p for p in plain if _THIRD_PERSON.match(p)), plain[0] if plain else (paragraphs or [""])[0]
    )
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(purpose.split()))
    # Option names stay out of it (they are in the chunk attributes and the detail chunks): sixty
    # `--flag` names would outweigh one sentence of purpose in the embedding.
    return " ".join(sentences[:2])[:400]


def _example_text(example: CliExample) -> str:
    return f"{example.title}\n\n{example.text}" if example.title else example.text


def _markdown_body(cmd: CliCommand, own: list[CliOption], inherited: list[CliOption]) -> str:
    parts: list[str] = []
    # What the command does comes first: an embedder reads only the first ~256 word pieces of a
    # chunk, and a long synopsis would otherwise fill them with option names.
    summary, _, rest = (cmd.description or "").partition("\n\n")
    if summary:
        parts.append(summary)
    if cmd.synopsis:
        parts.append(f"```\n{cmd.synopsis}\n```")
    if rest:
        parts.append(rest)
    if own:
        lines = ["## Options", ""]
        for option in own:
            spelled = ", ".join(f"`{s}`" for s in option.spellings)
            hint = f" `{option.value_hint}`" if option.value_hint else ""
            described = f": {option.description}" if option.description else ""
            lines.append(f"- {spelled}{hint}{described}")
        parts.append("\n".join(lines))
    if cmd.subcommands:
        parts.append("## Subcommands\n\n" + "\n".join(f"- `{name}`" for name in cmd.subcommands))
    if inherited:
        parts.append("## Global options\n\n" + ", ".join(f"`{o.name}`" for o in inherited))
    return "\n\n".join(parts)
