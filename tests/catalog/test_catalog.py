"""lib.catalog: deleting sources with everything derived from them, whole pages, library resolution,
and search's SDK aliases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from librarian.app import Librarian
from librarian.catalog.pages import PageRequest
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import InvalidInputError, NotFoundError
from librarian.knowledge.access import SourceOwner, Visibility
from librarian.storage.models import Chunk, Document, DocumentVersion, Source, VectorOutboxEntry

UPLOAD = """# put-object

Uploads an object to a bucket.

```
aws s3api put-object --bucket NAME --key KEY --body FILE --tagging key=value
```

## Options

`--tagging` sets the tag-set of the object as URL query parameters.

## Examples

Upload with tags: `aws s3api put-object --bucket b --key k --tagging a=b`.
"""
QUEUES = "# create-queue\n\nCreates a new standard or FIFO queue with the given name.\n"


def write_docs(root: Path, version: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "objects.md").write_text(
        UPLOAD.replace("Uploads", f"Version {version} uploads"), encoding="utf-8"
    )
    (root / "queues.md").write_text(QUEUES, encoding="utf-8")
    return root


def count(lib: Librarian, table: type) -> int:
    with lib.sessions() as session:
        return session.scalar(select(func.count()).select_from(table)) or 0


@pytest.fixture
def embedded(settings: Settings, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    with Librarian(settings, embedder=embedder) as lib:
        yield lib


def test_deleting_a_source_removes_its_documents_versions_chunks_and_vectors(
    library: Librarian, tmp_path: Path
) -> None:
    library.ingest(str(write_docs(tmp_path / "v1", "1")), sdk_name="aws-cli", sdk_version="1.0")
    kept = library.ingest(str(write_docs(tmp_path / "v2", "2")), sdk_name="aws-cli", sdk_version="2.0")
    assert kept.status == "ok"
    before = library.vectors.active().count()
    with library.sessions() as session:
        old = session.scalar(select(Source.id).where(Source.sdk_version == "1.0"))
    me = library.default_principal

    with pytest.raises(InvalidInputError, match="names 2 sources"):
        library.catalog.delete_sources(me, "aws-cli")  # an SDK name names both versions
    [deleted] = library.catalog.delete_sources(me, str(old))

    assert deleted["documents"] == 2 and deleted["chunks"] > 0
    assert library.vectors.active().count() == before - deleted["chunks"]
    assert count(library, VectorOutboxEntry) == 0
    assert count(library, Source) == 1 and count(library, Document) == 2
    with library.sessions() as session:
        versions = session.scalar(select(func.count()).select_from(DocumentVersion)) or 0
        assert versions == 2
        assert set(session.scalars(select(Chunk.sdk_version).distinct())) == {"2.0"}
    hits = library.search("upload an object with tags", sdk_name="aws-cli", top_k=10)
    assert hits and {hit.sdk_version for hit in hits} == {"2.0"}
    with pytest.raises(NotFoundError):
        library.catalog.delete_sources(me, str(old))  # gone: a second delete finds nothing


def test_only_the_creator_or_an_administrator_deletes_a_source(embedded: Librarian, tmp_path: Path) -> None:
    operator = embedded.default_principal
    embedded.identity.create_organization(operator, "acme")
    for name, admin in (("alice", False), ("bob", False), ("root", True)):
        embedded.identity.create_user(operator, "acme", name, admin=admin)
    alice, bob, root = (embedded.identity.principal_of("acme", name) for name in ("alice", "bob", "root"))
    owner = SourceOwner(alice.organization_id, alice.user_id, Visibility.ORGANIZATION)
    embedded.ingest(str(write_docs(tmp_path / "docs", "1")), sdk_name="tool", sdk_version="1.0", owner=owner)
    [listed] = embedded.catalog.list_sources(bob)  # bob may read it...
    with pytest.raises(NotFoundError):
        embedded.catalog.delete_sources(bob, str(listed["id"]))  # ...but not delete it
    assert embedded.catalog.delete_sources(root, str(listed["id"]))[0]["deleted"] is True
    assert embedded.catalog.list_sources(alice) == []


def test_sources_list_in_pages_with_counts(embedded: Librarian, tmp_path: Path) -> None:
    for version in ("1.0", "2.0", "3.0"):
        embedded.ingest(str(write_docs(tmp_path / version, version)), sdk_name="tool", sdk_version=version)
    me = embedded.default_principal
    first = embedded.catalog.list_sources(me, limit=2)
    rest = embedded.catalog.list_sources(me, after_id=first[-1]["id"], limit=2)
    assert [s["sdk_version"] for s in first + rest] == ["1.0", "2.0", "3.0"]
    assert all(s["documents"] == 2 and s["chunks"] >= 2 for s in first + rest)
    with pytest.raises(InvalidInputError, match="limit"):
        embedded.catalog.list_sources(me, limit=0)


def test_a_page_is_its_chunks_in_order_at_the_version_asked(embedded: Librarian, tmp_path: Path) -> None:
    for version in ("1.0", "2.0"):  # one folder, two versions: the same URLs, as a CLI's pages have
        embedded.ingest(str(write_docs(tmp_path / "docs", version)), sdk_name="aws-cli", sdk_version=version)
    me = embedded.default_principal
    [hit] = embedded.search("put-object tagging", sdk_name="aws-cli", sdk_version="1.0", top_k=1)
    url = hit.source_url

    newest = embedded.catalog.read_page(me, PageRequest(url=url + "#options"))
    assert newest["sdk_version"] == "2.0" and newest["other_versions"] == ["1.0"]
    assert "Version 2.0 uploads" in newest["content"]
    assert newest["content"].startswith("# put-object\n\nVersion 2.0 uploads")
    assert newest["content"].index("## Options") < newest["content"].index("Upload with tags")
    assert newest["next_chunk"] is None and newest["truncated"] is False

    older = embedded.catalog.read_page(me, PageRequest(url=url, sdk_version="1.0"))
    assert "Version 1.0 uploads" in older["content"]
    by_id = embedded.catalog.read_page(me, PageRequest(document_id=older["document_id"]))
    assert by_id["content"] == older["content"]

    window = embedded.catalog.read_page(me, PageRequest(url=url, max_chars=200))
    assert window["truncated"] is True and window["next_chunk"] == 1
    rest = embedded.catalog.read_page(me, PageRequest(url=url, start_chunk=1, max_chars=200_000))
    assert rest["next_chunk"] is None and rest["content"] and rest["content"] not in window["content"]

    with pytest.raises(NotFoundError, match=r"version 9\.9"):
        embedded.catalog.read_page(me, PageRequest(url=url, sdk_version="9.9"))
    with pytest.raises(NotFoundError):
        embedded.catalog.read_page(me, PageRequest(url="file:///nowhere.md"))
    with pytest.raises(InvalidInputError, match="either url or document_id"):
        embedded.catalog.read_page(me, PageRequest())


def test_a_page_another_organisation_owns_is_not_found(embedded: Librarian, tmp_path: Path) -> None:
    operator = embedded.default_principal
    embedded.identity.create_organization(operator, "rival")
    embedded.identity.create_user(operator, "rival", "spy")
    spy = embedded.identity.principal_of("rival", "spy")
    owner = SourceOwner(operator.organization_id, operator.user_id, Visibility.ORGANIZATION)
    embedded.ingest(str(write_docs(tmp_path / "docs", "1")), sdk_name="tool", sdk_version="1.0", owner=owner)
    [hit] = embedded.search("create a FIFO queue", top_k=1)
    with pytest.raises(NotFoundError):
        embedded.catalog.read_page(spy, PageRequest(url=hit.source_url))
    assert embedded.catalog.resolve_library(spy, "tool") == []
    assert embedded.catalog.list_sources(spy) == []


def test_a_library_resolves_by_alias_with_versions_and_sources(embedded: Librarian, tmp_path: Path) -> None:
    for version in ("1.0", "2.0"):
        embedded.ingest(str(write_docs(tmp_path / version, version)), sdk_name="aws-cli", sdk_version=version)
    embedded.ingest(str(write_docs(tmp_path / "kube", "1")), sdk_name="kubectl", sdk_version="1.30")
    me = embedded.default_principal

    [best, *_] = embedded.catalog.resolve_library(me, "aws")
    assert best["library_id"] == "aws-cli" and best["score"] == 0.95
    assert [v["version"] for v in best["versions"]] == ["2.0", "1.0"]
    assert all(v["chunks"] > 0 for v in best["versions"]) and len(best["sources"]) == 2
    assert best["last_updated"] is not None and "local" in best["description"]
    assert embedded.catalog.resolve_library(me, "kubctl")[0]["library_id"] == "kubectl"  # a typo
    assert embedded.catalog.resolve_library(me, "terraform") == []
    with pytest.raises(InvalidInputError, match="name"):
        embedded.catalog.resolve_library(me, " ")


def test_search_resolves_sdk_aliases_and_names_the_closest_for_an_unknown_one(
    embedded: Librarian, tmp_path: Path
) -> None:
    embedded.ingest(str(write_docs(tmp_path / "docs", "1")), sdk_name="aws-cli", sdk_version="1.0")
    assert embedded.search("upload an object", sdk_name="aws", top_k=3)
    assert embedded.search("upload an object", sdk_name="awscli", sdk_version="1.0", top_k=3)
    with pytest.raises(NotFoundError, match="no documentation is indexed") as refused:
        embedded.search("upload an object", sdk_name="aws-clj", top_k=3)
    assert "aws-cli" in (refused.value.hint or "")
