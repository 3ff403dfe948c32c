"""Choose a parser by file extension, decode text strictly, and recognise binary files."""

from __future__ import annotations

import codecs
import dataclasses
import importlib
from collections.abc import Callable
from pathlib import PurePosixPath

from librarian.ingest.parsed import ParsedDocument, ParseError

__all__ = ["SUPPORTED_EXTENSIONS", "decode_text", "detect_format", "is_probably_binary", "parse_document"]

_FORMATS: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".rst": "rst",
    ".rest": "rst",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".txt": "text",
    ".text": "text",
}

SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_FORMATS)
"""Lower-case extensions :func:`parse_document` accepts; files without an extension are read as text."""

# Each parser's module is imported on first use: their libraries (pypdf, lxml, markdown-it, docutils)
# cost about a second at start-up, which a command that never parses (a search) should not pay.
_PARSERS: dict[str, tuple[str, str]] = {
    "markdown": ("librarian.ingest.parsers.markdown", "parse_markdown"),
    "rst": ("librarian.ingest.parsers.rst", "parse_rst"),
    "html": ("librarian.ingest.parsers.html", "parse_html"),
    "text": ("librarian.ingest.parsers.text", "parse_text"),
    "pdf": ("librarian.ingest.parsers.pdf", "parse_pdf"),
}


def _parser(kind: str) -> Callable[..., ParsedDocument]:
    module, name = _PARSERS[kind]
    parser: Callable[..., ParsedDocument] = getattr(importlib.import_module(module), name)
    return parser


_SNIFF_BYTES = 8192
# Control bytes that ordinary text does contain: backspace, tab, newline, form feed, CR, escape.
_TEXT_CONTROLS = frozenset(b"\b\t\n\f\r\x1b")
_BINARY_CONTROL_RATIO = 0.10
# Checked longest first: the UTF-32 LE mark begins with the UTF-16 LE one.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def detect_format(name: str) -> str | None:
    """The parser ``name`` would get: ``markdown``, ``rst``, ``html``, ``pdf``, ``text``, or None.

    Files without an extension (``README``, ``LICENSE``) are text; so are dotfiles such as ``.gitignore``.

    Example:
        >>> detect_format("docs/Guide.MD"), detect_format("README"), detect_format("logo.png")
        ('markdown', 'text', None)
    """
    suffix = PurePosixPath(name.replace("\\", "/")).suffix.lower()
    if not suffix:
        return "text"
    return _FORMATS.get(suffix)


def is_probably_binary(data: bytes) -> bool:
    """Guess from the first 8 KiB whether ``data`` is binary rather than text.

    A NUL byte, or more than 10 % control bytes other than tab, newlines, form feed, backspace and
    escape, means binary. Text with a UTF-16 or UTF-32 byte order mark is text despite its NULs, and
    data starting with the PDF signature is a document, not binary, because PDFs are parsed too.

    Example:
        >>> is_probably_binary(b"# Title\\n"), is_probably_binary(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00")
        (False, True)
    """
    sample = data[:_SNIFF_BYTES]
    if not sample:
        return False
    if any(sample.startswith(bom) for bom, encoding in _BOMS if encoding != "utf-8"):
        return False
    if sample.startswith(b"%PDF-"):
        return False
    if b"\x00" in sample:
        return True
    controls = sum(1 for byte in sample if (byte < 0x20 or byte == 0x7F) and byte not in _TEXT_CONTROLS)
    return controls / len(sample) > _BINARY_CONTROL_RATIO


def decode_text(data: bytes) -> str:
    """Decode a text file: UTF-8 (a byte order mark is dropped), or UTF-16/32 when a BOM says so.

    Line endings are normalised to ``\\n``.

    Raises:
        ParseError: the bytes are not valid in the encoding, naming the byte offset and line.

    Example:
        >>> decode_text(b"\\xef\\xbb\\xbfcaf\\xc3\\xa9\\r\\n")
        'café\\n'
    """
    encoding, start = "utf-8", 0
    for bom, candidate in _BOMS:
        if data.startswith(bom):
            encoding, start = candidate, len(bom)
            break
    try:
        text = data[start:].decode(encoding)
    except UnicodeDecodeError as exc:
        offset = start + exc.start
        line = data[:offset].count(b"\n") + 1
        label = "UTF-8" if encoding == "utf-8" else encoding.upper()
        raise ParseError(
            f"not valid {label} at byte {offset} (line {line}); convert the file to UTF-8"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_document(name: str, data: bytes) -> ParsedDocument:
    """Parse one file, choosing the parser from the extension of ``name``.

    Args:
        name: the file's name or path (only the extension and stem are used).
        data: the raw bytes.

    Returns:
        The parsed document. When the format yields no title, the file's stem is used, so that
        chunks of a document without headings still name what they describe.

    Raises:
        ParseError: the extension is not supported, a text file looks binary or is not valid UTF-8,
            or the parser rejected the content. The message starts with ``name``.

    Example:
        >>> parse_document("s3/ls.rst", b"**To list buckets**\\n\\nRun it.\\n").title
        'ls'
    """
    kind = detect_format(name)
    if kind is None:
        suffix = PurePosixPath(name.replace("\\", "/")).suffix
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise ParseError(f"{name}: unsupported file extension {suffix!r} (supported: {supported})")
    try:
        if kind == "pdf":
            document = _parser("pdf")(data)
        else:
            if is_probably_binary(data):
                raise ParseError("looks like a binary file, not text")
            document = _parser(kind)(decode_text(data))
    except ParseError as exc:
        raise ParseError(f"{name}: {exc}") from exc
    if document.title:
        return document
    stem = PurePosixPath(name.replace("\\", "/")).stem
    return dataclasses.replace(document, title=stem or None)
