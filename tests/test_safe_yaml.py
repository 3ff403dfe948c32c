"""Bad YAML and JSON never cost the machine or a traceback: the hardening issue's reproductions, and fuzzing.

The reproductions: a workflow of nine levels of nine YAML aliases used 6.3 GB and died with a raw
``OverflowError``; invalid UTF-8 gave a ``UnicodeDecodeError`` traceback; 5,000 nested brackets a
``RecursionError``. Hypothesis then feeds the loaders arbitrary input: each must return or raise the
project's error, nothing else.
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from librarian.errors import InvalidInputError
from librarian.ingest.parsed import ParseError
from librarian.ingest.parsers.markdown import split_front_matter
from librarian.ingest.sources.openapi import load_openapi
from librarian.runtime.spec import load_spec
from librarian.safe_yaml import check_depth, compose_yaml, load_yaml


def _workflow(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_a_yaml_alias_bomb_is_refused_before_it_expands() -> None:
    document = "\n".join(
        ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
        + [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 10)]
    )
    with pytest.raises(InvalidInputError, match=r"bomb\.yaml is refused: YAML aliases expand to more than"):
        load_yaml(document, "bomb.yaml")


def test_a_workflow_file_alias_bomb_names_the_file(tmp_path: Path) -> None:
    anchors = ['a0: &a0 ["lol"]'] + [
        f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 10)
    ]
    text = "anchors:\n" + "\n".join("  " + line for line in anchors) + "\ntasks: *a9\n"
    path = _workflow(tmp_path, "bomb.yaml", text)
    with pytest.raises(InvalidInputError, match=r"bomb\.yaml is refused: YAML aliases expand"):
        load_spec(path)


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="recursive YAML"):
        load_yaml("loop: &loop [*loop]\n", "loop.yaml")


@pytest.mark.parametrize(
    ("name", "text"), [("deep.yaml", "[" * 5000 + "]" * 5000), ("deep.json", "[" * 5000 + "]" * 5000)]
)
def test_deep_nesting_is_refused_without_a_recursion_error(tmp_path: Path, name: str, text: str) -> None:
    with pytest.raises(InvalidInputError, match=rf"{name}.*(nested|deep)"):
        load_spec(_workflow(tmp_path, name, text))


def test_deep_json_within_python_s_limit_is_refused_before_validation(tmp_path: Path) -> None:
    text = '{"tasks": ' + "[" * 500 + "]" * 500 + "}"
    with pytest.raises(InvalidInputError, match="nested more than 100 levels"):
        load_spec(_workflow(tmp_path, "deep.json", text))


@pytest.mark.parametrize("name", ["bad.yaml", "bad.json"])
def test_invalid_utf8_names_the_file(tmp_path: Path, name: str) -> None:
    path = _workflow(tmp_path, name, b"tasks: []\n\xff\xfe bad bytes\n")
    with pytest.raises(InvalidInputError, match=rf"{name} is not UTF-8 text \(bad byte at offset 10\)"):
        load_spec(path)


def test_size_limit_and_line_numbers() -> None:
    with pytest.raises(InvalidInputError, match="over the 10-byte limit"):
        load_yaml("a: 1\nb: 2\nc: 3\n", "big.yaml", max_bytes=10)
    with pytest.raises(InvalidInputError, match=r"x.yaml: invalid YAML at line 3, column \d+"):
        load_yaml("a: 1\nb: 2\nc: d: e\n", "x.yaml")
    data, node = compose_yaml("rules:\n  - id: a\n", "rules.yaml")
    assert data == {"rules": [{"id": "a"}]} and node is not None and node.start_mark.line == 0


def test_front_matter_errors_count_the_file_s_lines() -> None:
    with pytest.raises(ParseError, match="front matter: invalid YAML at line 3"):
        split_front_matter("---\ntitle: x\nbad: d: e\n---\nbody\n")


def test_check_depth_counts_levels_without_recursion() -> None:
    value: list[object] = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(InvalidInputError, match="nested more than 100 levels"):
        check_depth(value, "value")
    check_depth({"a": [{"b": [1, 2]}]}, "value")


_YAML_ALPHABET = string.printable + "&*!|>%@`\u00e9\u4e2d\x00\ufeff"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=_YAML_ALPHABET, max_size=300))
def test_any_text_is_yaml_or_a_clear_error(text: str) -> None:
    try:
        load_yaml(text, "fuzz.yaml")
    except InvalidInputError as exc:
        assert exc.message.startswith("fuzz.yaml")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.text(alphabet=_YAML_ALPHABET, max_size=300).map(str.encode))
def test_any_workflow_file_is_a_spec_or_a_clear_error(tmp_path: Path, data: bytes) -> None:
    for name in ("fuzz.yaml", "fuzz.json"):
        path = tmp_path / name
        path.write_bytes(data)
        try:
            load_spec(path)
        except InvalidInputError as exc:
            assert name in exc.message


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_openapi_bytes_are_a_document_or_a_clear_error(data: bytes) -> None:
    try:
        load_openapi(data, "fuzz-api.yaml")
    except InvalidInputError as exc:
        assert "fuzz-api.yaml" in exc.message


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=_YAML_ALPHABET + "-\n", max_size=300))
def test_any_front_matter_is_metadata_or_a_parse_error(body: str) -> None:
    try:
        metadata, _ = split_front_matter("---\n" + body + "\n---\ntext\n")
    except ParseError:
        return
    assert isinstance(metadata, dict)
