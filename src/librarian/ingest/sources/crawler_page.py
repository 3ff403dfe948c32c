"""One fetched web page turned into sections, canonical text and the links it holds.

HTML goes through the HTML parser (page chrome dropped, ``<pre>`` kept as fenced code), Markdown
(``.md`` pages, ``text/markdown``, ``llms.txt``) through the Markdown parser, other ``text/plain``
through the plain-text parser. Anything else is not a page.
"""

from __future__ import annotations

import codecs
import dataclasses
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

import httpx

from librarian.ingest.parsed import ParsedDocument, ParseError
from librarian.ingest.parsers.html import html_root, parse_html_root
from librarian.ingest.parsers.markdown import parse_markdown
from librarian.ingest.parsers.registry import decode_text, is_probably_binary
from librarian.ingest.parsers.text import parse_text
from librarian.ingest.sources.crawler_urls import html_links, markdown_links

__all__ = ["Page", "page_format", "read_page"]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
# <meta charset="..."> or <meta http-equiv="Content-Type" content="text/html; charset=...">
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    """A parsed page: its sections, canonical text (hashed to detect change), links, canonical URL and
    robots directives (``noindex``: do not store it; ``nofollow``: do not follow its links)."""

    parsed: ParsedDocument
    text: str
    links: list[str]
    canonical: str | None = None
    directives: frozenset[str] = frozenset()


def page_format(content_type: str, url: str) -> str | None:
    """``html``, ``markdown`` or ``text`` for a page's media type and URL; None when it is no page.

    Markdown is often served as ``text/plain`` (or with no type), so the URL's suffix decides then.

    Example:
        >>> page_format("text/plain", "https://x.org/guide.md"), page_format("image/png", "https://x.org/a")
        ('markdown', None)
    """
    name = PurePosixPath(httpx.URL(url).path).name.lower()
    markdown_name = PurePosixPath(name).suffix in _MARKDOWN_SUFFIXES or name.startswith("llms")
    if content_type in _HTML_TYPES:
        return "html"
    if content_type in _MARKDOWN_TYPES or (markdown_name and content_type in ("text/plain", "")):
        return "markdown"
    if content_type == "text/plain":
        return "text"
    if content_type == "":
        return "html"  # a server that sends no type for a page almost always sends HTML
    return None


def read_page(body: bytes, *, url: str, content_type: str, charset: str | None, user_agent: str = "") -> Page:
    """Decode and parse a fetched page.

    Args:
        body: the response body.
        url: the page URL (relative links resolve against it).
        content_type: the media type the server declared (``text/html``...).
        charset: the declared charset, if any; HTML may also declare one in a ``<meta>`` tag.
        user_agent: the crawler's user agent, whose product name a robots ``<meta>`` may address.

    Raises:
        ParseError: the body is binary, cannot be decoded, or the parser rejects it.
    """
    kind = page_format(content_type, url)
    if kind is None:
        raise ParseError(f"{content_type} is not a page")
    if is_probably_binary(body):
        raise ParseError("binary content, not a page")
    if kind == "html" and charset is None:
        declared = _META_CHARSET.search(body[:4096])
        charset = declared.group(1).decode("ascii").lower() if declared else None
    text = _decode(body, charset)
    if kind == "html":
        root = html_root(text)  # one parse serves the sections and the links
        parsed = parse_html_root(root)
        found = html_links(root, url, user_agent)
        document = _with_title(parsed, url)
        return Page(
            parsed=document,
            text=_render(document),
            links=found.links,
            canonical=found.canonical,
            directives=found.directives,
        )
    parsed = parse_markdown(text) if kind == "markdown" else parse_text(text)
    links = markdown_links(text, url) if kind == "markdown" else []
    return Page(parsed=_with_title(parsed, url), text=text, links=links)


def _decode(body: bytes, charset: str | None) -> str:
    if charset is None or charset.replace("-", "").replace("_", "") in ("utf8", "usascii", "ascii"):
        return decode_text(body)  # strict UTF-8 (or a BOM's encoding), naming a bad byte's line
    try:
        info = codecs.lookup(charset)
    except LookupError as exc:
        raise ParseError(f"unknown charset {charset!r}") from exc
    if not info._is_text_encoding:  # "hex", "base64", "zlib" name codecs, not text encodings
        raise ParseError(f"charset {charset!r} is not a text encoding")
    return body.decode(charset, errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _with_title(parsed: ParsedDocument, url: str) -> ParsedDocument:
    """A page without a title is named after the last segment of its path (or its host)."""
    if parsed.title:
        return parsed
    parts = [part for part in httpx.URL(url).path.split("/") if part]
    return dataclasses.replace(parsed, title=PurePosixPath(parts[-1]).stem if parts else httpx.URL(url).host)


def _render(parsed: ParsedDocument) -> str:
    """The cleaned page as Markdown-like text: title, then each section under its heading."""
    parts = [f"# {parsed.title}"] if parsed.title else []
    for section in parsed.sections:
        if section.path:
            parts.append(f"{'#' * min(len(section.path) + 1, 6)} {section.path[-1]}")
        if section.text:
            parts.append(section.text)
    return "\n\n".join(parts)
