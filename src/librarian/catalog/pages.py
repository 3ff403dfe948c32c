"""Whole pages: a document reassembled from its chunks in order, so an agent can read around a snippet.

A page is found by document id or by the URL research and search return (``https://...#anchor``,
``cli://aws/s3api/put-object``, ``pypi://requests/2.32.3/requests.get``; the fragment is ignored).
One URL can name a page of several SDK versions: the version asked for wins, else the newest, and the
others are listed. Long pages come in windows of whole chunks (``start_chunk``, ``max_chars``), each
saying where the next one starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urldefrag

from sqlalchemy import select

from librarian.errors import InvalidInputError, NotFoundError
from librarian.knowledge.access import Principal, Scope
from librarian.knowledge.documents import visible_documents
from librarian.research.versions import sort_versions
from librarian.storage.models import Chunk, Document, Source, as_utc

if TYPE_CHECKING:
    from librarian.app import Librarian

DEFAULT_MAX_CHARS = 20_000
MAX_CHARS = 200_000


@dataclass(frozen=True)
class PageRequest:
    """Which page, which version of it, and how much of it."""

    url: str | None = None
    document_id: int | None = None
    sdk_version: str | None = None
    start_chunk: int = 0
    max_chars: int = DEFAULT_MAX_CHARS

    def check(self) -> None:
        """Raise :class:`InvalidInputError` naming the field at fault."""
        if (self.url is None) == (self.document_id is None):
            raise InvalidInputError("give either url or document_id")
        if self.url is not None and not self.url.strip():
            raise InvalidInputError("url: empty")
        if self.start_chunk < 0:
            raise InvalidInputError(f"start_chunk: {self.start_chunk} is negative")
        if not 200 <= self.max_chars <= MAX_CHARS:
            raise InvalidInputError(f"max_chars: use 200 to {MAX_CHARS}, not {self.max_chars}")


class PageReader:
    """Reads whole documents the caller may see."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib

    def read(self, principal: Principal, request: PageRequest) -> dict[str, Any]:
        """The page ``request`` names, as a window of whole chunks in order.

        Raises:
            InvalidInputError: the request names no page, or its limits are out of range.
            NotFoundError: no page the caller may read has that id or URL (or that version).
        """
        principal.require(Scope.READ, "reading a page")
        request.check()
        with self._lib.sessions() as session:
            query = (
                select(Document, Source.sdk_name, Source.sdk_version)
                .join(Source, Source.id == Document.source_id)
                .where(Document.deleted_at.is_(None), visible_documents(session, principal))
            )
            if request.document_id is not None:
                query = query.where(Document.id == request.document_id)
                wanted = f"document {request.document_id}"
            else:
                url = urldefrag((request.url or "").strip()).url
                query = query.where(Document.source_url == url)
                wanted = f"page at {url}"
            candidates = list(session.execute(query.limit(100)).all())
            if not candidates:
                raise NotFoundError(f"no {wanted} is indexed", hint="search first: use a result's source_url")
            versions = sort_versions([v for _, _, v in candidates if v is not None])
            chosen = _choose(candidates, request.sdk_version, versions, wanted)
            document, sdk_name, sdk_version = chosen
            chunks = list(
                session.scalars(select(Chunk).where(Chunk.document_id == document.id).order_by(Chunk.ordinal))
            )
            return _page(document, sdk_name, sdk_version, versions, chunks, request)


def _choose(candidates: list[Any], version: str | None, versions: list[str], wanted: str) -> Any:
    if version is not None:
        for row in candidates:
            if row[2] == version:
                return row
        raise NotFoundError(
            f"{wanted} is not indexed at version {version}",
            hint=f"indexed versions: {', '.join(versions) or 'none'}",
        )
    if versions:
        return next(row for row in candidates if row[2] == versions[0])
    return candidates[0]


def _page(
    document: Document,
    sdk_name: str | None,
    sdk_version: str | None,
    versions: list[str],
    chunks: list[Chunk],
    request: PageRequest,
) -> dict[str, Any]:
    window: list[Chunk] = []
    used = 0
    for chunk in chunks[request.start_chunk :]:
        if window and used + len(chunk.content) + len(chunk.section_path) > request.max_chars:
            break
        window.append(chunk)  # the first chunk always fits, cut if it alone is too long
        used += len(chunk.content) + len(chunk.section_path)
    text = _markdown(window)
    cut = len(text) > request.max_chars
    following = request.start_chunk + len(window)
    return {
        "document_id": document.id,
        "url": document.source_url,
        "title": document.title,
        "sdk_name": sdk_name,
        "sdk_version": sdk_version,
        "other_versions": [v for v in versions if v != sdk_version],
        "document_version": document.current_version_no,
        "fetched_at": as_utc(document.updated_at).isoformat() if document.updated_at else None,
        "chunk_count": len(chunks),
        "start_chunk": request.start_chunk,
        "next_chunk": following if following < len(chunks) else None,
        "truncated": cut or following < len(chunks),
        "sections": [
            {"ordinal": c.ordinal, "section_path": c.section_path, "entity_name": c.entity_name}
            for c in window
        ],
        "content": text[: request.max_chars],
    }


def _markdown(window: list[Chunk]) -> str:
    """The chunks as Markdown, each section's heading restored (chunks store it in section_path)."""
    parts: list[str] = []
    previous = None
    for chunk in window:
        path = [part.strip() for part in chunk.section_path.split(">") if part.strip()]
        if path and chunk.section_path != previous:
            parts.append(f"{'#' * min(len(path), 6)} {path[-1]}")
        previous = chunk.section_path
        parts.append(chunk.content)
    return "\n\n".join(parts)
