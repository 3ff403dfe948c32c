"""Knowledge documents on every backend: versions, conflicts, restore, delete, search and feedback."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from librarian.knowledge.access import Principal
from librarian.knowledge.documents import DocumentDraft
from librarian.knowledge.search import KnowledgeFilters, highlight, usefulness_factor


@dataclass
class People:
    alice: Principal  # sre team
    bob: Principal  # same organisation, no team
    admin: Principal  # administrator of the organisation
    mallory: Principal  # another organisation


@pytest.fixture
def people(library: Librarian) -> People:
    operator = library.default_principal
    identity = library.identity
    for org in ("acme", "globex"):
        identity.create_organization(operator, org)
    identity.create_team(operator, "acme", "sre")
    identity.create_user(operator, "acme", "alice", teams=["sre"])
    identity.create_user(operator, "acme", "bob")
    identity.create_user(operator, "acme", "root", admin=True)
    identity.create_user(operator, "globex", "mallory")
    return People(
        identity.principal_of("acme", "alice"),
        identity.principal_of("acme", "bob"),
        identity.principal_of("acme", "root"),
        identity.principal_of("globex", "mallory"),
    )


OOM = DocumentDraft(
    title="Pod OOMKilled after a deploy",
    content="When a pod is OOMKilled right after a deploy, raise its memory limit to 2Gi and roll back.",
    document_type="solution",
    category="kubernetes",
    tags=("pods", "memory"),
)


def titles(results: list[dict[str, object]]) -> list[object]:
    return [result["title"] for result in results]


def test_every_edit_is_a_version_and_any_version_can_be_read_and_restored(
    library: Librarian, people: People
) -> None:
    documents = library.knowledge.documents
    created = documents.create(people.alice, OOM)
    edited = documents.update(
        people.alice,
        created["id"],
        1,
        DocumentDraft(content="Raise the memory limit to 4Gi; 2Gi was not enough."),
    )

    assert (created["version"], edited["version"]) == (1, 2)
    assert [v["version"] for v in documents.history(people.alice, created["id"])] == [2, 1]
    assert "2Gi and roll back" in documents.get(people.alice, created["id"], version=1)["content"]
    assert edited["title"] == OOM.title and edited["category"] == "kubernetes"  # untouched fields kept
    # Search returns the current version only.
    hits = library.knowledge.search("pod memory limit after deploy", principal=people.alice)
    assert [hit["version"] for hit in hits if hit["id"] == created["id"]] == [2]
    assert "4Gi" in hits[0]["snippet"]

    restored = documents.restore(people.alice, created["id"], version=1, base_version=2)
    assert restored["version"] == 3
    assert "2Gi and roll back" in documents.get(people.alice, created["id"])["content"]


def test_an_edit_based_on_an_old_version_is_refused_and_overwrites_nothing(
    library: Librarian, people: People
) -> None:
    documents = library.knowledge.documents
    doc = documents.create(people.alice, OOM)
    documents.update(people.alice, doc["id"], 1, DocumentDraft(content="Alice's edit."))

    with pytest.raises(ConflictError, match="version 2, not 1"):
        documents.update(people.admin, doc["id"], 1, DocumentDraft(content="Root's stale edit."))

    assert documents.get(people.alice, doc["id"])["content"] == "Alice's edit."
    assert len(documents.history(people.alice, doc["id"])) == 2


def test_who_may_read_and_change_a_document(library: Librarian, people: People) -> None:
    documents = library.knowledge.documents
    doc = documents.create(people.alice, OOM)  # organisation-wide by default

    assert documents.get(people.bob, doc["id"])["title"] == OOM.title
    with pytest.raises(ForbiddenError):
        documents.update(people.bob, doc["id"], 1, DocumentDraft(title="Bob was here"))
    admin_edit = documents.update(people.admin, doc["id"], 1, DocumentDraft(title="Checked by root"))
    assert admin_edit["updated_by"] == people.admin.user_id
    with pytest.raises(NotFoundError):  # another organisation cannot even tell it exists
        documents.get(people.mallory, doc["id"])
    with pytest.raises(ForbiddenError, match="administrator"):
        documents.create(people.alice, DocumentDraft(title="t", content="c", visibility="public"))


def test_delete_hides_a_document_and_keeps_its_history(library: Librarian, people: People) -> None:
    documents = library.knowledge.documents
    doc = documents.create(people.alice, OOM)

    with pytest.raises(ConflictError):
        documents.delete(people.alice, doc["id"], base_version=7)
    documents.delete(people.alice, doc["id"], base_version=1)

    with pytest.raises(NotFoundError):
        documents.get(people.alice, doc["id"])
    assert library.knowledge.search("pod OOMKilled memory", principal=people.alice) == []


def test_search_filters_highlights_and_full_document(library: Librarian, people: People) -> None:
    documents = library.knowledge.documents
    documents.create(people.alice, OOM)
    runbook = documents.create(
        people.alice,
        DocumentDraft(
            title="Disk full on a database host",
            content="Free space by rotating logs, then grow the volume. Check the memory of the pod too.",
            document_type="runbook",
            category="database",
            severity="high",
        ),
    )

    only_runbooks = library.knowledge.search(
        "memory of the pod", filters=KnowledgeFilters(document_type=("runbook",)), principal=people.alice
    )
    assert titles(only_runbooks) == ["Disk full on a database host"]
    assert titles(
        library.knowledge.search(
            "memory pod", filters=KnowledgeFilters(category="kubernetes"), principal=people.bob
        )
    ) == [OOM.title]
    assert titles(
        library.knowledge.search(
            "memory pod", filters=KnowledgeFilters(severity=("high",)), principal=people.bob
        )
    ) == ["Disk full on a database host"]
    assert titles(
        library.knowledge.search(
            "memory pod", filters=KnowledgeFilters(tags=("memory",)), principal=people.bob
        )
    ) == [OOM.title]

    result = only_runbooks[0]
    marked = [result["snippet"][start:end].lower() for start, end in result["highlights"]]
    assert "memory" in marked and "pod" in marked
    assert set(result) >= {"id", "title", "document_type", "category", "relevance_score", "snippet", "url"}
    full = documents.get(people.bob, result["id"])
    assert full["content"].startswith("Free space") and full["view_count"] == 1
    assert runbook["severity"] == "high"


def test_feedback_moves_ranking_and_flags_outdated_documents(library: Librarian, people: People) -> None:
    documents = library.knowledge.documents
    same = "Restart the ingress controller when TLS handshakes time out."
    first = documents.create(people.alice, DocumentDraft(title="Ingress TLS timeouts A", content=same))
    second = documents.create(people.alice, DocumentDraft(title="Ingress TLS timeouts B", content=same))
    before = library.knowledge.search("ingress TLS handshake timeout", principal=people.bob)
    assert {r["id"] for r in before} == {first["id"], second["id"]}
    assert before[0]["relevance_score"] == pytest.approx(before[1]["relevance_score"], abs=0.02)

    one_vote = library.knowledge.feedback(second["id"], "helpful", principal=people.bob)
    assert 2.5 < one_vote["usefulness_score"] < 3.0  # one vote does not dominate
    library.knowledge.feedback(second["id"], "helpful", rating=5, principal=people.admin, was_used=True)
    library.knowledge.feedback(first["id"], "outdated", principal=people.bob, comment="TLS 1.3 changed this")

    after = library.knowledge.search("ingress TLS handshake timeout", principal=people.bob)
    assert [r["id"] for r in after] == [second["id"], first["id"]]  # equally relevant: the useful one first
    assert after[1]["flags"] == {"outdated": 1}
    assert after[0]["last_used"] is not None
    # A new version clears the flags of the old one.
    library.knowledge.documents.update(people.alice, first["id"], 1, DocumentDraft(content=same + " (2026)"))
    assert documents.get(people.bob, first["id"])["flags"] == {}


def test_bad_input_is_named(library: Librarian, people: People) -> None:
    documents = library.knowledge.documents
    with pytest.raises(InvalidInputError, match="document_type"):
        documents.create(people.alice, DocumentDraft(title="t", content="c", document_type="novel"))
    with pytest.raises(InvalidInputError, match="severity"):
        documents.create(people.alice, DocumentDraft(title="t", content="c", severity="apocalyptic"))
    with pytest.raises(InvalidInputError, match="title"):
        documents.create(people.alice, DocumentDraft(title=" ", content="c"))
    with pytest.raises(InvalidInputError, match="filters: unknown filter 'colour'"):
        KnowledgeFilters.from_mapping({"colour": "red"})
    with pytest.raises(InvalidInputError, match=r"filters\.severity"):
        KnowledgeFilters.from_mapping({"severity": ["apocalyptic"]})
    with pytest.raises(InvalidInputError, match="feedback_type"):
        library.knowledge.feedback(1, "meh", principal=people.alice)
    with pytest.raises(NotFoundError, match="teams"):
        documents.create(
            people.alice, DocumentDraft(title="t", content="c", visibility="teams", allowed_teams=("x",))
        )


def test_highlight_marks_whole_words_by_prefix() -> None:
    snippet, marks = highlight("The pods crashed; a crash loop follows.", "crash pod")
    assert [snippet[a:b] for a, b in marks] == ["pods", "crashed", "crash"]
    assert usefulness_factor(2.5) == pytest.approx(1.0)
    assert usefulness_factor(5) > usefulness_factor(4) > usefulness_factor(0)


def test_an_ingested_document_is_changed_by_its_source_not_by_hand(
    library: Librarian, people: People, tmp_path: Path
) -> None:
    folder = tmp_path / "wiki"
    folder.mkdir()
    (folder / "oncall.md").write_text("# On call\n\nThe rota is in the wiki.\n")
    assert library.ingest(str(folder), document_type="wiki").status == "ok"
    local = library.default_principal  # the local organisation, which ingested it
    listed = library.knowledge.documents.list_documents(local)
    [ingested] = [document for document in listed if document["title"] == "On call"]

    assert ingested["document_type"] == "wiki" and ingested["source_type"] == "import"
    with pytest.raises(ConflictError, match="ingested"):
        library.knowledge.documents.update(local, ingested["id"], 1, DocumentDraft(title="Edited"))
    with pytest.raises(NotFoundError):  # and another organisation does not see it at all
        library.knowledge.documents.get(people.admin, ingested["id"])
