"""PDF parser: one section per page, labelled with the outline (bookmarks) when the PDF has one.

A page is the unit a reader cites ("see page 12"), so pages are never merged or split here; the
outline only adds the chapter headings in force on each page to the section path.
"""

from __future__ import annotations

import io
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from pypdf import PdfReader
from pypdf.errors import DependencyError, PyPdfError

from librarian.ingest.parsed import ParsedDocument, ParseError, Section

__all__ = ["parse_pdf"]

# Bounds the work spent on the outline of a large or hostile PDF; past it, pages go unlabelled.
_MAX_OUTLINE_ENTRIES = 5_000

# pypdf reports malformed input not only through its own errors but also through the built-in
# exceptions its parsing code trips over; these are the ones seen on damaged files.
_PDF_FAILURES = (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError)


@dataclass(frozen=True)
class _OutlineEntry:
    level: int
    title: str
    page: int


def parse_pdf(data: bytes) -> ParsedDocument:
    """Parse a PDF into one ``page`` section per page with extractable text.

    Args:
        data: the raw file.

    Returns:
        The document: title from the PDF metadata (None when absent); each section's path is
        ``(title, *outline headings in force on the page, "page N")``. Pages whose text cannot be
        extracted are skipped and listed in ``metadata["unreadable_pages"]``.

    Raises:
        ParseError: the data is not a PDF, is damaged beyond reading, or is encrypted with a password.
    """
    if b"%PDF-" not in data[:1024]:
        raise ParseError("not a PDF file: the %PDF- header is missing")
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        _decrypt(reader)
        page_count = len(reader.pages)
    except _PDF_FAILURES as exc:
        raise ParseError(f"damaged PDF: {exc}") from exc
    if page_count == 0:
        raise ParseError("damaged PDF: no pages could be found")

    title = _metadata_title(reader)
    trails = _outline_trails(reader, page_count)
    sections: list[Section] = []
    unreadable: list[int] = []
    for index in range(page_count):
        try:
            text = reader.pages[index].extract_text()
        except _PDF_FAILURES:
            # One broken page should not lose the rest of a manual; the gap is reported below.
            unreadable.append(index + 1)
            continue
        text = _clean(text)
        if not text:
            continue
        path = (*([title] if title else []), *trails[index], f"page {index + 1}")
        sections.append(Section(path=path, text=text, entity_type="page"))
    if unreadable and len(unreadable) == page_count:
        raise ParseError(f"damaged PDF: text could not be extracted from any of its {page_count} pages")

    metadata: dict[str, Any] = {"page_count": page_count}
    if unreadable:
        metadata["unreadable_pages"] = unreadable
    return ParsedDocument(title=title, sections=sections, metadata=metadata)


def _decrypt(reader: PdfReader) -> None:
    if not reader.is_encrypted:
        return
    try:
        # Many PDFs are encrypted only to restrict printing or copying, with an empty user password.
        decrypted = reader.decrypt("")
    except DependencyError as exc:
        raise ParseError(f"encrypted PDF needs a decryption package: {exc}") from exc
    if not decrypted:
        raise ParseError("encrypted PDF: it needs a password to open")


def _metadata_title(reader: PdfReader) -> str | None:
    try:
        raw = reader.metadata.title if reader.metadata else None
    except _PDF_FAILURES:
        return None
    title = " ".join(str(raw).split()) if raw else ""
    # Producers fill the field with placeholders that would make every PDF look alike.
    return title if title and title.lower() not in {"untitled", "unknown", "title"} else None


def _outline_trails(reader: PdfReader, page_count: int) -> list[tuple[str, ...]]:
    """For each page, the outline headings (outermost first) of the latest entry starting on or before it."""
    trails: list[tuple[str, ...]] = [() for _ in range(page_count)]
    try:
        entries = _flatten_outline(reader, reader.outline, 0, [])
    except _PDF_FAILURES:
        return trails  # the outline is optional; a broken one just leaves pages unlabelled
    entries.sort(key=lambda entry: entry.page)  # stable: same-page entries keep document order
    stack: list[_OutlineEntry] = []
    position = 0
    for page in range(page_count):
        while position < len(entries) and entries[position].page <= page:
            entry = entries[position]
            while stack and stack[-1].level >= entry.level:
                stack.pop()
            stack.append(entry)
            position += 1
        trails[page] = tuple(entry.title for entry in stack)
    return trails


def _flatten_outline(
    reader: PdfReader, items: Any, level: int, out: list[_OutlineEntry]
) -> list[_OutlineEntry]:
    for item in items:
        if len(out) >= _MAX_OUTLINE_ENTRIES:
            break
        if isinstance(item, list):
            _flatten_outline(reader, item, level + 1, out)
            continue
        page = reader.get_destination_page_number(item)
        title = " ".join(str(item.title or "").split())
        if page is not None and page >= 0 and title:
            out.append(_OutlineEntry(level=level, title=title, page=page))
    return out


def _clean(text: str) -> str:
    # Layout extraction indents whole pages; dedenting stops the chunker reading them as code.
    lines = [line.rstrip() for line in textwrap.dedent(text.replace("\x00", "")).split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
