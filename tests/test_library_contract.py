"""The facade's contract, run against SQLite and the real PostgreSQL (vectors: embedded Chroma)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import func, select

from librarian.app import Librarian
from librarian.errors import InvalidInputError
from librarian.ingest.parsed import ParsedDocument, Section
from librarian.ingest.sources.base import SourceDocument, SourceListing
from librarian.storage.models import Chunk, DocumentVersion, VectorOutboxEntry

UPLOAD_DOC = """---
title: Object commands
---
# put-object

Uploads an object to a bucket.

```
aws s3api put-object --bucket NAME --key KEY --body FILE --tagging key=value
```

## Options

`--tagging` sets the tag-set of the object as URL query parameters.

# get-object-tagging

Returns the tag-set of an object.
"""

QUEUE_DOC = """# create-queue

Creates a new standard or FIFO queue with the given name and attributes.

# send-message

Delivers a message to the specified queue.
"""


def write_docs(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "objects.md").write_text(UPLOAD_DOC, encoding="utf-8")
    (root / "queues.md").write_text(QUEUE_DOC, encoding="utf-8")
    return root


def vector_count(lib: Librarian) -> int:
    return lib.vectors.active().count()


def chunk_count(lib: Librarian) -> int:
    with lib.sessions() as session:
        return session.scalar(select(func.count()).select_from(Chunk)) or 0


def test_search_returns_the_right_entity_with_provenance(library: Librarian, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    report = library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1.45.11")
    assert report.status == "ok" and report.added == 2 and not report.problems

    results = library.search("how to send a message to a queue", sdk_name="aws-cli", top_k=3)

    top = results[0]
    assert top.entity_name == "send-message"
    assert top.sdk_name == "aws-cli" and top.sdk_version == "1.45.11"
    assert top.source_url.endswith("/queues.md") and top.source_url.startswith("file://")
    assert top.embedding_model_version.startswith("sentence-transformers/all-MiniLM-L6-v2")
    assert top.last_fetched_at and top.score > 0
    assert vector_count(library) == chunk_count(library)


def test_code_block_and_option_stay_with_their_command(library: Librarian, tmp_path: Path) -> None:
    library.ingest(str(write_docs(tmp_path / "docs")), sdk_name="aws-cli", sdk_version="1")

    results = library.search("upload an object with --tagging", sdk_name="aws-cli", top_k=5)

    put_object = next(r for r in results if r.entity_name == "put-object")
    assert "aws s3api put-object --bucket NAME" in put_object.content


def test_version_filter_never_mixes_versions(library: Librarian, tmp_path: Path) -> None:
    old = tmp_path / "v1"
    old.mkdir()
    (old / "cmd.md").write_text("# deploy\n\nDeploys with --legacy-mode.\n", encoding="utf-8")
    new = tmp_path / "v2"
    new.mkdir()
    (new / "cmd.md").write_text("# deploy\n\nDeploys with --fast-mode.\n", encoding="utf-8")
    library.ingest(str(old), sdk_name="tool", sdk_version="1.0")
    library.ingest(str(new), sdk_name="tool", sdk_version="2.0")

    v1 = library.search("deploy mode", sdk_name="tool", sdk_version="1.0")
    v2 = library.search("deploy mode", sdk_name="tool", sdk_version="2.0")
    both = library.search("deploy mode", sdk_name="tool")

    assert {r.sdk_version for r in v1} == {"1.0"} and "--legacy-mode" in v1[0].content
    assert {r.sdk_version for r in v2} == {"2.0"} and "--fast-mode" in v2[0].content
    assert {r.sdk_version for r in both} == {"1.0", "2.0"}


def test_filters_by_type_category_and_tag(library: Librarian, tmp_path: Path) -> None:
    runbooks = tmp_path / "runbooks"
    runbooks.mkdir()
    (runbooks / "disk.md").write_text("# Disk full\n\nFree space on the database host.\n", encoding="utf-8")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "disk.md").write_text("# Disk purchase\n\nBuy more database disks.\n", encoding="utf-8")
    library.ingest(str(runbooks), document_type="runbook", category="ops", tags=("database", "oncall"))
    library.ingest(str(notes), document_type="note", category="finance", tags=("database",))

    assert {r.document_type for r in library.search("database disk", document_type="runbook")} == {"runbook"}
    assert {r.category for r in library.search("database disk", category="finance")} == {"finance"}
    tagged = library.search("database disk", tags=("database", "oncall"))
    assert [r.entity_name for r in tagged] == ["Disk full"]
    assert len(library.search("database disk", tags=("database",))) == 2


def test_reingest_unchanged_embeds_nothing(library: Librarian, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")
    embedded_before = library.cache.embedded_count

    report = library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")

    assert report.status == "unchanged" and report.unchanged == 2 and report.chunks_written == 0
    assert library.cache.embedded_count == embedded_before


def test_changed_document_is_rechunked_and_keeps_history(library: Librarian, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")
    (docs / "queues.md").write_text("# purge-queue\n\nDeletes every message in a queue.\n", encoding="utf-8")

    report = library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")

    assert report.updated == 1 and report.unchanged == 1
    names = {r.entity_name for r in library.search("queue messages", sdk_name="aws-cli", top_k=10)}
    assert "purge-queue" in names and "send-message" not in names
    with library.sessions() as session:
        versions = session.scalars(select(DocumentVersion.version_no).order_by(DocumentVersion.id)).all()
        assert sorted(versions) == [1, 1, 2]
    assert vector_count(library) == chunk_count(library)


def test_deleted_document_leaves_the_indexes(library: Librarian, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")
    (docs / "queues.md").unlink()

    report = library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")

    assert report.deleted == 1
    assert all(r.source_url.endswith("objects.md") for r in library.search("queue", sdk_name="aws-cli"))
    assert vector_count(library) == chunk_count(library)
    with library.sessions() as session:
        assert session.scalar(select(func.count()).select_from(VectorOutboxEntry)) == 0


def test_reindex_switches_collections_and_keeps_results(library: Librarian, tmp_path: Path) -> None:
    library.ingest(str(write_docs(tmp_path / "docs")), sdk_name="aws-cli", sdk_version="1")
    before = [r.chunk_id for r in library.search("send a message", sdk_name="aws-cli")]
    old_collection = library.stats()["vector_index"]["collection"]

    result = library.reindex()

    assert result["collection"] != old_collection and result["chunks"] == chunk_count(library)
    assert [r.chunk_id for r in library.search("send a message", sdk_name="aws-cli")] == before
    assert library.stats()["vector_index"]["collection"] == result["collection"]


def test_relabelling_a_source_reaches_unchanged_chunks(library: Librarian, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")

    report = library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1", category="storage", tags=("s3",))

    assert report.unchanged == 2
    results = library.search("send a message", sdk_name="aws-cli", category="storage", tags=("s3",))
    assert results and all(r.category == "storage" and r.tags == ["s3"] for r in results)
    assert vector_count(library) == chunk_count(library)


def test_version_filter_without_sdk_is_refused(library: Librarian) -> None:
    with pytest.raises(InvalidInputError, match="needs an SDK name"):
        library.search("anything", sdk_version="2.0")


def test_dates_filter_in_utc_whatever_the_offset(library: Librarian, tmp_path: Path) -> None:
    library.ingest(str(write_docs(tmp_path / "docs")), sdk_name="aws-cli", sdk_version="1")
    fetched = datetime.fromisoformat(library.search("queue", sdk_name="aws-cli")[0].last_fetched_at)
    assert fetched.tzinfo is not None and fetched.utcoffset() == timedelta(0)
    # The same instant written in another zone: an hour later there, but still before the fetch.
    before_elsewhere = (fetched - timedelta(minutes=5)).astimezone(timezone(timedelta(hours=5)))
    after_elsewhere = (fetched + timedelta(minutes=5)).astimezone(timezone(timedelta(hours=-5)))

    assert library.search("queue", sdk_name="aws-cli", fetched_after=before_elsewhere)
    assert library.search("queue", sdk_name="aws-cli", fetched_after=after_elsewhere) == []
    assert library.search("queue", fetched_after=after_elsewhere) == []  # no sdk: the ANN path


def test_repeated_scoped_search_sees_every_change(library: Librarian, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")
    first = {r.entity_name for r in library.search("queue", sdk_name="aws-cli", sdk_version="1", top_k=10)}
    (docs / "queues.md").write_text("# receive-message\n\nRetrieves messages from a queue.\n")
    library.ingest(str(docs), sdk_name="aws-cli", sdk_version="1")

    second = {r.entity_name for r in library.search("queue", sdk_name="aws-cli", sdk_version="1", top_k=10)}

    assert "send-message" in first and "receive-message" not in first
    assert "receive-message" in second and "send-message" not in second


def connector_listing(tmp_path: Path, synopsis: str) -> SourceListing:
    """What a connector (CLI help, OpenAPI...) yields: documents it built, one per entity."""
    documents = [
        SourceDocument(
            path=f"s3api/{name}",
            url=f"cli://aws/s3api/{name}",
            text=text,
            parsed=ParsedDocument(title=name, sections=[Section(("aws", f"s3api {name}"), text, "command")]),
            metadata={"options": options},
        )
        for name, text, options in [
            ("put-object", f"Adds an object to a bucket.\n\n```\n{synopsis}\n```", ["--bucket", "--tagging"]),
            ("list-buckets", "Lists all buckets owned by the caller.", []),
        ]
    ]
    return SourceListing(root=tmp_path, files=[], problems=[], documents=documents)


def test_connector_documents_keep_entities_and_attributes(library: Librarian, tmp_path: Path) -> None:
    listing = connector_listing(tmp_path, "aws s3api put-object --bucket B --key K --tagging T")

    report = library.ingest_listing(
        "cli://aws", "cli-help", lambda: listing, sdk_name="aws", sdk_version="1.4"
    )
    again = library.ingest_listing(
        "cli://aws", "cli-help", lambda: listing, sdk_name="aws", sdk_version="1.4"
    )
    changed = connector_listing(tmp_path, "aws s3api put-object --bucket B --key K")
    third = library.ingest_listing(
        "cli://aws", "cli-help", lambda: changed, sdk_name="aws", sdk_version="1.4"
    )

    assert report.added == 2 and again.unchanged == 2 and third.updated == 1
    top = library.search("upload an object with tags", sdk_name="aws", sdk_version="1.4")[0]
    assert top.entity_name == "s3api put-object" and top.entity_type == "command"
    assert top.attributes == {"options": ["--bucket", "--tagging"]}
    assert top.source_url == "cli://aws/s3api/put-object" and "--tagging" not in top.content


def test_a_warm_up_in_the_background_can_be_waited_for(library: Librarian) -> None:
    assert library.wait_until_warm() == 0.0 and not library.is_warm  # nothing started: no wait
    library.start_warm_up()
    waited = library.wait_until_warm(timeout=120)
    assert library.is_warm and waited >= 0.0
    assert library.wait_until_warm() == 0.0  # done: later callers never wait
    assert library.search("upload a file with tags") is not None


def test_budgets_keep_the_best_whole_and_say_what_they_left_out() -> None:
    from librarian.budget import chars_for, check_top_k, fit

    items = [{"content": "a" * 300, "rank": rank} for rank in range(5)]
    kept, trimmed = fit(items, 1000)
    assert [item["rank"] for item in kept] == [0, 1, 2]
    assert trimmed == {"max_chars": 1000, "returned": 3, "dropped": 2, "truncated": False}
    assert fit(items, None) == (items, None) and fit(items[:1], 1000) == (items[:1], None)
    [escaped], _ = fit([{"content": '"quoted"\n' * 400}], 1000)  # escapes lengthen the JSON
    assert len(json.dumps(escaped, ensure_ascii=False)) <= 1000
    [cut], note = fit([{"content": "b" * 5000}], 600)
    assert cut["truncated"] is True and len(json.dumps(cut)) <= 600 and note and note["truncated"]
    assert chars_for(None, 1000) == 4000 and chars_for(9000, 1000) == 4000 and chars_for(None, None) is None
    with pytest.raises(InvalidInputError, match="max_chars"):
        chars_for(10, None)
    with pytest.raises(InvalidInputError, match="top_k"):
        check_top_k(101)
