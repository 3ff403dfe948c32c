"""A question the index cannot answer: options no indexed command declares, commands not indexed.

Issue 17: "the ``--tagging`` question scored 0.62 with only ``s3`` indexed (no ``s3api``)". The
research result must lower its confidence and say why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.ingest.parsed import ParsedDocument, Section
from librarian.ingest.sources.base import SourceDocument, SourceListing
from librarian.knowledge.access import Principal, SourceOwner, Visibility
from librarian.research.coverage import Coverage, command_lines
from librarian.research.service import LOW_CONFIDENCE, research_api_usage

COMMANDS = {
    "cp": ("Copies a local file or S3 object to another location.", ["--recursive", "--acl"]),
    "mv": ("Moves a local file or S3 object to another location.", ["--recursive"]),
    "ls": ("Lists S3 objects and common prefixes under a prefix or all S3 buckets.", ["--recursive"]),
    "rm": ("Deletes an S3 object.", ["--recursive", "--include"]),
}


def s3_only(root: Path) -> SourceListing:
    """``aws s3``'s commands as ``ingest-cli aws --scope s3`` stores them (no ``s3api``)."""
    documents = []
    for word, (description, options) in COMMANDS.items():
        name = f"s3 {word}"
        text = f"# aws {name}\n\n{description}\n\n" + "\n".join(
            f"- `{o}`: the {o[2:]} value." for o in options
        )
        documents.append(
            SourceDocument(
                path=f"s3/{word}",
                url=f"cli://aws/s3/{word}",
                text=text,
                parsed=ParsedDocument(
                    title=f"aws {name}", sections=[Section(("aws", name), text, "command")]
                ),
                metadata={"command": "aws", "subcommand_path": ["s3", word], "options": options},
            )
        )
    return SourceListing(root=root, files=[], problems=[], documents=documents)


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    home = tmp_path_factory.mktemp("coverage")
    with Librarian(Settings(home=home), embedder=embedder) as library:
        library.ingest_listing(
            "cli://aws?scope=s3",
            "cli-help",
            lambda: s3_only(home),
            sdk_name="aws-cli",
            sdk_version="1.45.11",
            options={"command": "aws", "scopes": ["s3"]},
        )
        prose = home / "prose"
        prose.mkdir()
        (prose / "upload.md").write_text(
            "# Uploading\n\nUse the `--tagging` option to tag an upload; tags are key=value pairs.\n",
            encoding="utf-8",
        )
        library.ingest(str(prose), sdk_name="storage-guide", sdk_version="1")
        yield library


def test_an_option_no_indexed_command_declares_lowers_the_confidence_and_says_why(lib: Librarian) -> None:
    asked = "how to upload a file to s3 with tags"
    answered = research_api_usage(lib, "aws-cli", asked)
    unanswerable = research_api_usage(lib, "aws-cli", asked, error_text="Unknown options: --tagging,env=prod")

    assert answered["confidence_features"]["coverage_gap"] == 0.0 and answered["confidence_note"] is None
    assert unanswerable["confidence_features"]["coverage_gap"] == 1.0
    assert unanswerable["confidence_score"] < LOW_CONFIDENCE
    assert unanswerable["confidence_score"] < answered["confidence_score"]
    note = unanswerable["confidence_note"]
    assert "no indexed aws-cli command declares --tagging" in note and "limited to: aws s3" in note
    assert "index the rest of aws" in unanswerable["fallback_suggestions"][0]


def test_a_command_line_of_a_group_not_indexed_is_named(lib: Librarian) -> None:
    result = research_api_usage(
        lib,
        "aws-cli",
        "put an object with tags",
        error_text="$ aws s3api put-object --bucket b --key k --tagging env=prod\nUnknown options: --tagging",
    )

    assert "`aws s3api` is not indexed" in result["confidence_note"]
    assert result["confidence_features"]["coverage_gap"] == 1.0
    assert result["confidence_score"] < LOW_CONFIDENCE


def test_indexed_commands_and_declared_options_leave_no_gap(lib: Librarian) -> None:
    result = research_api_usage(
        lib, "aws-cli", "copy a folder", error_text="$ aws s3 cp ./dir s3://b/ --recursive\nfailed"
    )

    assert result["confidence_features"]["coverage_gap"] == 0.0 and result["confidence_note"] is None
    assert result["snippets"][0]["entity_name"] == "s3 cp"


