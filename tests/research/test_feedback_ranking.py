"""End to end: feedback that a snippet resolved an error puts it first for a similar error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.ingest.parsed import ParsedDocument, Section
from librarian.ingest.sources.base import SourceDocument, SourceListing
from librarian.research.error_signature import error_signature
from librarian.research.feedback import record_feedback
from librarian.research.service import research_api_usage

VERSION = "1.45.11"
QUERY = "upload a file to s3 with tags"
TAG_AFTER_UPLOAD = "s3api put-object-tagging"
UPLOAD_WITH_TAGS = "s3api put-object"
COMMANDS = {
    TAG_AFTER_UPLOAD: (
        "Sets the supplied tag-set to an object that is already in a bucket. When an upload rejects "
        "--tagging, upload the object first and then tag it with this command.",
        ["--bucket", "--key", "--tagging"],
    ),
    UPLOAD_WITH_TAGS: (
        "Stores a new object in a bucket. The object's tags can be set at upload time with --tagging.",
        ["--bucket", "--key", "--body", "--tagging"],
    ),
    "s3 cp": (
        "Copies a local file or S3 object to another location.",
        ["--recursive", "--acl", "--metadata"],
    ),
    "sqs send-message": ("Delivers a message to the specified queue.", ["--queue-url", "--message-body"]),
    "iam simulate-principal-policy": (
        "Simulates how a set of IAM policies works with a list of API operations, to find why a call "
        "is denied.",
        ["--policy-source-arn", "--action-names"],
    ),
}
# `aws s3 cp report.csv s3://b/ --tagging ...` fails: `s3 cp` has no --tagging option.
RECORDED_ERROR = (
    "usage: aws [options] <command> <subcommand> [<subcommand> ...] [parameters]\n"
    "To see help text, you can run:\n\n  aws help\n\nUnknown options: --tagging,compliance=strict\n"
)
SIMILAR_ERROR = "aws: error: Unknown options: --tagging,team=data"
UNRELATED_ERROR = "An error occurred (AccessDenied) when calling the PutObject operation: Access Denied"


def _listing(root: Path) -> SourceListing:
    documents = []
    for name, (description, options) in COMMANDS.items():
        text = f"{description}\n\n```\naws {name} {' '.join(o + ' VALUE' for o in options)}\n```\n"
        text += "\n".join(f"- `{option}`: the {option[2:]} value." for option in options)
        documents.append(
            SourceDocument(
                path=name.replace(" ", "/"),
                url=f"cli://aws/{name.replace(' ', '/')}",
                text=text,
                parsed=ParsedDocument(title=name, sections=[Section(("aws", name), text, "command")]),
                metadata={"options": options},
            )
        )
    return SourceListing(root=root, files=[], problems=[], documents=documents)


def _snippets(lib: Librarian, error: str) -> list[dict[str, Any]]:
    result = research_api_usage(lib, "aws", QUERY, version=VERSION, error_text=error)
    snippets: list[dict[str, Any]] = result["snippets"]
    return snippets


def _names(snippets: list[dict[str, Any]]) -> list[str | None]:
    return [snippet["entity_name"] for snippet in snippets]


def test_feedback_puts_the_resolving_snippet_first_for_a_similar_error(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as lib:
        lib.ingest_listing(
            f"cli://aws@{VERSION}",
            "cli-help",
            lambda: _listing(tmp_path),
            sdk_name="aws-cli",
            sdk_version=VERSION,
        )
        before = _snippets(lib, SIMILAR_ERROR)
        unrelated_before = _snippets(lib, UNRELATED_ERROR)
        # Both accept --tagging; without feedback "tag it afterwards" narrowly beats "tag on upload".
        assert _names(before)[:2] == [TAG_AFTER_UPLOAD, UPLOAD_WITH_TAGS]
        assert all("feedback" not in snippet for snippet in before)

        record_feedback(
            lib.sessions,
            sdk_name="awscli",
            sdk_version=VERSION,
            error_text=RECORDED_ERROR,
            command="aws s3 cp report.csv s3://my-bucket/report.csv --tagging compliance=strict",
            query=QUERY,
            source_url=f"cli://aws/{UPLOAD_WITH_TAGS.replace(' ', '/')}",
            entity_name=UPLOAD_WITH_TAGS,
        )
        after = _snippets(lib, SIMILAR_ERROR)
        unrelated_after = _snippets(lib, UNRELATED_ERROR)

    assert error_signature(SIMILAR_ERROR) != error_signature(RECORDED_ERROR)  # similar, not identical
    assert _names(after)[:2] == [UPLOAD_WITH_TAGS, TAG_AFTER_UPLOAD]
    assert after[0]["feedback"]["helpful"] == 1 and after[0]["feedback"]["boost"] > 0
    assert after[0]["score"] > before[1]["score"]
    assert _names(after)[2:] == _names(before)[2:]
    # An unrelated error's ranking (order and scores) is untouched by that feedback.
    assert [(s["entity_name"], s["score"]) for s in unrelated_after] == [
        (s["entity_name"], s["score"]) for s in unrelated_before
    ]
    assert all("feedback" not in snippet for snippet in unrelated_after)
