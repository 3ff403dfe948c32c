"""Plain-text parser: the whole file is one section; chunking splits it at blank lines."""

from __future__ import annotations

import textwrap

from librarian.ingest.parsed import ParsedDocument, Section

__all__ = ["parse_text"]

# A first line longer than this is a paragraph, not a title.
_MAX_TITLE_CHARS = 200


def parse_text(text: str) -> ParsedDocument:
    """Parse plain text into a single section with an empty path.

    Args:
        text: the decoded document.

    Returns:
        The document: title is the first non-blank line when it is short enough to be one (else
        None); one section holding the whole text, or none for a blank file.

    Example:
        >>> doc = parse_text("Release notes\\n\\nFixed a crash.\\n")
        >>> doc.title, doc.sections[0].text
        ('Release notes', 'Release notes\\n\\nFixed a crash.')
    """
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    # A uniformly indented file would otherwise read as one indented code block to the chunker.
    lines = [line.rstrip() for line in textwrap.dedent(text).split("\n")]
    body = "\n".join(lines).strip("\n")
    first = next((line.strip() for line in lines if line.strip()), "")
    title = first if first and len(first) <= _MAX_TITLE_CHARS else None
    sections = [Section(path=(), text=body)] if body else []
    return ParsedDocument(title=title, sections=sections)
