"""Every documented page of one tool at one version, read straight from the store.

Research returns the few entities that best match a question; an edit of a command line needs more:
the tool's whole command tree (which subcommands exist, which options each accepts, which values an
option takes), or a library's whole public API (which names a module has, which parameters a
function takes). Both are bounded (a CLI's help walk makes one page per command, the package
connector one per public object), so the loop reads them all once per correction:
:func:`load_pages` returns the current text and attributes of every document of the SDK at the
resolved version (:meth:`~librarian.correction.command_tree.CommandTree.from_pages` turns CLI-help
pages into the tool's command tree).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from librarian.app import Librarian
from librarian.research.sdks import find_sdk
from librarian.research.versions import resolve_version
from librarian.storage.models import Chunk, Document, DocumentVersion, Source

__all__ = ["DocPage", "IndexedTool", "documents", "indexed_tool", "load_pages"]

_PAGE_LIMIT = 5000


@dataclass(frozen=True)
class DocPage:
    """One documented entity: its name, URL, version, the page's text and the chunk attributes."""

    entity_name: str
    source_url: str
    sdk_name: str
    sdk_version: str | None
    content: str
    attributes: dict[str, Any] = field(default_factory=dict)

    def as_snippet(self) -> dict[str, Any]:
        """The page in the shape of a research snippet (what the strategies read)."""
        return {
            "entity_name": self.entity_name,
            "source_url": self.source_url,
            "sdk_name": self.sdk_name,
            "sdk_version": self.sdk_version,
            "content": self.content,
            "attributes": dict(self.attributes),
            "score": 0.0,
        }


@dataclass(frozen=True)
class IndexedTool:
    """How a tool is indexed: its SDK name in the store, the version asked and the one resolved."""

    sdk_name: str
    requested: str | None
    version: str | None
    exact: bool
    versions: tuple[str, ...]


def indexed_tool(librarian: Librarian, name: str, version: str | None) -> IndexedTool | None:
    """The SDK ``name`` resolves to (aliases as research resolves them) and its version, or ``None``.

    ``exact`` says whether ``version`` itself is indexed (an unknown version resolves to the nearest).
    """
    with librarian.sessions() as session:
        sdk = find_sdk(session, name, librarian.default_principal.grants)
    if sdk is None:
        return None
    resolution = resolve_version(version, sdk.versions)
    return IndexedTool(sdk.name, version, resolution.resolved, resolution.exact, tuple(sdk.versions))


def load_pages(
    librarian: Librarian, sdk_name: str, version: str | None, *, limit: int = _PAGE_LIMIT
) -> list[DocPage]:
    """Every current document of ``sdk_name`` at ``version`` (at most ``limit``), in path order."""
    first_chunk = (
        select(Chunk.document_id, Chunk.entity_name, Chunk.attributes)
        .where(Chunk.ordinal == 0, Chunk.sdk_name == sdk_name)
        .subquery()
    )
    query = (
        select(
            first_chunk.c.entity_name,
            Document.source_url,
            Source.sdk_version,
            DocumentVersion.text,
            first_chunk.c.attributes,
            Document.path,
        )
        .join(Source, Source.id == Document.source_id)
        .join(
            DocumentVersion,
            (DocumentVersion.document_id == Document.id)
            & (DocumentVersion.version_no == Document.current_version_no),
        )
        .join(first_chunk, first_chunk.c.document_id == Document.id)
        .where(Source.sdk_name == sdk_name, Document.deleted_at.is_(None))
        .order_by(Document.path)
        .limit(limit)
    )
    query = query.where(Source.sdk_version == version) if version is not None else query
    with librarian.sessions() as session:
        rows = session.execute(query).all()
    return [
        DocPage(
            entity_name=str(entity or path),
            source_url=url,
            sdk_name=sdk_name,
            sdk_version=sdk_version,
            content=text,
            attributes=dict(attributes or {}),
        )
        for entity, url, sdk_version, text, attributes, path in rows
    ]


def documents(librarian: Librarian, sdk_name: str, version: str | None, entities: Sequence[str]) -> bool:
    """Whether the store documents every one of ``entities`` (entity names) of the SDK at ``version``."""
    wanted = set(entities)
    query = select(Chunk.entity_name).where(
        Chunk.sdk_name == sdk_name, Chunk.entity_name.in_(wanted), Chunk.sdk_version == version
    )
    with librarian.sessions() as session:
        found = set(session.scalars(query.distinct()))
    return wanted <= found
