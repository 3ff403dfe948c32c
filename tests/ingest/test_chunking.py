"""Behaviour of the chunker: sizes, code blocks, names and types."""

from __future__ import annotations

from pathlib import Path

import pytest

from librarian.ingest.chunking import chunk_document, clean_entity_name, infer_entity_type, split_text
from librarian.ingest.parsed import ParsedDocument, Section
from librarian.ingest.parsers.markdown import parse_markdown
from librarian.ingest.parsers.registry import parse_document


def _doc(*sections: Section, title: str | None = "Doc") -> ParsedDocument:
    return ParsedDocument(title=title, sections=list(sections))


def _paragraphs(count: int, words: int = 12) -> str:
    return "\n\n".join(" ".join(f"p{n}w{w}" for w in range(words)) + "." for n in range(count))


def test_section_that_fits_is_one_chunk_with_unchanged_text() -> None:
    text = "First line\nsecond line\n\n```\ncode\n```"
    chunks = chunk_document(_doc(Section(("Guide", "Install"), text)), max_chars=1000)
    assert len(chunks) == 1
    assert chunks[0].content == text
    assert chunks[0].section_path == ("Guide", "Install")
    assert chunks[0].entity_name == "Install"
    assert chunks[0].entity_type == "section"


def test_empty_sections_make_no_chunk() -> None:
    doc = _doc(Section(("A",), ""), Section(("A", "B"), "  \n\n "), Section(("A", "C"), "Body."))
    assert [c.section_path for c in chunk_document(doc, max_chars=100)] == [("A", "C")]


def test_long_section_is_split_at_paragraph_boundaries() -> None:
    text = _paragraphs(20)
    chunks = chunk_document(_doc(Section(("Long",), text)), max_chars=300)
    assert len(chunks) > 1
    assert all(len(c.content) <= 300 for c in chunks)
    assert all(c.section_path == ("Long",) and c.entity_name == "Long" for c in chunks)
    # Nothing lost, nothing cut inside a paragraph.
    assert "\n\n".join(c.content for c in chunks) == text


def test_large_code_block_is_never_split() -> None:
    code = (
        "```python\n" + "\n".join(f"line_{n} = {n}  # heading-like # comment" for n in range(200)) + "\n```"
    )
    text = f"Intro paragraph.\n\n{code}\n\nOutro paragraph."
    chunks = chunk_document(_doc(Section(("Code",), text)), max_chars=500)
    assert [c.content for c in chunks] == ["Intro paragraph.", code, "Outro paragraph."]


def test_code_block_with_blank_lines_stays_whole() -> None:
    code = "~~~~\nfirst()\n\n\nsecond()\n\n# third\n~~~~"
    pieces = split_text(f"{_paragraphs(3)}\n\n{code}\n\n{_paragraphs(3)}", 120)
    with_code = [p for p in pieces if "first()" in p or "# third" in p]
    assert len(with_code) == 1
    assert code in with_code[0]


def test_indented_code_block_is_never_split() -> None:
    code = "\n".join(f"    step {n}" for n in range(30)).replace("step 10", "step 10\n")
    text = f"Run these:\n\n{code}\n\nDone."
    pieces = split_text(text, 100)
    assert any(code.strip("\n") in p for p in pieces)


def test_list_continuation_is_not_mistaken_for_code() -> None:
    indented = "    " + " ".join(f"word{n}" for n in range(40))
    # After a list item the indented paragraph continues the item: prose, so it may be cut.
    after_list = split_text(f"- item one\n\n{indented}\n\n- item two", 80)
    assert all(len(p) <= 80 for p in after_list)
    # After an ordinary paragraph the same lines are an indented code block: kept whole.
    after_paragraph = split_text(f"Intro.\n\n{indented}\n\nOutro.", 80)
    assert indented in after_paragraph


def test_paragraph_introducing_code_stays_with_it() -> None:
    text = f'{_paragraphs(3)}\n\nOutput:\n\n```\n{{"ok": true}}\n```'
    pieces = split_text(text, 200)
    assert pieces[-1] == 'Output:\n\n```\n{"ok": true}\n```'


def test_overlong_paragraph_without_blank_lines_is_cut_at_sentences_and_words() -> None:
    sentence = "This sentence has several words in it. "
    text = sentence * 40 + "x" * 250
    pieces = split_text(text, 100)
    assert all(len(p) <= 100 for p in pieces)
    assert pieces[0].startswith("This sentence has several words in it. This sentence")
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")


