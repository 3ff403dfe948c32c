"""Commands of a CLI already indexed by ``librarian ingest-cli`` as tools, one per command.

The help walk (:mod:`librarian.ingest.sources.cli_help`) stores one document per command: its
chunks carry the SDK name and version, the command as ``entity_name`` (``s3 cp``; the tool itself
for the root page) and the connector's metadata as attributes (``command``, ``subcommand_path``,
``options``, ``synopsis``); the document text has an ``## Options`` list with each option's
spellings, value placeholder and description. Nothing is run here: the tools come from the store,
read with the importing principal's grants.

Each command's input schema has ``args`` (the words after the command) and one property per
documented option of the command itself: a boolean for a flag, a string for an option that takes a
value. The binding is ``{"argv": ["aws", "s3", "cp"], "options": {"--recursive": "flag", ...}}``
plus the ``PATH`` the help was walked with, when one was given, so calls run the same installation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from librarian.discovery.sync import Listing
from librarian.errors import InvalidInputError, NotFoundError
from librarian.index.grants_sql import grants_condition
from librarian.knowledge.access import Principal
from librarian.research.sdks import indexed_sdks
from librarian.research.versions import resolve_version
from librarian.storage.models import Chunk, Document, DocumentVersion, Source

if TYPE_CHECKING:
    from librarian.app import Librarian

__all__ = ["command_manifest", "list_cli_commands", "options_of"]

CLI_SOURCE_KIND = "cli-help"
MAX_DESCRIPTION_CHARS = 2000
# A line of the "## Options" list cli_help_documents writes: "- `--out`, `-o` `<file>`: Where to."
_OPTION_LINE = re.compile(r"^- (`[^`]+`(?:, `[^`]+`)*)(?: `([^`]*)`)?(?:: (.*))?$")
_ARGS_PROPERTY = {
    "type": "array",
    "items": {"type": "string"},
    "description": "arguments after the command (and its options), each one word; no shell is used",
}


@dataclass(frozen=True)
class CliOptionDoc:
    """One option as the indexed page documents it."""

    name: str
    aliases: tuple[str, ...]
    value_hint: str | None
    description: str


@dataclass
class _Page:
    entity: str
    first_chunk: str
    attributes: dict[str, Any]
    text: str
    options: dict[str, Any]


def list_cli_commands(spec: Mapping[str, Any], lib: Librarian, principal: Principal) -> Listing:
    """The tools of the CLI indexed as ``spec["sdk_name"]`` (at ``spec["sdk_version"]``, default newest).

    ``spec["commands"]``: a list of entity names (``["s3 cp", "s3 ls"]``) or one prefix (``"s3"``:
    ``s3`` and the commands below it); default: every indexed command.

    Raises:
        InvalidInputError: a malformed spec.
        NotFoundError: the CLI, or that version of it, is not indexed (or not readable by the caller).
    """
    sdk_name = spec.get("sdk_name")
    if not isinstance(sdk_name, str) or not sdk_name.strip():
        raise InvalidInputError(
            "cli source: 'sdk_name' is required", hint="the name the CLI was indexed under by ingest-cli"
        )
    requested = spec.get("sdk_version")
    if requested is not None and not isinstance(requested, str):
        raise InvalidInputError(f"cli source {sdk_name}: 'sdk_version' must be a string")
    commands = spec.get("commands")
    if commands is not None and not (
        isinstance(commands, str)
        or (isinstance(commands, list) and all(isinstance(name, str) for name in commands))
    ):
        raise InvalidInputError(f"cli source {sdk_name}: 'commands' must be a list of commands or a prefix")
    with lib.sessions() as session:
        known = {sdk.name: sdk for sdk in indexed_sdks(session, principal.grants)}
    sdk = known.get(sdk_name)
    if sdk is None:
        raise NotFoundError(
            f"cli source: no CLI is indexed as {sdk_name!r}",
            hint="index its help first: librarian ingest-cli COMMAND --sdk-name " + sdk_name,
        )
    resolution = resolve_version(requested, list(sdk.versions))
    if resolution.resolved is None or not resolution.exact:
        raise NotFoundError(
            f"cli source {sdk_name}: version {requested} is not indexed "
            f"(indexed: {', '.join(sdk.versions) or 'none'})",
            hint="index that version with ingest-cli, or leave sdk_version out for the newest",
        )
    version = resolution.resolved
    pages = _pages(lib, principal, sdk_name, version)
    listing = Listing(version=version)
    if isinstance(commands, list):
        missing = [name for name in commands if name not in pages]
        listing.errors += [
            f"cli source {sdk_name} {version}: no indexed command {name!r}" for name in missing
        ]
        chosen = [pages[name] for name in dict.fromkeys(commands) if name in pages]
    elif isinstance(commands, str):
        prefix = " ".join(commands.split())
        chosen = [page for name, page in pages.items() if name == prefix or name.startswith(prefix + " ")]
        if not chosen:
            listing.errors.append(
                f"cli source {sdk_name} {version}: no indexed command starts with {prefix!r}"
            )
    else:
        chosen = list(pages.values())
    for page in chosen:
        listing.manifests.append(command_manifest(sdk_name, version, page))
    if not pages:
        listing.errors.append(f"cli source {sdk_name} {version}: the index holds no command pages")
    return listing


def _pages(lib: Librarian, principal: Principal, sdk_name: str, version: str) -> dict[str, _Page]:
    """Every indexed command page of the SDK at ``version`` the principal may read, by entity name."""
    with lib.sessions() as session:
        dialect = session.get_bind().dialect.name
        rows = session.execute(
            select(
                Chunk.entity_name,
                Chunk.content,
                Chunk.attributes,
                DocumentVersion.text,
                Source.options,
            )
            .join(Document, Document.id == Chunk.document_id)
            .join(
                DocumentVersion,
                (DocumentVersion.document_id == Document.id)
                & (DocumentVersion.version_no == Document.current_version_no),
            )
            .join(Source, Source.id == Document.source_id)
            .where(
                Chunk.sdk_name == sdk_name,
                Chunk.sdk_version == version,
                Chunk.entity_type == "command",
                Source.kind == CLI_SOURCE_KIND,
                Document.deleted_at.is_(None),
                grants_condition(dialect, Chunk.access_grants, principal.grants),
            )
            .order_by(Document.path, Chunk.document_id, Chunk.ordinal)
        ).all()
    pages: dict[str, _Page] = {}
    for entity, content, attributes, text, options in rows:
        if entity and entity not in pages:  # the first chunk of a page (a second source: the first kept)
            pages[entity] = _Page(
                entity, content or "", dict(attributes or {}), text or "", dict(options or {})
            )
    return pages


def command_manifest(sdk_name: str, version: str, page: _Page) -> dict[str, Any]:
    """The tool manifest of one indexed command page."""
    attributes = page.attributes
    command = str(page.options.get("command") or attributes.get("command") or sdk_name)
    words = [str(word) for word in attributes.get("subcommand_path") or []]
    argv = [command, *words]
    shown = " ".join([command.rsplit("/", 1)[-1], *words])
    properties: dict[str, Any] = {"args": dict(_ARGS_PROPERTY)}
    kinds: dict[str, str] = {}
    for option in options_of(page.text):
        if option.name in properties:
            continue
        also = f" (also {', '.join(option.aliases)})" if option.aliases else ""
        if option.value_hint:
            properties[option.name] = {
                "type": "string",
                "description": f"{option.description}{also} Value: {option.value_hint}.".strip(),
            }
            kinds[option.name] = "value"
        else:
            properties[option.name] = {
                "type": "boolean",
                "description": f"{option.description}{also}".strip(),
            }
            kinds[option.name] = "flag"
    binding: dict[str, Any] = {"argv": argv, "options": kinds}
    if isinstance(page.options.get("path"), str) and page.options["path"]:
        binding["path"] = page.options["path"]
    return {
        "toolId": f"{sdk_name}.{'.'.join(page.entity.split())}",
        "name": shown,
        "type": "cli",
        "description": _description(page, shown)[:MAX_DESCRIPTION_CHARS],
        "inputSchema": {"type": "object", "properties": properties, "additionalProperties": False},
        "binding": binding,
        "version": version,
    }


def options_of(text: str) -> list[CliOptionDoc]:
    """The options listed in the ``## Options`` section of an indexed command page.

    Example:
        >>> [o.name for o in options_of("# x\\n\\n## Options\\n\\n- `--out`, `-o` `<file>`: Where.")]
        ['--out']
    """
    found: list[CliOptionDoc] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## Options"
            continue
        match = _OPTION_LINE.match(line) if inside else None
        if match is None:
            continue
        spellings = [spelling.strip("`") for spelling in match[1].split(", ")]
        found.append(
            CliOptionDoc(
                name=spellings[0],
                aliases=tuple(spellings[1:]),
                value_hint=match[2] or None,
                description=(match[3] or "").strip(),
            )
        )
    return found


def _description(page: _Page, shown: str) -> str:
    """The first paragraph of the page's first chunk that is prose, else its synopsis."""
    for paragraph in page.first_chunk.split("\n\n"):
        paragraph = paragraph.strip()
        if paragraph and not paragraph.startswith(("```", "#", "- ")):
            return " ".join(paragraph.split())
    synopsis = str(page.attributes.get("synopsis") or "").strip()
    if synopsis:
        return f"Run `{shown}`. Usage: {' '.join(synopsis.split())}"
    return f"Run `{shown}`."
