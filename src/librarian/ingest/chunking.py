"""Turn parsed sections into chunks: one per section when it fits, split at paragraphs otherwise.

Chunks are embedded with a small sentence model (256 word pieces) and indexed lexically, so the aim
is one chunk per logical unit (a command, option, function, class or section) and chunks that read
well alone. The rules, in order:

1. A section with no text makes no chunk.
2. A section that fits in ``max_chars`` is one chunk, its text unchanged.
3. A longer section is cut into units (paragraphs, fenced code blocks, indented code blocks) and the
   units are packed greedily into chunks of at most ``max_chars``. A paragraph ending in a colon
   stays with the code block it introduces when both fit. A code block is never cut: one longer than
   ``max_chars`` becomes a chunk of its own. A paragraph longer than ``max_chars`` is cut at line,
   then sentence, then word boundaries.
4. Only when asked (``merge_below``), consecutive tiny sections under the same parent heading are
   merged into one chunk named after the parent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from librarian.ingest.parsed import ChunkDraft, ParsedDocument, Section

__all__ = ["chunk_document", "clean_entity_name", "infer_entity_type", "split_text"]

_FENCE_OPEN = re.compile(r"^[ \t]*(?P<marker>`{3,}|~{3,})(?P<info>.*)$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_MARKDOWN_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TRAILING_PARENS = re.compile(r"\s*\([^()]*\)$")
_OPTION = re.compile(r"^-{1,2}[A-Za-z0-9][\w.-]*(?:[\s,|=<\[(]|$)")
_OPTION_TOKEN = re.compile(r"-{1,2}[A-Za-z0-9][\w.-]*")
_FUNCTION = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\(.*\)$")
_CLASS = re.compile(r"^class\s+(?P<name>[A-Za-z_][\w.]*)")
_GENERIC_TYPE = "section"


@dataclass(frozen=True)
class _Unit:
    text: str
    is_code: bool


def chunk_document(
    doc: ParsedDocument,
    *,
    max_chars: int,
    default_entity_type: str = "section",
    merge_below: int = 0,
) -> list[ChunkDraft]:
    """Cut a parsed document into chunks.

    Args:
        doc: the parsed document.
        max_chars: the size a chunk should not exceed; only a single code block may (see module doc).
        default_entity_type: the entity type for sections whose parser did not know better and whose
            heading does not look like an option, function or class (e.g. ``command`` for a page that
            documents one CLI command).
        merge_below: if positive, consecutive sibling sections each shorter than this many characters
            are merged into one chunk (at most ``max_chars``) named after their parent heading, each
            part led by its heading in bold. Off by default: every section stays its own chunk.

    Returns:
        Chunks in reading order. ``entity_name`` is the deepest heading, cleaned of markup, trailing
        parentheses and colons (the document title for text before any heading); ``content`` never
        repeats the heading path, which callers keep in ``section_path``.

    Raises:
        ValueError: ``max_chars`` is not positive.

    Example:
        >>> from librarian.ingest.parsed import Section
        >>> doc = ParsedDocument(title="S3", sections=[Section(("API", "`put_object()`"), "Stores.")])
        >>> chunk = chunk_document(doc, max_chars=1000)[0]
        >>> chunk.entity_name, chunk.entity_type, chunk.content
        ('put_object', 'function', 'Stores.')
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    sections = [s for s in doc.sections if s.text.strip()]
    if merge_below > 0:
        sections = _merge_tiny(sections, merge_below, max_chars)

    chunks: list[ChunkDraft] = []
    for section in sections:
        heading = section.path[-1] if section.path else None
        entity_type = section.entity_type
        if entity_type == _GENERIC_TYPE:
            entity_type = (infer_entity_type(heading) if heading else None) or default_entity_type
        if heading is not None:
            name: str | None = clean_entity_name(heading, entity_type)
        else:
            name = clean_entity_name(doc.title, entity_type) if doc.title else None
        for content in split_text(section.text, max_chars):
            chunks.append(
                ChunkDraft(
                    section_path=section.path, entity_name=name, entity_type=entity_type, content=content
                )
            )
    return chunks


def split_text(text: str, max_chars: int) -> list[str]:
    """Split one section's text into pieces of at most ``max_chars``, never inside a code block.

    Returns the text unchanged (trimmed of blank lines at its ends) as the only piece when it fits,
    and no pieces for blank text.

    Example:
        >>> split_text("one\\n\\n```\\nlong code\\n```\\n\\ntwo", 12)
        ['one', '```\\nlong code\\n```', 'two']
    """
    text = text.strip("\n")
    if not text.strip():
        return []
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for unit in _bind_introductions(_units(text), max_chars):
        parts = (
            [unit.text] if unit.is_code or len(unit.text) <= max_chars else _split_prose(unit.text, max_chars)
        )
        for part in parts:
            added = len(part) + (2 if current else 0)
            if current and size + added > max_chars:
                pieces.append("\n\n".join(current))
                current, size, added = [], 0, len(part)
            current.append(part)
            size += added
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def _units(text: str) -> list[_Unit]:
    """Cut text into paragraphs and code blocks (fenced, or indented by four spaces or a tab)."""
    lines = text.split("\n")
    units: list[_Unit] = []
    paragraph: list[str] = []
    # Indented lines after a list item continue the item (CommonMark), they are not code.
    in_list = False

    def end_paragraph() -> None:
        nonlocal in_list
        if paragraph:
            first = paragraph[0]
            if _LIST_ITEM.match(first):
                in_list = True
            elif not _is_indented(first):
                in_list = False
            units.append(_Unit("\n".join(paragraph), is_code=False))
            paragraph.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        opening = _FENCE_OPEN.match(line)
        if opening and not (opening["marker"][0] == "`" and "`" in opening["info"]):
            end_paragraph()
            end = index + 1
            while end < len(lines) and not _closes_fence(lines[end], opening["marker"]):
                end += 1
            # An unclosed fence runs to the end of the text, as in CommonMark.
            units.append(_Unit("\n".join(lines[index : end + 1]), is_code=True))
            index = end + 1
        elif not line.strip():
            end_paragraph()
            index += 1
        elif _is_indented(line) and not paragraph and not in_list:
            end = index
            while end < len(lines):
                if _is_indented(lines[end]):
                    end += 1
                    continue
                following = end
                while following < len(lines) and not lines[following].strip():
                    following += 1
                if following < len(lines) and following > end and _is_indented(lines[following]):
                    end = following
                    continue
                break
            units.append(_Unit("\n".join(lines[index:end]), is_code=True))
            index = end
        else:
            paragraph.append(line)
            index += 1
    end_paragraph()
    return units


