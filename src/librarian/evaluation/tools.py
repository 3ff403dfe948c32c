"""``librarian eval tools``: tool discovery on a BEIR-layout tool set, through the search users get.

Each corpus entry becomes a registered tool (``_id`` its toolId, ``title`` its name, ``text`` its
description); each query goes through :meth:`DiscoveryService.search_tools`.

Discovery learns from use, so the queries are split in two by a hash of their id (SHA-256, even
last bit: *learn*, odd: *test*). The learn half is recorded as served requests of its relevant tool
(:meth:`DiscoveryService.record_use`, as an agent reporting its choice would); every figure is
measured on the test half only, once before learning (``cold``) and once after (``learned``). Nothing
about the test half is ever recorded, so it stays held apart.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.base import Embedder
from librarian.evaluation.metrics import hit_at, mrr_at, ndcg_at, percentile, recall_at
from librarian.evaluation.retrieval import BeirDataset, load_beir
from librarian.evaluation.split import SPLIT_RULE, learn_half


def _manifests(dataset: BeirDataset) -> list[dict[str, Any]]:
    return [
        {"toolId": tool_id, "name": title or tool_id, "type": "python", "description": text}
        for tool_id, (title, text) in dataset.corpus.items()
    ]


def _measure(
    lib: Librarian, dataset: BeirDataset, query_ids: list[str], top_k: int, *, timed: bool = True
) -> dict[str, Any]:
    """The metrics of ``query_ids``; latency only when ``timed`` (the first pass: a second pass finds
    every query's vector in the query cache and would time the ranking alone)."""
    totals: dict[str, float] = defaultdict(float)
    latencies: list[float] = []
    confidences: list[tuple[float, bool]] = []
    for query_id in query_ids:
        started = time.perf_counter()
        answer = lib.discovery.search_tools(dataset.queries[query_id], top_k=top_k)
        latencies.append((time.perf_counter() - started) * 1000)
        ranked = [str(result["toolId"]) for result in answer["results"]]
        relevant = dataset.qrels[query_id]
        for k in (1, 3, 5, 10):
            totals[f"hit@{k}"] += hit_at(ranked, relevant, k)
        totals["recall@5"] += recall_at(ranked, relevant, 5)
        totals["comp@5"] += 1.0 if relevant <= set(ranked[:5]) else 0.0
        totals["ndcg@10"] += ndcg_at(ranked, relevant, 10)
        totals["mrr@10"] += mrr_at(ranked, relevant, 10)
        if answer["results"]:
            confidences.append((float(answer["results"][0]["confidence"]), ranked[0] in relevant))
    count = max(len(query_ids), 1)
    metrics: dict[str, Any] = {name: round(100 * value / count, 1) for name, value in totals.items()}
    if timed:
        metrics["p50_ms"] = round(percentile(latencies, 0.5), 2)
        metrics["p95_ms"] = round(percentile(latencies, 0.95), 2)
    metrics["calibration"] = _calibration(confidences)
    return metrics


def _coverage(lib: Librarian, dataset: BeirDataset) -> float:
    """Percent of tools found in the top 5 by a query written from their own description.

    The query is the description's first sentence with the tool's own name taken out, so a tool is
    not found merely because the query spells its name.
    """
    found = 0
    for tool_id, (title, text) in dataset.corpus.items():
        sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
        for name in {tool_id, title}:
            if name:
                sentence = re.sub(re.escape(name), "", sentence, flags=re.IGNORECASE)
        ranked = [
            r["toolId"] for r in lib.discovery.search_tools(sentence.strip() or text, top_k=5)["results"]
        ]
        found += tool_id in ranked
    return round(100 * found / max(len(dataset.corpus), 1), 1)


def _calibration(pairs: list[tuple[float, bool]]) -> list[dict[str, Any]]:
    """Precision@1 of the queries whose top confidence falls in each band (how honest it is)."""
    bands = ((0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.01))
    table = []
    for low, high in bands:
        inside = [correct for confidence, correct in pairs if low <= confidence < high]
        if inside:
            table.append(
                {
                    "confidence": f"{low:.2f}-{min(high, 1.0):.2f}",
                    "queries": len(inside),
                    "precision@1": round(100 * sum(inside) / len(inside), 1),
                }
            )
    return table


def evaluate_tools(
    directory: Path,
    settings: Settings,
    *,
    top_k: int = 10,
    learn: bool = True,
    embedder: Embedder | None = None,
    database_url: str | None = None,
) -> dict[str, Any]:
    """Register the dataset's tools in a throwaway store and return the metrics (percent), latencies
    (ms) and the calibration of ``confidence``, on the held-apart test half of the queries."""
    dataset = load_beir(directory)
    learn_ids = [query_id for query_id in dataset.queries if learn_half(query_id)]
    test_ids = [query_id for query_id in dataset.queries if not learn_half(query_id)]
    with tempfile.TemporaryDirectory(prefix="librarian-eval-tools-") as scratch:
        eval_settings = settings.model_copy(
            update={"home": Path(scratch) / "home", "database_url": database_url, "vector_url": None}
        )
        with Librarian(eval_settings, embedder=embedder) as lib:
            started = time.perf_counter()
            registered = lib.discovery.register_tools(_manifests(dataset))
            register_seconds = time.perf_counter() - started
            lib.discovery.search_tools("warm up")
            coverage = _coverage(lib, dataset)
            result: dict[str, Any] = {
                "tools": len(dataset.corpus),
                "tools_rejected": registered["errors"],
                "queries_test": len(test_ids),
                "queries_learned": 0,
                "register_seconds": round(register_seconds, 2),
                "split": SPLIT_RULE,
                "coverage@5": coverage,
                "cold": _measure(lib, dataset, test_ids, top_k),
            }
            if learn:
                for query_id in learn_ids:
                    for tool_id in sorted(dataset.qrels[query_id]):
                        if tool_id in dataset.corpus:
                            lib.discovery.record_use(tool_id, dataset.queries[query_id])
                result["queries_learned"] = len(learn_ids)
                result["learned"] = _measure(lib, dataset, test_ids, top_k, timed=False)
    return result
