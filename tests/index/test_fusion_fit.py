"""Fitting an organisation's fusion weight on its remembered verdicts (``index/fusion_fit.py``).

The choice itself is tested on hand-made rankings; the wiring on a real store (SQLite, embedded
Chroma, the real model): verdicts recorded through ``lib.knowledge.feedback``, the fit run through
``HybridRetriever.fit_fusion_weight``, and the weight then used by ``Librarian.search``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.index import hybrid
from librarian.index.fusion import FusedHit, fuse
from librarian.index.fusion_fit import CANDIDATE_WEIGHTS, MIN_EXAMPLES, Example, best_weight


def keyword_knows(answer: int) -> Example:
    """The keyword side ranks ``answer`` first; the vector side ranks it last of five."""
    return Example(
        vector_hits=[(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6), (answer, 0.1)],
        lexical_hits=[(answer, 9.0), (1, 1.0), (2, 0.5)],
        answer_chunks=frozenset({answer}),
    )


def vector_knows(answer: int) -> Example:
    """The vector side ranks ``answer`` first; the keyword side ranks it last."""
    return Example(
        vector_hits=[(answer, 0.9), (1, 0.5), (2, 0.45)],
        lexical_hits=[(1, 9.0), (2, 8.0), (3, 7.0), (answer, 0.5)],
        answer_chunks=frozenset({answer}),
    )


def both_know(answer: int) -> Example:
    """Both sides rank ``answer`` first: every weight ranks it first."""
    return Example([(answer, 0.9), (1, 0.2)], [(answer, 9.0), (1, 1.0)], frozenset({answer}))


def test_a_corpus_whose_answers_the_keyword_side_finds_gets_a_lower_vector_weight() -> None:
    examples = [keyword_knows(100 + n) for n in range(MIN_EXAMPLES)]

    # Every weight that ranks the answers first wins; of those, the closest to the configured one.
    assert best_weight(examples, 0.5) == 0.35
    assert best_weight(examples, 0.65) == 0.35


def test_a_corpus_whose_answers_the_vector_side_finds_gets_a_higher_vector_weight() -> None:
    examples = [vector_knows(100 + n) for n in range(MIN_EXAMPLES)]

    assert best_weight(examples, 0.5) == 0.65
    assert best_weight(examples, 0.35) == 0.65


def test_too_few_verdicts_or_no_better_weight_keep_the_configured_weight() -> None:
    few = [keyword_knows(100 + n) for n in range(MIN_EXAMPLES - 1)]
    agreed = [both_know(100 + n) for n in range(MIN_EXAMPLES)]
    nearly = [both_know(100 + n) for n in range(3 * MIN_EXAMPLES)] + [keyword_knows(500)]

    assert best_weight(few, 0.5) == 0.5
    assert best_weight(agreed, 0.5) == 0.5
    assert best_weight(nearly, 0.5) == 0.5  # one answer of 91 moves the mean by less than the margin


# -- on a real store ---------------------------------------------------------------------------------

TOPICS = {
    "backup": "Backups of the database run nightly and are kept for thirty days in cold storage.",
    "deploy": "Deploying a service builds its image, runs the migrations and shifts traffic slowly.",
    "oncall": "The on-call engineer answers pages within five minutes and writes the handover notes.",
    "vpn": "The VPN client connects laptops to the office network with a certificate per device.",
    "billing": "Invoices are issued on the first day of the month and paid by bank transfer.",
    "laptop": "A broken laptop is swapped at the IT desk; bring it with its charger and badge.",
}
# Questions in other words than the pages (the vector side finds them, the keyword side hardly).
QUESTIONS = {
    "backup": ["how long do we retain snapshots", "where do nightly copies of data go"],
    "deploy": ["how is a release rolled out", "what happens when code ships to production"],
    "oncall": ["who responds when an alert fires", "what must the person holding the pager do"],
    "vpn": ["how do I reach internal sites from home", "remote access to the corporate network"],
    "billing": ["when are customers charged", "how do clients settle what they owe"],
    "laptop": ["my computer died, what now", "where do I get a replacement notebook"],
}


def open_store(
    tmp_path: Path, embedder: LocalMiniLMEmbedder, vector_weight: float = 0.5
) -> tuple[Librarian, dict[str, int]]:
    pages = tmp_path / "pages"
    pages.mkdir()
    for name, text in TOPICS.items():
        (pages / f"{name}.md").write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    lib = Librarian(Settings(home=tmp_path / "home", hybrid_vector_weight=vector_weight), embedder=embedder)
    lib.ingest(str(pages))
    document_of = {
        result.source_url.rsplit("/", 1)[-1].removesuffix(".md"): result.document_id
        for result in lib.search("page", top_k=50)
    }
    assert set(document_of) == set(TOPICS)
    return lib, {name: int(document_id or 0) for name, document_id in document_of.items()}


def record_verdicts(lib: Librarian, documents: dict[str, int], rounds: int) -> None:
    for round_number in range(rounds):
        for name, questions in QUESTIONS.items():
            for question in questions:
                lib.knowledge.feedback(
                    documents[name], "helpful", search_query=f"{question} ({round_number})"
                )


def test_enough_verdicts_fit_a_weight_that_search_then_uses(
    tmp_path: Path, embedder: LocalMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib, documents = open_store(tmp_path, embedder)
    organization = lib.default_principal.organization_id
    with lib:
        record_verdicts(lib, documents, rounds=3)  # 36 verdicts
        retriever = lib.retriever
        lib.search("how long do we retain snapshots")  # loads what was remembered

        weight = retriever.fit_fusion_weight(organization)

        assert weight in CANDIDATE_WEIGHTS and weight > lib.settings.hybrid_vector_weight
        assert retriever._learned is not None and not retriever._learned.needs_fit(organization)
        used: list[float] = []

        def recording_fuse(
            vector_hits: list[tuple[int, float]], lexical_hits: list[tuple[int, float]], vector_weight: float
        ) -> list[FusedHit]:
            used.append(vector_weight)
            return fuse(vector_hits, lexical_hits, vector_weight)

        monkeypatch.setattr(hybrid, "fuse", recording_fuse)
        lib.search("where do nightly copies of data go")
        lib.search("where do nightly copies of data go", learned_from_use=False)

        assert used == [weight, lib.settings.hybrid_vector_weight]


def test_few_verdicts_or_a_single_retriever_configured_fit_nothing(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    lib, documents = open_store(tmp_path, embedder, vector_weight=1.0)
    organization = lib.default_principal.organization_id
    with lib:
        record_verdicts(lib, documents, rounds=1)  # 12 verdicts
        lib.search("how long do we retain snapshots")
        learned = lib.retriever._learned
        assert learned is not None and not learned.needs_fit(organization)

        record_verdicts(lib, documents, rounds=2)
        lib.search("how long do we retain snapshots")

        assert learned.needs_fit(organization)  # enough now, but the operator chose vectors only
        assert lib.retriever.fit_fusion_weight(organization) == pytest.approx(1.0)
