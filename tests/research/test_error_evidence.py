"""The evidence an error text gives: option values, their shapes, and how they fit documented options."""

from __future__ import annotations

from librarian.research.error_evidence import OptionDoc, option_docs, option_fit, option_values, value_shape

# Lines as the CLI help connector renders them (from the real `aws s3api` help pages).
PUT_OBJECT = (
    "- `--tagging` `string`: The tag-set for the object. The tag-set must be encoded as URL Query "
    'parameters. (For example, "Key1=Value1")'
)
PUT_BUCKET_TAGGING = "- `--tagging` `structure`: Container for the TagSet and Tag elements."


def test_values_of_named_options_in_each_error_style() -> None:
    assert option_values("Unknown options: --tagging,compliance=strict", ["--tagging"]) == {
        "--tagging": "compliance=strict"
    }
    assert option_values("error: unrecognized arguments: --colour=always", ["--colour"]) == {
        "--colour": "always"
    }
    assert option_values("Unknown options: --recursive", ["--recursive"]) == {}
    assert option_values("Unknown options: --acl,private", ["--tagging"]) == {}


def test_shapes_compare_structure_not_words() -> None:
    assert value_shape("compliance=strict") == value_shape("Key1=Value1") == "a=a"
    assert value_shape('{"TagSet": []}') != value_shape("a=b")


def test_fit_prefers_the_documented_example_shape_and_penalises_structures() -> None:
    string_doc = option_docs([PUT_OBJECT], "--tagging")
    structure_doc = option_docs(["intro", PUT_BUCKET_TAGGING], "--tagging")
    assert string_doc == OptionDoc(hint="string", description=PUT_OBJECT.split(": ", 1)[1])
    assert structure_doc is not None and structure_doc.hint == "structure"
    assert option_fit("compliance=strict", string_doc) == 1.0
    assert option_fit("compliance=strict", structure_doc) == 0.5
    # A structured value given to a structure is not a mismatch; no value or no docs is neutral.
    assert option_fit('{"TagSet":[]}', structure_doc) == 0.8
    assert option_fit(None, string_doc) == option_fit("x", None) == 0.8
    assert option_docs([PUT_OBJECT], "--acl") is None
