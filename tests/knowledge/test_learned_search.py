"""Learning from use (``knowledge/learned_search.py``) on real storage: SQLite, embedded Chroma, the model.

A few knowledge documents of two organisations are searched through ``Librarian.search``; readers
give feedback through ``lib.knowledge.feedback`` with the ``search_query`` a document answered, and
later searches are compared with the ones made before. Every document is found by its source URL
(``/knowledge/<id>``), so a test names documents (``vault``, ``rotate``...) instead of chunk ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.knowledge.access import Principal
from librarian.knowledge.documents import DocumentDraft
from librarian.knowledge.learned_search import LearnedRanking
from librarian.search_results import SearchResult

# The question readers ask, a close paraphrase of it (what the feedback records), and one far from it.
QUESTION = "how do I rotate the database password"
PARAPHRASE = "how can I rotate the database password"
UNRELATED = "when do the TLS certificates of the proxy expire"


@dataclass(frozen=True)
class Note:
    """A knowledge document of the corpus."""

    title: str
    content: str
    document_type: str
    category: str | None = None
    tags: tuple[str, ...] = ()


# Public, written by acme's administrator, so both organisations read them.
# ``rotate`` is what retrieval ranks first for QUESTION; ``vault`` is what acme's readers found useful.
PUBLIC_NOTES: dict[str, Note] = {
    "rotate": Note(
        "Rotating database passwords",
        "To rotate the database password, generate a new password and update the connection string "
        "of every service.",
        "runbook",
        "database",
        ("db",),
    ),
    "pool": Note(
        "Database connection pool exhausted",
        "When the database refuses connections, raise the pool size and restart the service.",
        "runbook",
        "database",
        ("db",),
    ),
    "reset": Note(
        "Resetting a customer's password",
        "A customer who forgot their password resets it from the login page of the web console.",
        "solution",
        "support",
    ),
    "vault": Note(
        "Vault secret leases",
        "Dynamic secrets are issued by Vault with a lease; renew the lease or request new credentials "
        "from the secrets engine.",
        "wiki",
        "security",
        ("secrets",),
    ),
    "disk": Note("Disk full on a host", "Free space by rotating logs, then grow the volume.", "runbook"),
    "cert": Note(
        "Renewing TLS certificates",
        "Certificates expire after ninety days; renew them with the ACME client and reload the proxy.",
        "runbook",
    ),
    "deploy": Note(
        "Rolling back a deploy", "Roll back a bad release by redeploying the previous image tag.", "runbook"
    ),
    "oncall": Note(
        "On-call handover",
        "Write down open incidents and pending alerts before handing over the pager.",
        "wiki",
    ),
}
# Readable by acme's ``sre`` team only (alice), not by bob of the same organisation.
SECRET = Note(
    "Break-glass credentials",
    "The break-glass account lives in the sealed envelope in the safe; only the SRE lead may open it.",
    "runbook",
    "security",
)


@dataclass
class Store:
    """A Librarian with the corpus, its people and the ids of its documents by name."""

    lib: Librarian
    alice: Principal  # acme, team sre
    bob: Principal  # acme, no team
    root: Principal  # acme's administrator
    mallory: Principal  # globex
    ids: dict[str, int]

    def search(self, principal: Principal, query: str = QUESTION, **options: Any) -> list[SearchResult]:
        """``lib.search`` for ``principal``."""
        return self.lib.search(query, principal=principal, **options)

    def names(self, results: list[SearchResult]) -> list[str]:
        """The names of the documents of ``results``, in order."""
        by_url = {f"/knowledge/{document_id}": name for name, document_id in self.ids.items()}
        return [by_url.get(result.source_url, result.source_url) for result in results]

    def hit(self, results: list[SearchResult], name: str) -> SearchResult:
        """The (first) result of document ``name``."""
        return next(result for result in results if result.source_url == f"/knowledge/{self.ids[name]}")

    def feedback(
        self,
        name: str,
        principal: Principal,
        feedback_type: str = "helpful",
        query: str = PARAPHRASE,
        **options: Any,
    ) -> None:
        """``principal`` gives a verdict on document ``name`` as the answer to ``query``."""
        self.lib.knowledge.feedback(
            self.ids[name], feedback_type, search_query=query, principal=principal, **options
        )


OpenStore = Callable[..., Store]


def scored(results: list[SearchResult]) -> list[tuple[int, float, float | None]]:
    """What must not change when learning is off: each result's chunk, score and learned similarity."""
    return [(result.chunk_id, result.score, result.learned_similarity) for result in results]


