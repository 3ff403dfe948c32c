"""``librarian eval retrieval``: BEIR-layout datasets through the same search path users get.

The corpus is written as Markdown files into a throwaway data directory and ingested with the normal
pipeline; every query then goes through :meth:`Librarian.search`. A document's rank is the rank of
its best chunk. Learning from use (``knowledge/learned_search.py``) is measured on held-apart queries.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from librarian.app import Librarian
from librarian.config import Settings
from librarian.errors import InvalidInputError, NotFoundError
from librarian.evaluation.metrics import hit_at, mrr_at, ndcg_at, percentile, recall_at
from librarian.evaluation.split import SPLIT_RULE, learn_half
from librarian.ingest.pipeline import ProgressCallback
from librarian.storage.models import Document


@dataclass(frozen=True)
class BeirDataset:
    """A corpus (id -> (title, text)), queries (id -> text) and relevance judgements."""

    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, set[str]]


def load_beir(directory: Path) -> BeirDataset:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv`` from ``directory``.

    Raises:
        NotFoundError: a file is missing.
        InvalidInputError: a line is not valid JSON or lacks a field (the message names file and line).
    """
    corpus = {
        record["_id"]: (str(record.get("title") or ""), str(record["text"]))
        for record in _read_jsonl(directory / "corpus.jsonl", ("_id", "text"))
    }
    queries = {
        record["_id"]: str(record["text"])
        for record in _read_jsonl(directory / "queries.jsonl", ("_id", "text"))
    }
    qrels_path = directory / "qrels" / "test.tsv"
    if not qrels_path.is_file():
        raise NotFoundError(f"{qrels_path} does not exist")
    qrels: dict[str, set[str]] = defaultdict(set)
    for number, line in enumerate(qrels_path.read_text(encoding="utf-8").splitlines(), start=1):
        fields = line.split("\t")
        if number == 1 and fields[0] == "query-id":
            continue
        if len(fields) < 3:
            raise InvalidInputError(f"{qrels_path}:{number}: expected query-id, corpus-id, score")
        try:
            score = float(fields[2])
        except ValueError as exc:
            raise InvalidInputError(f"{qrels_path}:{number}: score {fields[2]!r} is not a number") from exc
        if score > 0:
            qrels[fields[0]].add(fields[1])
    return BeirDataset(corpus, {q: t for q, t in queries.items() if q in qrels}, dict(qrels))


def _read_jsonl(path: Path, required: tuple[str, ...]) -> list[dict[str, Any]]:
    if not path.is_file():
        raise NotFoundError(f"{path} does not exist")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
        missing = [name for name in required if name not in record]
        if missing:
            raise InvalidInputError(f"{path}:{number}: missing field(s) {', '.join(missing)}")
        records.append(record)
    return records