def _is_indented(line: str) -> bool:
    return line.startswith(("    ", "\t")) and bool(line.strip())


def _closes_fence(line: str, marker: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(marker) and stripped == marker[0] * len(stripped)


def _bind_introductions(units: list[_Unit], max_chars: int) -> list[_Unit]:
    """Join "Output:"-style paragraphs to the code block they introduce, when both fit in a chunk."""
    bound: list[_Unit] = []
    index = 0
    while index < len(units):
        unit = units[index]
        following = units[index + 1] if index + 1 < len(units) else None
        if (
            following is not None
            and following.is_code
            and not unit.is_code
            and unit.text.rstrip().endswith(":")
            and len(unit.text) + 2 + len(following.text) <= max_chars
        ):
            bound.append(_Unit(f"{unit.text}\n\n{following.text}", is_code=True))
            index += 2
        else:
            bound.append(unit)
            index += 1
    return bound


def _split_prose(text: str, max_chars: int) -> list[str]:
    """Cut an over-long paragraph at lines, then sentences, then words, then anywhere."""
    for separator, pattern in (("\n", re.compile(r"\n")), (" ", _SENTENCE_END), (" ", re.compile(r"\s+"))):
        parts = [p for p in pattern.split(text) if p.strip()]
        if len(parts) > 1:
            return _pack(parts, separator, max_chars)
    return [text[start : start + max_chars] for start in range(0, len(text), max_chars)]


def _pack(parts: list[str], separator: str, max_chars: int) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for part in parts:
        added = len(part) + (len(separator) if current else 0)
        if current and (size + added > max_chars or len(part) > max_chars):
            pieces.append(separator.join(current))
            current, size, added = [], 0, len(part)
        if len(part) > max_chars:
            pieces.extend(_split_prose(part, max_chars))
            added = 0
            continue
        current.append(part)
        size += added
    if current:
        pieces.append(separator.join(current))
    return pieces


def _merge_tiny(sections: list[Section], merge_below: int, max_chars: int) -> list[Section]:
    """Merge runs of tiny sibling sections (see :func:`chunk_document`)."""

    def mergeable(section: Section) -> bool:
        return (
            bool(section.path)
            and len(section.text.strip()) < merge_below
            and section.entity_type == _GENERIC_TYPE
            and infer_entity_type(section.path[-1]) is None
        )

    merged: list[Section] = []
    run: list[Section] = []

    def close_run() -> None:
        if len(run) == 1:
            merged.append(run[0])
        elif run:
            text = "\n\n".join(f"**{clean_entity_name(s.path[-1])}**\n\n{s.text.strip()}" for s in run)
            merged.append(Section(path=run[0].path[:-1], text=text))
        run.clear()

    for section in sections:
        if not mergeable(section):
            close_run()
            merged.append(section)
            continue
        if run:
            size = sum(len(s.text) + len(s.path[-1]) + 8 for s in [*run, section])
            if run[0].path[:-1] != section.path[:-1] or size > max_chars:
                close_run()
        run.append(section)
    close_run()
    return merged


def infer_entity_type(heading: str) -> str | None:
    """Guess the entity type from a heading that has the shape of an option, function or class.

    Example:
        >>> infer_entity_type("--bucket (string)"), infer_entity_type("`get_object(**kwargs)`")
        ('option', 'function')
        >>> infer_entity_type("class Bucket(Resource)"), infer_entity_type("Getting started")
        ('class', None)
    """
    plain = _strip_markup(heading)
    if _OPTION.match(plain):
        return "option"
    if _CLASS.match(plain):
        return "class"
    if _FUNCTION.match(plain.rstrip(":").rstrip()):
        return "function"
    return None


def clean_entity_name(heading: str, entity_type: str | None = None) -> str:
    """The name a heading gives its entity: markup, trailing parentheses and colons removed.

    For options the longest option token is kept (``-h, --help`` gives ``--help``); for classes the
    ``class`` keyword is dropped.

    Example:
        >>> clean_entity_name("`put_object(Bucket, Key)`:"), clean_entity_name("**Example 1:**")
        ('put_object', 'Example 1')
    """
    plain = _strip_markup(heading)
    if (entity_type or infer_entity_type(heading)) == "option" and plain.startswith("-"):
        return max(_OPTION_TOKEN.findall(plain), key=len, default=plain)
    klass = _CLASS.match(plain)
    if klass:
        return klass["name"]
    name = plain
    while True:
        stripped = _TRAILING_PARENS.sub("", name.rstrip(":").rstrip())
        if stripped == name or not stripped:
            break
        name = stripped
    return name.rstrip(":").rstrip() or plain


def _strip_markup(text: str) -> str:
    text = _MARKDOWN_LINK.sub(r"\1", text)
    text = text.replace("`", "").replace("**", "").strip("* ")
    return " ".join(text.split())