def test_entity_name_is_the_cleaned_deepest_heading() -> None:
    doc = _doc(
        Section(("API", "`put_object(Bucket, Key)`"), "Stores."),
        Section(("API", "**Example 1:**"), "Example."),
        Section(("API", "Options", "--bucket (string)"), "The bucket."),
        Section(("API", "class Bucket(Resource)"), "A bucket."),
    )
    chunks = chunk_document(doc, max_chars=100)
    assert [(c.entity_name, c.entity_type) for c in chunks] == [
        ("put_object", "function"),
        ("Example 1", "section"),
        ("--bucket", "option"),
        ("Bucket", "class"),
    ]


def test_document_without_headings_is_named_after_its_title() -> None:
    chunks = chunk_document(_doc(Section((), "Just text."), title="`notes.txt`"), max_chars=100)
    assert chunks[0].entity_name == "notes.txt"
    assert chunk_document(_doc(Section((), "x"), title=None), max_chars=10)[0].entity_name is None


def test_default_entity_type_and_parser_types() -> None:
    doc = _doc(
        Section(("put-object",), "Uploads."), Section(("Manual", "page 3"), "Text.", entity_type="page")
    )
    chunks = chunk_document(doc, max_chars=100, default_entity_type="command")
    assert [c.entity_type for c in chunks] == ["command", "page"]


def test_tiny_sibling_sections_are_merged_only_when_asked() -> None:
    doc = _doc(
        Section(("get",), "Fetches a value from the store."),
        Section(("get", "Returns"), "The value."),
        Section(("get", "Raises"), "KeyError."),
        Section(("put",), "Stores a value in the store."),
        Section(("put", "Returns"), "None."),
    )
    assert len(chunk_document(doc, max_chars=500)) == 5
    merged = chunk_document(doc, max_chars=500, merge_below=40)
    # "Returns" and "Raises" merge under their parent "get"; "get" and "put" are tiny siblings too
    # but not consecutive, so they stay apart.
    assert [(c.section_path, c.entity_name, c.content) for c in merged][:2] == [
        (("get",), "get", "Fetches a value from the store."),
        (("get",), "get", "**Returns**\n\nThe value.\n\n**Raises**\n\nKeyError."),
    ]
    assert merged[-1].section_path == ("put", "Returns")  # a lone tiny section stays as it is


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        chunk_document(_doc(Section((), "x")), max_chars=0)


def test_heading_helpers() -> None:
    assert clean_entity_name("-h, --help") == "--help"
    assert clean_entity_name("Example 9: Setting the ACL (optional):") == "Example 9: Setting the ACL"
    assert clean_entity_name("`__init__()`") == "__init__"
    assert infer_entity_type("Example (ACL)") is None
    assert infer_entity_type("Getting started") is None


def test_markdown_document_end_to_end() -> None:
    big_code = "```bash\n" + "aws s3 cp a b --recursive\n" * 60 + "```"
    doc = parse_markdown(
        f"---\ntitle: cp\n---\n# cp\nCopies files.\n## Options\n### `--recursive`\nRecurse.\n"
        f"## Examples\n{big_code}\n"
    )
    chunks = chunk_document(doc, max_chars=400, default_entity_type="command")
    assert [(c.section_path, c.entity_name, c.entity_type) for c in chunks] == [
        (("cp",), "cp", "command"),
        (("cp", "Options", "--recursive"), "--recursive", "option"),
        (("cp", "Examples"), "Examples", "command"),
    ]
    assert chunks[-1].content == big_code


def test_real_awscli_example_gives_one_chunk_per_example() -> None:
    awscli = pytest.importorskip("awscli")
    path = Path(awscli.__file__).parent / "examples" / "s3" / "cp.rst"
    doc = parse_document("s3/cp.rst", path.read_bytes())
    chunks = chunk_document(doc, max_chars=1200, default_entity_type="command")
    names = [c.entity_name for c in chunks]
    assert names[0] == "Example 1: Copying a local file to S3"
    assert len(set(names)) == len([s for s in doc.sections if s.text.strip()])
    first = chunks[0].content
    assert first.startswith("The following `cp` command copies a single file")
    assert "```\naws s3 cp test.txt s3://amzn-s3-demo-bucket/test2.txt\n```" in first