@pytest.fixture
def open_store(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Iterator[OpenStore]:
    """Opens a Librarian on a new home under ``tmp_path`` with the corpus; all are closed afterwards.

    Keyword arguments are settings (``search_learned_weight``, ``search_candidates``...).
    """
    opened: list[Librarian] = []

    def make(**settings: Any) -> Store:
        lib = Librarian(Settings(home=tmp_path / f"home{len(opened)}", **settings), embedder=embedder)
        opened.append(lib)
        operator = lib.default_principal
        identity = lib.identity
        for org in ("acme", "globex"):
            identity.create_organization(operator, org)
        identity.create_team(operator, "acme", "sre")
        identity.create_user(operator, "acme", "alice", teams=["sre"])
        identity.create_user(operator, "acme", "bob")
        identity.create_user(operator, "acme", "root", admin=True)
        identity.create_user(operator, "globex", "mallory")
        alice = identity.principal_of("acme", "alice")
        root = identity.principal_of("acme", "root")
        documents = lib.knowledge.documents
        ids: dict[str, int] = {}
        for name, note in PUBLIC_NOTES.items():
            draft = DocumentDraft(
                title=note.title,
                content=note.content,
                document_type=note.document_type,
                category=note.category,
                tags=note.tags,
                visibility="public",
            )
            ids[name] = documents.create(root, draft)["id"]
        secret = DocumentDraft(
            title=SECRET.title,
            content=SECRET.content,
            document_type=SECRET.document_type,
            category=SECRET.category,
            visibility="teams",
            allowed_teams=("sre",),
        )
        ids["secret"] = documents.create(alice, secret)["id"]
        return Store(
            lib,
            alice,
            identity.principal_of("acme", "bob"),
            root,
            identity.principal_of("globex", "mallory"),
            ids,
        )

    yield make
    for lib in opened:
        lib.close()


@pytest.fixture
def store(open_store: OpenStore) -> Store:
    """The corpus with the default settings."""
    return open_store()


# -- a document that answered the question before rises --------------------------------------------


def test_a_document_marked_helpful_for_a_similar_question_rises_to_first_for_its_organisation(
    store: Store,
) -> None:
    before = store.search(store.bob)
    assert store.names(before)[0] == "rotate"
    assert store.names(before).index("vault") >= 3, store.names(before)  # ranked low
    assert all(result.learned_similarity is None for result in before)

    store.feedback("vault", store.alice)  # alice found it answered a paraphrase of the question

    for reader in (store.bob, store.alice):  # every reader of acme, not just the one who voted
        after = store.search(reader)
        assert store.names(after)[0] == "vault", store.names(after)
        learned = store.hit(after, "vault").learned_similarity
        assert learned is not None and learned > 0.9
        assert store.hit(after, "rotate").learned_similarity is None  # nobody judged it


def test_a_document_no_retriever_ranked_joins_the_results_once_marked_helpful(
    open_store: OpenStore,
) -> None:
    # Two candidates per retriever, two results: ``vault`` is not among them before the feedback.
    store = open_store(search_candidates=2)
    before = store.search(store.bob, top_k=2)
    assert "vault" not in store.names(before), store.names(before)

    store.feedback("vault", store.alice, query=QUESTION)

    after = store.search(store.bob, top_k=2)
    assert "vault" in store.names(after), store.names(after)
    assert store.hit(after, "vault").learned_similarity == pytest.approx(1.0, abs=1e-3)


# -- switched off ------------------------------------------------------------------------------------


def test_a_learned_weight_of_zero_leaves_the_ranking_unchanged(open_store: OpenStore) -> None:
    store = open_store(search_learned_weight=0.0)
    before = store.search(store.bob)

    store.feedback("vault", store.alice)

    after = store.search(store.bob)
    assert scored(after) == scored(before)
    assert store.names(after)[0] == "rotate"


def test_searching_with_learned_from_use_false_leaves_the_ranking_unchanged(store: Store) -> None:
    before = store.search(store.bob)

    store.feedback("vault", store.alice)

    assert store.names(store.search(store.bob))[0] == "vault"  # the feedback counts by default...
    unlearned = store.search(store.bob, learned_from_use=False)
    assert scored(unlearned) == scored(before)  # ...but not when the caller asks for plain retrieval


# -- organisations -----------------------------------------------------------------------------------


def test_feedback_of_one_organisation_does_not_change_the_ranking_seen_by_another(store: Store) -> None:
    before_globex = store.search(store.mallory)

    store.feedback("vault", store.alice)  # acme's verdict on a public document both may read

    acme_learned = store.search(store.bob)
    assert store.names(acme_learned)[0] == "vault"
    assert scored(store.search(store.mallory)) == scored(before_globex)

    # And the other way round: globex's verdict on another document leaves acme's ranking alone.
    store.feedback("pool", store.mallory, query=QUESTION)

    assert store.names(store.search(store.mallory))[0] == "pool"
    assert scored(store.search(store.bob)) == scored(acme_learned)


# -- access control and filters ----------------------------------------------------------------------


@pytest.mark.parametrize("candidates", [2, 60], ids=["outside-the-candidates", "wide-candidates"])
def test_a_document_the_caller_may_not_read_is_never_returned_because_of_feedback(
    open_store: OpenStore, candidates: int
) -> None:
    store = open_store(search_candidates=candidates)
    assert "secret" not in store.names(store.search(store.alice, top_k=2))  # not ranked for alice either

    # Alice (team sre) may read it and says it answered the very question; bob may not read it.
    store.feedback("secret", store.alice, query=QUESTION)

    # Alice: the document joins her results although no retriever ranked it (the "added" path)...
    alice_sees = store.search(store.alice, top_k=2)
    assert "secret" in store.names(alice_sees), store.names(alice_sees)
    assert store.hit(alice_sees, "secret").learned_similarity == pytest.approx(1.0, abs=1e-3)
    # ...bob, of the same organisation, never sees it, however many results he asks for.
    for top_k in (1, 2, 10, 100):
        assert "secret" not in store.names(store.search(store.bob, top_k=top_k))
    assert "secret" not in store.names(store.search(store.mallory, top_k=100))


def test_a_document_made_unreadable_after_the_feedback_is_not_returned(store: Store) -> None:
    store.feedback("vault", store.bob)  # bob could read it when he voted
    assert store.names(store.search(store.alice))[0] == "vault"

    # Its administrator makes it private to himself: nobody else in acme may read it any more.
    store.lib.knowledge.documents.update(
        store.root, store.ids["vault"], 1, DocumentDraft(visibility="private")
    )

    for reader in (store.alice, store.bob):
        for top_k in (1, 2, 100):
            assert "vault" not in store.names(store.search(reader, top_k=top_k))
    assert store.names(store.search(store.root))[0] == "vault"  # the one who may read it still gets it


def test_feedback_on_a_document_the_caller_may_not_read_leaves_the_callers_results_untouched(
    store: Store,
) -> None:
    # Nothing bob could see may change: not the order, not a score (a score that moves would tell
    # him that someone in his organisation found a hidden document answered his kind of question).
    before = store.search(store.bob)

    store.feedback("secret", store.alice, query=QUESTION)

    assert scored(store.search(store.bob)) == scored(before)


@pytest.mark.parametrize(
    "search_filter",
    [
        {"document_type": "runbook"},
        {"document_types": ("runbook", "solution")},
        {"category": "database"},
        {"tags": ("db",)},
    ],
    ids=["document_type", "document_types", "category", "tags"],
)
def test_search_filters_still_hold_for_documents_raised_by_feedback(
    open_store: OpenStore, search_filter: dict[str, Any]
) -> None:
    store = open_store(search_candidates=2)
    # ``vault`` is a wiki page of category security tagged ``secrets``: every filter here excludes it.
    store.feedback("vault", store.alice, query=QUESTION)
    assert store.names(store.search(store.bob))[0] == "vault"  # unfiltered, the feedback raises it

    for top_k in (2, 100):
        results = store.search(store.bob, top_k=top_k, **search_filter)
        assert results, search_filter
        assert "vault" not in store.names(results)
        for result in results:
            if "document_type" in search_filter:
                assert result.document_type == search_filter["document_type"]
            if "document_types" in search_filter:
                assert result.document_type in search_filter["document_types"]
            if "category" in search_filter:
                assert result.category == search_filter["category"]
            if "tags" in search_filter:
                assert set(search_filter["tags"]) <= set(result.tags)


def test_an_sdk_filter_still_holds_for_documents_raised_by_feedback(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "toolx-docs"
    folder.mkdir()
    (folder / "credentials.md").write_text(
        "# toolx credentials\n\nAfter you rotate the database password, run the toolx login again.\n"
    )
    assert store.lib.ingest(str(folder), sdk_name="toolx", sdk_version="1.0").status == "ok"
    store.feedback("vault", store.alice, query=QUESTION)
    assert store.names(store.search(store.bob))[0] == "vault"

    for top_k in (1, 100):
        results = store.search(store.bob, top_k=top_k, sdk_name="toolx")
        assert results
        assert {result.sdk_name for result in results} == {"toolx"}
        assert all(result.learned_similarity is None for result in results)


# -- verdicts that do not count -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("feedback_type", "rating"),
    [("not_helpful", None), ("incorrect", None), ("outdated", None), ("not_helpful", 2)],
    ids=["not_helpful", "incorrect", "outdated", "two-stars"],
)
def test_negative_feedback_with_a_search_query_does_not_boost(
    store: Store, feedback_type: str, rating: int | None
) -> None:
    before = store.search(store.bob)

    store.feedback("vault", store.alice, feedback_type=feedback_type, query=QUESTION, rating=rating)

    after = store.search(store.bob)
    assert scored(after) == scored(before)
    assert store.names(after)[0] == "rotate"


def test_helpful_feedback_for_an_unrelated_question_does_not_boost(store: Store) -> None:
    before = store.search(store.bob)

    store.feedback("vault", store.alice, query=UNRELATED)

    assert scored(store.search(store.bob)) == scored(before)
    assert store.names(store.search(store.bob, UNRELATED))[0] == "vault"  # it counts for its own question


# -- deleted documents --------------------------------------------------------------------------------


def test_a_deleted_documents_feedback_is_forgotten(store: Store) -> None:
    store.feedback("vault", store.alice)
    store.feedback("cert", store.alice, query=UNRELATED)  # another verdict of acme, which stays
    assert store.names(store.search(store.bob))[0] == "vault"

    store.lib.knowledge.documents.delete(store.root, store.ids["vault"])

    after = store.search(store.bob)
    assert "vault" not in store.names(after)
    assert store.names(after) == store.names(store.search(store.bob, learned_from_use=False))
    assert all(result.learned_similarity is None for result in after)
    # What a freshly started process remembers for acme: the certificate's question, not the vault's.
    remembered = LearnedRanking(store.lib.sessions, store.lib.cache)
    acme = store.alice.organization_id
    embed = store.lib.cache.embed_query
    assert remembered.nearest_documents(acme, embed(QUESTION)[0]) == {}
    assert set(remembered.nearest_documents(acme, embed(UNRELATED)[0])) == {store.ids["cert"]}


def test_after_deleting_the_only_learned_document_search_scores_are_those_of_plain_retrieval(
    store: Store,
) -> None:
    store.feedback("vault", store.alice)
    assert store.names(store.search(store.bob))[0] == "vault"

    store.lib.knowledge.documents.delete(store.root, store.ids["vault"])

    assert scored(store.search(store.bob)) == scored(store.search(store.bob, learned_from_use=False))


def test_verdicts_given_after_the_first_search_are_learned_without_forgetting_the_earlier_ones(
    store: Store,
) -> None:
    remembered = LearnedRanking(store.lib.sessions, store.lib.cache)
    acme = store.alice.organization_id
    embed = store.lib.cache.embed_query
    store.feedback("vault", store.alice)
    assert set(remembered.nearest_documents(acme, embed(QUESTION)[0])) == {store.ids["vault"]}

    store.feedback("cert", store.alice, query=UNRELATED)  # appended to what is already loaded
    store.feedback("disk", store.alice, "not_helpful", query=UNRELATED)  # counted, not remembered

    assert set(remembered.nearest_documents(acme, embed(UNRELATED)[0])) == {store.ids["cert"]}
    assert set(remembered.nearest_documents(acme, embed(QUESTION)[0])) == {store.ids["vault"]}


def test_the_document_id_of_a_search_result_is_what_feedback_takes(store: Store) -> None:
    before = store.search(store.bob)
    lower = before[2]
    assert lower.document_id == store.ids[store.names([lower])[0]]

    store.lib.knowledge.feedback(lower.document_id, "helpful", search_query=PARAPHRASE, principal=store.alice)

    assert store.search(store.bob)[0].document_id == lower.document_id


def test_documents_the_caller_may_not_read_do_not_take_the_places_of_those_it_may(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import librarian.knowledge.learned_search as learned_search

    monkeypatch.setattr(learned_search, "_MAX_ADDED", 1)  # one document may join a search
    store = open_store(search_candidates=2)
    assert not {"secret", "vault"} & set(store.names(store.search(store.bob, top_k=2)))
    store.feedback("secret", store.alice, query=QUESTION)  # the closest, but bob may not read it
    store.feedback("vault", store.alice, query=PARAPHRASE)

    assert "vault" in store.names(store.search(store.bob, top_k=2))


def test_a_failure_while_learning_leaves_the_search_to_plain_fusion(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.feedback("vault", store.alice)
    plain = scored(store.search(store.bob, learned_from_use=False))
    learned = store.lib.retriever._learned
    assert learned is not None

    def unavailable(*_: object, **__: object) -> list[object]:
        raise RuntimeError("the embedder is unreachable")

    monkeypatch.setattr(learned, "rerank", unavailable)

    assert scored(store.search(store.bob)) == plain
