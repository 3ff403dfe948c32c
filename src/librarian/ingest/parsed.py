"""The data that flows between sources, parsers and chunking.

Kept free of I/O and storage so each stage can be tested alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Section:
    """One logical section of a document.

    Attributes:
        path: heading titles from the document root down to this section (empty for preamble text).
        text: the section's own body in its source markup, never including subsections. Code blocks
            are kept verbatim (fenced with ``` for Markdown-like output).
        entity_type: what the section documents (``section`` unless a parser knows better, e.g.
            ``page`` for a PDF page).
    """

    path: tuple[str, ...]
    text: str
    entity_type: str = "section"


@dataclass(frozen=True)
class ParsedDocument:
    """A parsed file: its title, its sections in reading order and front-matter metadata."""

    title: str | None
    sections: list[Section]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChunkDraft:
    """A chunk before it is stored: what chunking produces from a parsed document."""

    section_path: tuple[str, ...]
    entity_name: str | None
    entity_type: str
    content: str


class ParseError(Exception):
    """A file could not be parsed; the message says why (and where, when the parser knows a line)."""
