"""What every source yields: files to ingest, and problems met while listing them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from librarian.ingest.parsed import ParsedDocument


@dataclass(frozen=True)
class SourceFile:
    """A file to ingest. ``path`` is relative to the source root, with ``/`` separators."""

    path: str
    absolute_path: Path
    url: str


@dataclass(frozen=True)
class SourceProblem:
    """A file (or the source itself) that could not be listed or read, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class SourceDocument:
    """A document a connector builds itself (CLI help, package introspection, OpenAPI operations).

    It skips file reading and parsing: ``parsed`` holds its sections, typically one per entity
    (``Section.path`` ending with the entity name, ``entity_type`` such as ``command``, ``option``,
    ``function``, ``class`` or ``operation``). ``text`` is the document's canonical text: its hash
    decides whether a re-ingest changed anything, and it is kept as the document's version history.

    Attributes:
        path: stable identity inside the source, e.g. ``s3api/put-object`` or ``requests.Session.get``.
        url: provenance shown with every chunk, e.g. ``cli://aws/s3api/put-object``.
        text: canonical text of the whole document.
        parsed: the document's sections.
        metadata: structured facts kept on every chunk of the document (e.g. ``{"options": [...]}``).
        etag: the HTTP ``ETag`` of a fetched page, stored for the next conditional request.
        last_modified: the HTTP ``Last-Modified`` of a fetched page, likewise.
    """

    path: str
    url: str
    text: str
    parsed: ParsedDocument
    metadata: dict[str, Any] = field(default_factory=dict)
    etag: str | None = None
    last_modified: str | None = None


@dataclass
class SourceListing:
    """Everything a source yields for one ingest run.

    ``revision`` identifies the listed state when the source knows one (a git commit), so an unchanged
    repository can be skipped without reading a file. ``unchanged_paths`` names documents the source
    knows to be unchanged without reading them again (a web page that answered 304 Not Modified): the
    pipeline keeps them as stored, neither re-chunked nor deleted.
    """

    root: Path
    files: list[SourceFile]
    problems: list[SourceProblem]
    revision: str | None = None
    documents: list[SourceDocument] = field(default_factory=list)
    unchanged_paths: list[str] = field(default_factory=list)
