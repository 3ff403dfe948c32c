"""HTML parser: page chrome removed, one section per h1–h6, Markdown-like text.

Parsing uses lxml's libxml2 HTML parser directly rather than BeautifulSoup: measured on 4 MB of random
tag soup, BeautifulSoup (even with the lxml builder) took 40 s, and 240 s once the soup contained
comments, because its tree building is quadratic on such input, whereas libxml2 parses it in
milliseconds. libxml2 caps nesting (256 levels, 2,048 with its huge-tree option), which bounds the
work on hostile documents; a page nested deeper is refused, never stored in part (see
:func:`html_root`). The walk over the tree below is iterative and linear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# lxml ships no type information; "unused-ignore" keeps mypy quiet if lxml-stubs get installed.
from lxml import etree  # type: ignore[import-untyped, unused-ignore]

from librarian.ingest.parsed import ParsedDocument, ParseError, Section
from librarian.ingest.parsers.markdown import code_span, fence

__all__ = ["parse_html"]

# Page chrome and non-text content: never indexed.
_DROPPED_TAGS = frozenset(
    {
        "script", "style", "nav", "footer", "aside", "form", "noscript", "iframe", "svg", "template",
        "head", "button", "select", "object", "embed", "canvas", "dialog", "math",
    }
)  # fmt: skip
_DROPPED_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "complementary"})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Elements that end the running paragraph; everything else is inline.
_BLOCK_TAGS = frozenset(
    {
        "p", "div", "section", "article", "main", "header", "blockquote", "ul", "ol", "li", "dl", "dt",
        "dd", "table", "thead", "tbody", "tfoot", "tr", "caption", "figure", "figcaption", "hr",
        "address", "details", "summary", "body", "html", "center",
    }
)  # fmt: skip
_LANGUAGE_CLASS = re.compile(r"(?:^|\s)(?:language|lang|highlight)-([\w+#.-]+)")
_WHITESPACE = re.compile(r"\s+")
# The deepest nesting libxml2 reads with its huge-tree option.
_MAX_DEPTH = 2048


def parse_html(text: str) -> ParsedDocument:
    """Parse HTML into sections split at headings.

    Args:
        text: the decoded document.

    Returns:
        The document: title from ``<title>``, else the first h1; one section per heading inside
        ``<main>`` when the page has exactly one (else the whole body), with ``<pre>`` as fenced code.

    Example:
        >>> doc = parse_html("<title>T</title><h2>Use</h2><pre>ls -l</pre>")
        >>> doc.title, doc.sections[0].path, doc.sections[0].text
        ('T', ('Use',), '```\\nls -l\\n```')
    """
    return parse_html_root(html_root(text))


def html_root(text: str) -> etree._Element | None:
    """The lxml tree of ``text`` (comments and processing instructions dropped, no network), or
    ``None`` for blank text. Parse once and hand the root to every reader of the page.

    libxml2 drops whatever is nested deeper than 256 elements, silently. A page that deep is parsed
    again with its limit of 2,048 levels; one deeper still is refused rather than stored in part.

    Raises:
        ParseError: the page nests elements more than 2,048 levels deep.
    """
    if not text.strip():
        return None
    data = text.encode("utf-8")
    for huge in (False, True):
        parser = etree.HTMLParser(
            remove_comments=True, remove_pis=True, no_network=True, encoding="utf-8", huge_tree=huge
        )
        root = etree.fromstring(data, parser)
        too_deep = [error for error in parser.error_log if "Excessive depth" in error.message]
        if not too_deep:
            return root
    raise ParseError(
        f"elements nested more than {_MAX_DEPTH:,} levels deep (line {too_deep[0].line}): "
        "the text below that depth cannot be read; flatten the page's nesting"
    )


def parse_html_root(root: etree._Element | None) -> ParsedDocument:
    """:func:`parse_html` of a tree :func:`html_root` built (it is only read, never changed)."""
    if root is None:
        return ParsedDocument(title=None, sections=[])
    title_element = root.find("head/title")
    page_title = _squash("".join(title_element.itertext())) if title_element is not None else ""
    mains = root.findall(".//main")
    writer = _Writer()
    writer.walk(mains[0] if len(mains) == 1 else root)
    return ParsedDocument(title=page_title or writer.first_h1, sections=writer.finish())


@dataclass
class _Block:
    text: str
    # A tight block follows the previous one after a single newline (list items, table rows).
    tight: bool = False


@dataclass
class _Writer:
    """Turns a stream of elements into sections of Markdown-like text."""

    sections: list[Section] = field(default_factory=list)
    first_h1: str | None = None
    _headings: list[tuple[int, str]] = field(default_factory=list)
    _blocks: list[_Block] = field(default_factory=list)
    _inline: list[str] = field(default_factory=list)
    _lists: list[list[int | None]] = field(default_factory=list)
    _tight: int = 0
    _prefix: str = ""
    _group_start: bool = False

    def walk(self, top: etree._Element) -> None:
        walker = etree.iterwalk(top, events=("start", "end"))
        for event, element in walker:
            tag = element.tag if isinstance(element.tag, str) else ""
            if event == "start":
                if self._enter(element, tag):
                    walker.skip_subtree()
            else:
                self._leave(element, tag)
                if element is not top and element.tail:
                    self._text(element.tail)

    def _enter(self, element: etree._Element, tag: str) -> bool:
        """Handle an opening tag; True when its content has been consumed (or must be skipped)."""
        if not tag or tag in _DROPPED_TAGS or element.get("role") in _DROPPED_ROLES:
            return True
        if tag == "header" and not _inside(element, {"article", "main"}):
            return True  # the site banner, not the article's own header
        if tag in _HEADINGS:
            self._heading(_HEADINGS[tag], _squash("".join(element.itertext())))
            return True
        if tag == "pre":
            self._code_block(element)
            return True
        if tag in {"code", "kbd", "samp", "tt"}:
            content = "".join(element.itertext())
            if "\n" in content.strip():
                self._code_block(element)
            elif content.strip():
                self._inline.append(code_span(_squash(content)))
            return True
        if tag == "br":
            self._inline.append("\n")
        elif tag == "img":
            alt = _squash(element.get("alt", ""))
            if alt:
                self._inline.append(alt)
        elif tag in _BLOCK_TAGS:
            self._flush()
            if tag in {"ul", "ol"}:
                self._lists.append([1 if tag == "ol" else None])
            if tag in {"ul", "ol", "table", "dl"}:
                # The first row or item is set apart from what precedes the list or table.
                self._group_start = self._tight == 0
                self._tight += 1
            if tag == "li":
                self._prefix = self._list_marker()
            elif tag == "dd":
                self._prefix = "  "
        elif tag in {"td", "th"} and self._inline:
            self._inline.append(" | ")
        if element.text:
            self._text(element.text)
        return False

    def _leave(self, element: etree._Element, tag: str) -> None:
        if tag in _BLOCK_TAGS and tag not in _DROPPED_TAGS:
            self._flush()
            if tag in {"ul", "ol"} and self._lists:
                self._lists.pop()
            if tag in {"ul", "ol", "table", "dl"} and self._tight:
                self._tight -= 1

    def _list_marker(self) -> str:
        if not self._lists:
            return "- "
        counter = self._lists[-1]
        indent = "  " * (len(self._lists) - 1)
        if counter[0] is None:
            return f"{indent}- "
        number = counter[0]
        counter[0] = number + 1
        return f"{indent}{number}. "

    def _text(self, text: str) -> None:
        self._inline.append(_WHITESPACE.sub(" ", text))

    def _heading(self, level: int, title: str) -> None:
        self._flush()
        if not title:
            return
        self._close_section()
        if level == 1 and self.first_h1 is None:
            self.first_h1 = title
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._headings.append((level, title))

    def _code_block(self, element: etree._Element) -> None:
        self._flush()
        code = "".join(element.itertext()).strip("\n")
        if not code.strip():
            return
        classes = " ".join(e.get("class", "") for e in (element, *element.iterchildren("code")))
        language = _LANGUAGE_CLASS.search(classes)
        self._blocks.append(_Block(fence(code, language.group(1) if language else "")))

    def _flush(self) -> None:
        """End the running paragraph."""
        lines = (line.strip() for line in "".join(self._inline).split("\n"))
        text = "\n".join(line for line in lines if line)
        self._inline.clear()
        if text.replace("|", "").strip():
            self._blocks.append(_Block(self._prefix + text, tight=self._tight > 0 and not self._group_start))
            self._prefix = ""
            self._group_start = False

    def _close_section(self) -> None:
        parts: list[str] = []
        for block in self._blocks:
            if parts:
                parts.append("\n" if block.tight else "\n\n")
            parts.append(block.text)
        text = "".join(parts).strip("\n")
        path = tuple(title for _, title in self._headings)
        if text or path:
            self.sections.append(Section(path=path, text=text))
        self._blocks.clear()

    def finish(self) -> list[Section]:
        """Close the last section and return all sections in reading order."""
        self._flush()
        self._close_section()
        return self.sections


def _inside(element: etree._Element, tags: set[str]) -> bool:
    return any(ancestor.tag in tags for ancestor in element.iterancestors())


def _squash(text: str) -> str:
    return " ".join(text.split())
