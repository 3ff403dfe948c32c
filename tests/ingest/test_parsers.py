"""Behaviour of the document parsers and of the registry that picks them."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import librarian
from librarian.ingest.parsed import ParseError, Section
from librarian.ingest.parsers.html import parse_html
from librarian.ingest.parsers.markdown import parse_markdown
from librarian.ingest.parsers.pdf import parse_pdf
from librarian.ingest.parsers.registry import (
    SUPPORTED_EXTENSIONS,
    decode_text,
    detect_format,
    is_probably_binary,
    parse_document,
)
from librarian.ingest.parsers.rst import parse_rst
from librarian.ingest.parsers.text import parse_text


def _awscli_example(relative: str) -> str:
    awscli = pytest.importorskip("awscli")
    path = Path(awscli.__file__).parent / "examples" / relative
    return path.read_text(encoding="utf-8")


# --- Markdown ---------------------------------------------------------------------------------------


def test_markdown_heading_inside_code_fence_does_not_split() -> None:
    doc = parse_markdown(
        textwrap.dedent(
            """\
            # Install

            Run the script:

            ```bash
            # Step 1: not a heading
            ./install.sh
            ## not a heading either
            ```

            ~~~
            # still code
            ~~~

            ## Configure
            Edit the file.
            """
        )
    )
    assert [s.path for s in doc.sections] == [("Install",), ("Install", "Configure")]
    install = doc.sections[0].text
    assert "```bash\n# Step 1: not a heading\n./install.sh\n## not a heading either\n```" in install
    assert "~~~\n# still code\n~~~" in install
    assert doc.sections[1].text == "Edit the file."


def test_markdown_sections_follow_heading_hierarchy_and_keep_own_body() -> None:
    doc = parse_markdown(
        "Intro before any heading.\n\n# Guide\nTop.\n## `put_object()`\nStores.\n### Errors\nRaises.\n"
        "## Setext style\n\nOther\n=====\nLast.\n> # quoted heading is content\n"
    )
    assert [(s.path, s.text) for s in doc.sections] == [
        ((), "Intro before any heading."),
        (("Guide",), "Top."),
        (("Guide", "put_object()"), "Stores."),
        (("Guide", "put_object()", "Errors"), "Raises."),
        (("Guide", "Setext style"), ""),
        (("Other",), "Last.\n> # quoted heading is content"),
    ]
    assert doc.title == "Guide"


def test_markdown_front_matter_goes_to_metadata_and_title() -> None:
    doc = parse_markdown(
        "---\ntitle: S3 put-object\nsdk_name: aws-cli\nsdk_version: 2.15.0\nentity_type: command\n"
        "category: storage\ntags: [s3, upload]\nupdated: 2024-05-01\n---\n# Heading title\nBody.\n"
    )
    assert doc.title == "S3 put-object"
    assert doc.metadata == {
        "title": "S3 put-object",
        "sdk_name": "aws-cli",
        "sdk_version": "2.15.0",
        "entity_type": "command",
        "category": "storage",
        "tags": ["s3", "upload"],
        "updated": "2024-05-01",
    }
    assert doc.sections[0].path == ("Heading title",)


def test_markdown_invalid_front_matter_error_names_the_line() -> None:
    source = "---\ntitle: ok\ntags: [a, b\nsdk_name: x\n---\nBody\n"
    with pytest.raises(ParseError, match=r"front matter: invalid YAML at line 4"):
        parse_markdown(source)


def test_markdown_front_matter_must_be_a_mapping() -> None:
    with pytest.raises(ParseError, match="mapping"):
        parse_markdown("---\n- just\n- a list\n---\nBody\n")


def test_markdown_front_matter_alias_bomb_is_refused() -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for n in range(1, 9):
        refs = ", ".join(f"*{chr(96 + n)}" for _ in range(9))
        levels.append(f"{chr(97 + n)}: &{chr(97 + n)} [{refs}]")
    with pytest.raises(ParseError, match="front matter is refused: YAML aliases expand to more than 10,000"):
        parse_markdown("---\n" + "\n".join(levels) + "\n---\nBody\n")


# --- reStructuredText --------------------------------------------------------------------------------


def test_rst_pseudo_headings_on_real_awscli_example() -> None:
    doc = parse_rst(_awscli_example("s3api/put-object-tagging.rst"))
    assert [s.path for s in doc.sections] == [("To set a tag on an object",)]
    text = doc.sections[0].text
    assert text.startswith("The following `put-object-tagging` example sets a tag")
    assert "```\naws s3api put-object-tagging \\\n    --bucket amzn-s3-demo-bucket \\\n" in text
    assert "This command produces no output." in text


def test_rst_awscli_example_with_numbered_examples_gives_one_section_each() -> None:
    doc = parse_rst(_awscli_example("s3/cp.rst"))
    titles = [s.path[-1] for s in doc.sections]
    assert titles[0] == "Example 1: Copying a local file to S3"
    assert len(titles) >= 10
    assert all(t.startswith("Example ") for t in titles)
    first = doc.sections[0].text
    assert "aws s3 cp test.txt s3://amzn-s3-demo-bucket/test2.txt" in first
    assert "**" not in first  # the pseudo-heading itself is not repeated in the body


def test_rst_real_awscli_example_with_admonition_and_section_heading() -> None:
    doc = parse_rst(_awscli_example("redshift/describe-default-cluster-parameters.rst"))
    assert doc.title == "Get a Description of Default Cluster Parameters"
    text = doc.sections[0].text
    assert "```\naws redshift describe-default-cluster-parameters" in text
    assert "Tip: To see a list of valid parameter group families" in text


def test_rst_unknown_sphinx_directives_and_roles_still_parse() -> None:
    doc = parse_rst(
        textwrap.dedent(
            """\
            :orphan:

            Storage API
            ===========

            .. toctree::

               intro

            See :ref:`the guide <guide>` and :py:func:`~storage.open`.

            .. versionadded:: 2.1

            .. py:function:: open(path, mode="r")
               :noindex:

               Open a bucket.

               .. code-block:: python

                  handle = open("x")

            .. py:class:: Bucket(name)

               A bucket.

               .. py:method:: put(key, data)

                  Store data.

            .. some-unknown-extension:: argument
               :odd-option: 1

               Content of an unknown directive.
            """
        )
    )
    by_path: dict[tuple[str, ...], Section] = {}
    for section in doc.sections:
        by_path.setdefault(section.path, section)
    assert doc.title == "Storage API"
    assert doc.metadata == {"orphan": ""}
    intro = by_path[("Storage API",)].text
    assert "See the guide and `open`." in intro
    assert "New in version 2.1." in intro
    assert "intro" not in intro.split()  # toctree entries are navigation, not content
    function = by_path[("Storage API", 'open(path, mode="r")')]
    assert function.entity_type == "function"
    assert function.text == 'Open a bucket.\n\n```python\nhandle = open("x")\n```'
    assert by_path[("Storage API", "Bucket(name)")].entity_type == "class"
    assert by_path[("Storage API", "Bucket(name)", "put(key, data)")].text == "Store data."
    # Text after the class description returns to the enclosing section, in reading order.
    assert doc.sections[-1].path == ("Storage API",)
    assert doc.sections[-1].text == "argument\n\nContent of an unknown directive."


def test_rst_never_reads_files_or_passes_raw_markup() -> None:
    doc = parse_rst(
        "Title\n=====\n\n.. include:: /etc/passwd\n\n.. raw:: html\n\n   <script>alert(1)</script>\n\n"
        ".. csv-table::\n   :file: /etc/passwd\n\nSafe text.\n"
    )
    text = "\n".join(s.text for s in doc.sections)
    assert "root:" not in text
    assert "<script>" not in text
    assert "Safe text." in text


def test_rst_literal_blocks_are_fenced_verbatim() -> None:
    doc = parse_rst("Usage\n=====\n\nRun::\n\n    aws s3 ls \\\n        --recursive\n\n    # comment\n")
    assert doc.sections[0].text == "Run:\n\n```\naws s3 ls \\\n    --recursive\n\n# comment\n```"


def test_rst_overlong_line_is_refused_with_its_line_number() -> None:
    with pytest.raises(ParseError, match="line 3 is longer"):
        parse_rst("Title\n=====\n" + "x" * 200_000 + "\n")


# --- HTML -------------------------------------------------------------------------------------------


def test_html_drops_chrome_and_splits_by_headings() -> None:
    doc = parse_html(
        """<html><head><title>S3 Guide</title><style>p {}</style><script>var secret = 1;</script></head>
        <body><header><h1>Site banner</h1></header><nav><a href="/">Home</a></nav>
        <h1>Using <code>put_object</code></h1><p>Uploads   an object.</p>
        <h2>Example</h2>
        <pre><code class="language-python">s3.put_object(
    Bucket="b",
)</code></pre>
        <aside>Related links</aside><form><p>Search</p></form>
        <footer>Copyright</footer></body></html>"""
    )
    assert doc.title == "S3 Guide"
    assert [(s.path, s.text) for s in doc.sections] == [
        (("Using put_object",), "Uploads an object."),
        (("Using put_object", "Example"), '```python\ns3.put_object(\n    Bucket="b",\n)\n```'),
    ]


def test_html_title_falls_back_to_first_h1() -> None:
    assert parse_html("<h2>Sub</h2><h1>Main</h1><p>x</p>").title == "Main"


def test_html_empty_document() -> None:
    assert parse_html("   ").sections == []


_HOSTILE_HTML = """
import random, sys, time
from librarian.ingest.parsers.html import parse_html

