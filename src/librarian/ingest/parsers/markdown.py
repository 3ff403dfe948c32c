"""Markdown parser: YAML front matter plus one section per heading.

Headings are found with markdown-it-py's block parser, whose token line maps tell exactly where each
heading sits, so a ``#`` line inside a fenced code block or an HTML block never splits anything. Each
section keeps its source Markdown verbatim; only the heading line itself is left out, because the
heading titles travel in :attr:`Section.path`.

The module also holds the two helpers other parsers use to emit Markdown-like text (:func:`fence`
and :func:`code_span`), since Markdown is the common output format of all parsers.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from librarian.errors import InvalidInputError
from librarian.ingest.parsed import ParsedDocument, ParseError, Section
from librarian.safe_yaml import load_yaml

__all__ = ["code_span", "fence", "parse_markdown", "split_front_matter"]

# Bounds the work spent turning front matter into JSON-ready values: YAML aliases can make a small
# file describe an exponentially large structure ("billion laughs").
_MAX_METADATA_NODES = 10_000

_FRONT_MATTER_OPEN = re.compile(r"\A---[ \t]*\n")
_FRONT_MATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)


def _block_parser() -> MarkdownIt:
    # Only block structure is needed to find headings; skipping inline parsing saves time and avoids
    # the inline parser's worst cases on hostile input. maxNesting bounds nested quotes and lists.
    md = MarkdownIt("commonmark", {"maxNesting": 20})
    md.disable("inline")
    return md


_BLOCK_MD = _block_parser()
_INLINE_MD = MarkdownIt("commonmark", {"maxNesting": 20})


def parse_markdown(text: str) -> ParsedDocument:
    """Parse Markdown (optionally with YAML front matter) into sections.

    Args:
        text: the decoded document.

    Returns:
        The document: title from front matter ``title``, else the first H1; front matter keys as
        metadata (dates turned into ISO strings); one section per heading, plus a preamble section
        with an empty path for text before the first heading.

    Raises:
        ParseError: the front matter is not valid YAML (the message names the line) or not a mapping.

    Example:
        >>> doc = parse_markdown("---\\ntitle: S3\\n---\\n# Intro\\nHello\\n")
        >>> doc.title, doc.sections[0].path, doc.sections[0].text
        ('S3', ('Intro',), 'Hello')
    """
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    metadata, body = split_front_matter(text)
    lines = body.split("\n")
    tokens = _BLOCK_MD.parse(body)

    # (first line of the heading, first line after it, path) for each structuring heading.
    headings: list[tuple[int, int, tuple[str, ...]]] = []
    stack: list[tuple[int, str]] = []
    first_h1: str | None = None
    for index, token in enumerate(tokens):
        # Only top-level headings structure the document; one inside a list or quote is content.
        if token.type != "heading_open" or token.level != 0 or token.map is None:
            continue
        level = int(token.tag[1:])
        title = _heading_title(tokens[index + 1])
        if level == 1 and first_h1 is None:
            first_h1 = title
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        headings.append((token.map[0], token.map[1], tuple(t for _, t in stack)))

    sections: list[Section] = []
    preamble = _trim_blank_lines("\n".join(lines[: headings[0][0] if headings else len(lines)]))
    if preamble:
        sections.append(Section(path=(), text=preamble))
    for number, (_, body_start, path) in enumerate(headings):
        body_end = headings[number + 1][0] if number + 1 < len(headings) else len(lines)
        # Sections with an empty body are kept: they carry structure, and chunking skips them.
        sections.append(Section(path=path, text=_trim_blank_lines("\n".join(lines[body_start:body_end]))))

    front_title = metadata.get("title")
    return ParsedDocument(
        title=str(front_title) if front_title is not None else first_h1,
        sections=sections,
        metadata=metadata,
    )


def _heading_title(inline: Token) -> str:
    parts: list[str] = []
    for token in _INLINE_MD.parseInline(inline.content)[0].children or []:
        if token.type in {"text", "code_inline", "image"}:
            parts.append(token.content)
        elif token.type in {"softbreak", "hardbreak"}:
            parts.append(" ")
    return " ".join("".join(parts).split())


def _trim_blank_lines(text: str) -> str:
    """Drop blank lines at both ends but keep the first line's indentation (indented code)."""
    lines = text.split("\n")
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(line.rstrip() for line in lines[start:end])


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Separate YAML front matter (between ``---`` lines at the very top) from the body.

    Returns:
        The front matter as a JSON-ready dict (empty without front matter) and the rest of the text.

    Raises:
        ParseError: the YAML is invalid (naming the file line) or is not a mapping.
    """
    opening = _FRONT_MATTER_OPEN.match(text)
    if not opening:
        return {}, text
    closing = _FRONT_MATTER_CLOSE.search(text, opening.end())
    if not closing:
        # An unclosed block is a thematic break followed by text, not front matter.
        return {}, text
    raw = text[opening.end() : closing.start()]
    try:
        # The YAML starts on the file's second line, after the opening ---.
        data = load_yaml(raw, "front matter", max_nodes=_MAX_METADATA_NODES, line_offset=1)
    except InvalidInputError as exc:
        raise ParseError(exc.message) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParseError(f"front matter must be a YAML mapping of keys to values, not {type(data).__name__}")
    budget = [_MAX_METADATA_NODES]
    metadata = {str(key): _json_ready(value, budget) for key, value in data.items()}
    return metadata, text[closing.end() + 1 :]


def _json_ready(value: Any, budget: list[int]) -> Any:
    """``value`` with dates as ISO strings and unknown types as strings, so metadata stores as JSON."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ParseError(f"front matter is too large (more than {_MAX_METADATA_NODES} values)")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _json_ready(v, budget) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_ready(v, budget) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def fence(code: str, language: str = "") -> str:
    """Wrap ``code`` in a Markdown code fence that the code itself cannot close.

    Example:
        >>> fence("aws s3 ls", "bash")
        '```bash\\naws s3 ls\\n```'
    """
    longest = max((len(m.group(1)) for m in re.finditer(r"^[ \t]*(`{3,})", code, re.MULTILINE)), default=0)
    marker = "`" * max(3, longest + 1)
    return f"{marker}{language}\n{code.strip(chr(10)).rstrip()}\n{marker}"


def code_span(text: str) -> str:
    """Inline Markdown code, with enough backticks to hold backticks inside ``text``."""
    ticks = "``" if "`" in text else "`"
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{padding}{text}{padding}{ticks}"