def test_a_complete_index_holds_a_missing_option_as_drift_not_as_a_gap(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    # The same commands, walked whole: an option nobody declares was removed or renamed in this
    # version (the drift the loop corrects), and its replacement is indexed.
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as lib:
        lib.ingest_listing(
            "cli://aws",
            "cli-help",
            lambda: s3_only(tmp_path),
            sdk_name="aws-cli",
            sdk_version="1.45.11",
            options={"command": "aws", "scopes": []},
        )
        result = research_api_usage(
            lib,
            "aws-cli",
            "copy a folder",
            error_text="$ aws s3api copy --tagging x\nUnknown options: --tagging",
        )
    assert result["confidence_features"]["coverage_gap"] == 0.0 and result["confidence_note"] is None


def test_options_in_prose_documentation_are_not_held_against_it(lib: Librarian) -> None:
    # Prose declares no options, so an option it does not declare says nothing about coverage.
    result = research_api_usage(lib, "storage-guide", "tag an upload", error_text="Unknown options: --tags")

    assert result["confidence_features"]["coverage_gap"] == 0.0 and result["confidence_note"] is None


def test_coverage_counts_only_commands_the_caller_may_read(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    # One private command (its creator's alone) declares --tagging, beside the organisation's s3.
    private = SourceListing(
        root=tmp_path,
        files=[],
        problems=[],
        documents=[
            SourceDocument(
                path="s3api/put-object",
                url="cli://aws/s3api/put-object",
                text="# aws s3api put-object\n\nAdds an object to a bucket.\n\n- `--tagging`: tags.",
                parsed=ParsedDocument(
                    title="aws s3api put-object",
                    sections=[
                        Section(("aws", "s3api put-object"), "Adds an object. `--tagging`: tags.", "command")
                    ],
                ),
                metadata={"command": "aws", "options": ["--tagging"]},
            )
        ],
    )
    creator = Principal(organization_id=1, user_id=7)
    colleague = Principal(organization_id=1, user_id=8)
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as lib:
        for uri, listed, owner in (
            ("cli://aws?scope=s3", s3_only(tmp_path), None),
            ("cli://aws?scope=s3api", private, SourceOwner(1, 7, Visibility.PRIVATE)),
        ):
            lib.ingest_listing(
                uri,
                "cli-help",
                lambda listed=listed: listed,  # type: ignore[misc]
                sdk_name="aws-cli",
                sdk_version="1.45.11",
                options={"command": "aws", "scopes": [uri.rsplit("=", 1)[1]]},  # as ingest-cli --scope stores
                owner=owner,
            )
        asked = ("upload with tags", "$ aws s3api put-object --tagging env=prod\nUnknown options: --tagging")
        mine = research_api_usage(lib, "aws-cli", asked[0], error_text=asked[1], principal=creator)
        theirs = research_api_usage(lib, "aws-cli", asked[0], error_text=asked[1], principal=colleague)

    assert mine["confidence_features"]["coverage_gap"] == 0.0 and mine["confidence_note"] is None
    assert mine["snippets"][0]["entity_name"] == "s3api put-object"
    assert theirs["confidence_features"]["coverage_gap"] == 1.0
    assert "no indexed aws-cli command declares --tagging" in theirs["confidence_note"]
    assert all(s["entity_name"] != "s3api put-object" for s in theirs["snippets"])


def test_coverage_counts_what_is_missing() -> None:
    assert Coverage().gap == 0.0 and Coverage().note("x") is None
    gap = Coverage(named=3, missing_options=("--a",), missing_commands=("aws sns",), scopes=("aws s3",))
    assert gap.gap == 0.667
    assert gap.note("aws-cli") == (
        "no indexed aws-cli command declares --a; `aws sns` is not indexed (the index was limited to: "
        "aws s3): the answer may be in a part of aws-cli that is not indexed"
    )
    # Paths, URLs and words that merely contain the program's name are not command lines.
    assert command_lines("see /usr/bin/aws s3 or aws.s3 or jaws s3, then aws s3 cp x", ["aws"]) == [
        ("aws", "s3")
    ]