def _file_name(doc_id: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", doc_id)[:100] or "doc"
    name, counter = base, 1
    while name.lower() in taken:
        counter += 1
        name = f"{base}-{counter}"
    taken.add(name.lower())
    return name


def evaluate_retrieval(
    directory: Path,
    settings: Settings,
    top_k: int = 10,
    *,
    database_url: str | None = None,
    exact_identifiers: bool = True,
    learn: bool = True,
    progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Index the dataset in a throwaway store and return the metrics (percent) and latencies (ms).

    The top-level figures are every query, cold (nothing learned). With ``learn``, the queries are
    also split by a hash of their id (:func:`~librarian.evaluation.split.learn_half`): the learn half
    is recorded as feedback (each query marked helpful on its relevant documents, as a reader who
    found the answer does), and ``learned`` reports the other half before and after, so learning
    from use is measured only on queries it never saw.

    ``database_url`` names an empty database to use instead of a throwaway SQLite file (to measure
    the PostgreSQL backend; ``bench/retrieval_postgres.py``). ``exact_identifiers`` is search's
    exact-identifier lookup (off measures fusion alone; ``bench/exact_identifiers.py``).
    ``progress`` hears each stage with its counts: ``files`` while indexing, ``queries`` after.
    """
    dataset = load_beir(directory)
    with tempfile.TemporaryDirectory(prefix="librarian-eval-") as scratch:
        root = Path(scratch)
        doc_of_file = _write_corpus(dataset, root / "corpus")
        eval_settings = settings.model_copy(
            update={"home": root / "home", "database_url": database_url, "vector_url": None}
        )
        with Librarian(eval_settings) as lib:
            started = time.perf_counter()
            lib.ingest(str(root / "corpus"), document_type="eval", progress=progress)
            ingest_seconds = time.perf_counter() - started
            lib.search("warm up", top_k=top_k)
            ranking = _Ranking(lib, doc_of_file, max(top_k * 3, 30), exact_identifiers)
            rankings: dict[str, list[str]] = {}
            latencies: list[float] = []
            for done, (query_id, query) in enumerate(dataset.queries.items()):
                if progress is not None:
                    progress("queries", done, len(dataset.queries))
                started = time.perf_counter()
                rankings[query_id] = ranking.rank(query)
                latencies.append((time.perf_counter() - started) * 1000)
            metrics = _scores(dataset, rankings)
            learned = _learn_and_measure(lib, dataset, ranking, rankings) if learn else None
    metrics.update(
        {
            "p50_ms": round(percentile(latencies, 0.5), 2),
            "p95_ms": round(percentile(latencies, 0.95), 2),
            "queries": len(dataset.queries),
            "documents": len(dataset.corpus),
            "ingest_seconds": round(ingest_seconds, 2),
            "vector_weight": settings.hybrid_vector_weight,
            "exact_identifiers": exact_identifiers,
        }
    )
    if learned is not None:
        metrics["learned"] = learned
    return metrics


def _write_corpus(dataset: BeirDataset, corpus_dir: Path) -> dict[str, str]:
    """Write each corpus record as a Markdown file; returns file name -> corpus id."""
    corpus_dir.mkdir()
    doc_of_file: dict[str, str] = {}
    taken: set[str] = set()
    for doc_id, (title, text) in dataset.corpus.items():
        name = _file_name(doc_id, taken)
        body = text if text.lstrip().startswith("#") or not title else f"# {title}\n\n{text}"
        (corpus_dir / f"{name}.md").write_text(body, encoding="utf-8")
        doc_of_file[f"{name}.md"] = doc_id
    return doc_of_file


@dataclass(frozen=True)
class _Ranking:
    """Runs a query through search and names the corpus documents it found, best first."""

    lib: Librarian
    doc_of_file: dict[str, str]
    chunks: int
    exact_identifiers: bool

    def rank(self, query: str) -> list[str]:
        results = self.lib.search(query, top_k=self.chunks, exact_identifiers=self.exact_identifiers)
        ranked: list[str] = []
        for result in results:
            matched = self.doc_of_file.get(result.source_url.rsplit("/", 1)[-1])
            if matched is not None and matched not in ranked:
                ranked.append(matched)
        return ranked


def _scores(dataset: BeirDataset, rankings: dict[str, list[str]]) -> dict[str, Any]:
    """Hit@1/5/10, Recall@5/10, NDCG@10 and MRR@10 (percent) over the queries of ``rankings``."""
    totals: dict[str, float] = defaultdict(float)
    for query_id, ranked in rankings.items():
        relevant = dataset.qrels[query_id]
        for k in (1, 5, 10):
            totals[f"hit@{k}"] += hit_at(ranked, relevant, k)
        for k in (5, 10):
            totals[f"recall@{k}"] += recall_at(ranked, relevant, k)
        totals["ndcg@10"] += ndcg_at(ranked, relevant, 10)
        totals["mrr@10"] += mrr_at(ranked, relevant, 10)
    count = max(len(rankings), 1)
    return {name: round(100 * value / count, 1) for name, value in totals.items()}


def _learn_and_measure(
    lib: Librarian, dataset: BeirDataset, ranking: _Ranking, cold: dict[str, list[str]]
) -> dict[str, Any]:
    """Record the learn half as helpful feedback, then score the test half before and after."""
    learn_ids = [query_id for query_id in dataset.queries if learn_half(query_id)]
    test_ids = [query_id for query_id in dataset.queries if not learn_half(query_id)]
    with lib.sessions() as session:
        document_of_file = {
            url.rsplit("/", 1)[-1]: document_id
            for document_id, url in session.execute(select(Document.id, Document.source_url))
        }
    stored_of_corpus = {
        corpus_id: document_of_file[name]
        for name, corpus_id in ranking.doc_of_file.items()
        if name in document_of_file
    }
    recorded = 0
    for query_id in learn_ids:
        for corpus_id in sorted(dataset.qrels[query_id]):
            if corpus_id in stored_of_corpus:
                lib.knowledge.feedback(
                    stored_of_corpus[corpus_id],
                    "helpful",
                    search_query=dataset.queries[query_id],
                    was_used=True,
                )
                recorded += 1
    # The fit a search would start in the background, run here first so the figures are repeatable.
    fusion_weight = lib.retriever.fit_fusion_weight(lib.default_principal.organization_id)
    after = {query_id: ranking.rank(dataset.queries[query_id]) for query_id in test_ids}
    return {
        "split": SPLIT_RULE,
        "queries_learned": len(learn_ids),
        "queries_test": len(test_ids),
        "feedback_recorded": recorded,
        "weight": lib.settings.search_learned_weight,
        "fusion_weight": fusion_weight,
        "min_similarity": lib.settings.search_learned_min_similarity,
        "cold": _scores(dataset, {query_id: cold[query_id] for query_id in test_ids}),
        "learned": _scores(dataset, after),
    }