kind = sys.argv[1]
if kind == "deep":
    html = "<h1>Before</h1><p>kept</p>" + "<div>" * 100_000 + "deep" + "</div>" * 100_000
else:
    rng = random.Random(7)
    pieces = ["<div>", "<p>", "<b>", "</i>", "<span class='a'>", "text ", "&amp;", "<h2>", "<pre>",
              "<table><tr><td>", "<!--", "-->", "<li>", "<code>", "</div>", "<script>", "<", "&#x"]
    html = "<h1>Before</h1><p>kept</p>" + "".join(rng.choice(pieces) for _ in range(900_000))
    assert len(html) > 5_000_000
if kind == "deep":  # refused as a whole: never stored with only the text above the nesting
    from librarian.ingest.parsed import ParseError
    try:
        parse_html(html)
    except ParseError as exc:
        assert "nested more than 2,048 levels" in str(exc), exc
        print("ok")
    sys.exit(0)
doc = parse_html(html)
first = doc.sections[0]
assert first.path == ("Before",) and first.text.startswith("kept"), first.text[:200]
print("ok")
"""


@pytest.mark.parametrize("kind", ["deep", "junk"])
def test_hostile_html_finishes_in_bounded_time(kind: str) -> None:
    # A subprocess, so that a hang or a C-level crash fails the test instead of the test run.
    src = str(Path(librarian.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", _HOSTILE_HTML, kind], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# --- PDF --------------------------------------------------------------------------------------------


def _make_pdf(*, outline: bool, title: str | None = "Widget Manual", encrypt: object = None) -> bytes:
    canvas_module = pytest.importorskip("reportlab.pdfgen.canvas")
    buffer = io.BytesIO()
    canvas = canvas_module.Canvas(buffer, encrypt=encrypt)
    if title:
        canvas.setTitle(title)
    for number, heading in enumerate(["Installation", "Configuration", "Troubleshooting"], start=1):
        if outline:
            canvas.bookmarkPage(f"p{number}")
            canvas.addOutlineEntry(heading, f"p{number}", level=0)
        canvas.drawString(72, 720, heading)
        canvas.drawString(72, 700, f"This is page {number} about {heading.lower()}.")
        canvas.showPage()
    canvas.save()
    return buffer.getvalue()


def test_pdf_one_section_per_page_labelled_by_outline() -> None:
    doc = parse_pdf(_make_pdf(outline=True))
    assert doc.title == "Widget Manual"
    assert [s.path for s in doc.sections] == [
        ("Widget Manual", "Installation", "page 1"),
        ("Widget Manual", "Configuration", "page 2"),
        ("Widget Manual", "Troubleshooting", "page 3"),
    ]
    assert {s.entity_type for s in doc.sections} == {"page"}
    assert "This is page 2 about configuration." in doc.sections[1].text
    assert doc.metadata == {"page_count": 3}


def test_pdf_without_outline_uses_page_numbers() -> None:
    doc = parse_pdf(_make_pdf(outline=False))
    assert [s.path for s in doc.sections] == [("Widget Manual", f"page {n}") for n in (1, 2, 3)]


def test_truncated_pdf_is_a_parse_error_with_reason() -> None:
    data = _make_pdf(outline=True)
    with pytest.raises(ParseError, match="damaged PDF"):
        parse_pdf(data[: len(data) // 2])


def test_garbled_pdf_is_a_parse_error_with_reason() -> None:
    data = bytearray(_make_pdf(outline=False))
    rng = random.Random(3)
    for position in range(20, len(data)):
        data[position] = rng.randrange(256)
    with pytest.raises(ParseError, match="damaged PDF"):
        parse_pdf(bytes(data))


def test_non_pdf_bytes_are_refused() -> None:
    with pytest.raises(ParseError, match="header is missing"):
        parse_pdf(b"hello, I am not a PDF")


def test_password_protected_pdf_is_refused() -> None:
    pytest.importorskip("reportlab.lib.pdfencrypt")
    from reportlab.lib.pdfencrypt import StandardEncryption

    data = _make_pdf(outline=False, encrypt=StandardEncryption("user-secret", "owner-secret"))
    with pytest.raises(ParseError, match="needs a password"):
        parse_pdf(data)


def test_pdf_encrypted_only_against_copying_is_read() -> None:
    pytest.importorskip("reportlab.lib.pdfencrypt")
    from reportlab.lib.pdfencrypt import StandardEncryption

    data = _make_pdf(outline=False, encrypt=StandardEncryption("", "owner-secret", canCopy=0))
    doc = parse_pdf(data)
    assert "This is page 1 about installation." in doc.sections[0].text


# --- plain text -------------------------------------------------------------------------------------


def test_text_is_one_section_titled_by_first_line() -> None:
    doc = parse_text("\n  Release notes\n\n  Fixed a crash.\r\n")
    assert doc.title == "Release notes"
    assert [(s.path, s.text) for s in doc.sections] == [((), "Release notes\n\nFixed a crash.")]


# --- registry ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("guide.md", "markdown"),
        ("guide.MARKDOWN", "markdown"),
        ("page.mdx", "markdown"),
        ("cp.rst", "rst"),
        ("cp.rest", "rst"),
        ("index.html", "html"),
        ("index.htm", "html"),
        ("manual.pdf", "pdf"),
        ("notes.txt", "text"),
        ("notes.text", "text"),
        ("README", "text"),
        ("docs/LICENSE", "text"),
        ("logo.png", None),
    ],
)
def test_detect_format_by_extension(name: str, expected: str | None) -> None:
    assert detect_format(name) == expected
    if expected is not None and "." in Path(name).name:
        assert Path(name).suffix.lower() in SUPPORTED_EXTENSIONS


def test_parse_document_dispatches_by_extension() -> None:
    assert parse_document("a.md", b"# Title\nBody\n").sections[0].path == ("Title",)
    assert parse_document("a.rst", b"**Bold heading**\n\nBody\n").sections[0].path == ("Bold heading",)
    assert parse_document("a.html", b"<h2>Head</h2><p>Body</p>").sections[0].path == ("Head",)
    assert parse_document("a.txt", b"# Title\nBody\n").sections[0].path == ()


def test_unsupported_extension_error_names_it() -> None:
    with pytest.raises(ParseError, match=r"logo\.png: unsupported file extension '\.png'"):
        parse_document("logo.png", b"\x89PNG")


def test_invalid_utf8_error_names_byte_and_line() -> None:
    data = "# Title\nCafé\n".encode() + b"bad \xff byte\n"
    with pytest.raises(ParseError, match=r"guide\.md: not valid UTF-8 at byte 18 \(line 3\)"):
        parse_document("guide.md", data)


def test_decoding_handles_byte_order_marks() -> None:
    assert decode_text(b"\xef\xbb\xbf# T\r\n") == "# T\n"
    assert decode_text("# Tïtle\n".encode("utf-16")) == "# Tïtle\n"
    doc = parse_document("guide.md", "\ufeff# Tïtle\nBody\n".encode("utf-16"))
    assert doc.title == "Tïtle"


def test_binary_detection() -> None:
    assert not is_probably_binary(b"")
    assert not is_probably_binary(b"# Title\n\ttabbed \x1b[1mbold\x1b[0m\n")
    assert not is_probably_binary("# UTF-16 text\n".encode("utf-16"))
    assert is_probably_binary(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert is_probably_binary(bytes(range(1, 32)) * 10 + b"some text")
    assert is_probably_binary(random.Random(1).randbytes(4096))
    # PDFs hold compressed binary streams, yet they are documents the registry parses.
    assert not is_probably_binary(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + random.Random(2).randbytes(4096))


def test_binary_content_with_a_text_extension_is_refused() -> None:
    with pytest.raises(ParseError, match="binary"):
        parse_document("notes.md", b"PK\x03\x04\x00\x00binary zip")


def test_title_falls_back_to_file_stem() -> None:
    doc = parse_document("s3api/put-object-tagging.rst", b"**To tag**\n\nRun it.\n")
    assert doc.title == "put-object-tagging"
