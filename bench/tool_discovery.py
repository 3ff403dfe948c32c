"""Tool discovery: ``/tools/search`` latency at 10,000 tools, and novel-verb resolution (issue 16).

``latency``: the 199 MetaTool tools are registered through the API (real embeddings), then
``--tools`` minus 199 more are written straight through the ORM with random unit vectors in the
embedding cache (the matrix product costs the same whatever the vectors hold), spread over three
organisations. ``search_tools`` is then timed for a member of one organisation on MetaTool queries
(every text unique, so every query is embedded: no query cache hit), warm, through the same facade
call the REST route makes. Side by side, the query embedding alone is timed on other unique texts.

``novel``: MetaTool's tools are split by a hash of their id: 80 % are registered, 20 % held out. Each
query of the test half (the half ``librarian eval tools`` never learns from) becomes a workflow verb
named from its first words with the query as its description, and is resolved by
:meth:`DiscoveryService.resolve_verb`. A verb whose tool is registered is a *paraphrase*: it should
be substituted by exactly that tool; one whose tool was held out is *new*: substituting it is a
mistake, creating it is right. The learn half is recorded as use first, as in production.

    .venv/bin/python -m bench.tool_discovery latency --tools 10000 --queries 400
    .venv/bin/python -m bench.tool_discovery latency --tools 10000 --queries 400 --words 6
    .venv/bin/python -m bench.tool_discovery novel
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.discovery.models import ToolRow
from librarian.embeddings.cache import content_hash
from librarian.evaluation.retrieval import load_beir
from librarian.evaluation.split import learn_half
from librarian.knowledge.access import Principal, object_grants
from librarian.storage.models import EmbeddingCacheEntry, utcnow

METATOOL = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "metatool"


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


def _synthetic_tools(lib: Librarian, count: int, seed: int = 7) -> None:
    """``count`` tools with random unit vectors, three organisations, written through the ORM."""
    rng = np.random.default_rng(seed)
    dimension = lib.cache.embedder.dimension
    model = lib.cache.embedder.model_version
    now = utcnow()
    with lib.sessions.begin() as session:
        for start in range(0, count, 1000):
            batch = range(start, min(count, start + 1000))
            vectors = rng.normal(size=(len(batch), dimension)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            for number, vector in zip(batch, vectors, strict=True):
                digest = content_hash(f"synthetic tool {number}")
                organization = 1 + number % 3
                session.add(
                    EmbeddingCacheEntry(
                        content_hash=digest, model_version=model, dimension=dimension, vector=vector.tobytes()
                    )
                )
                session.add(
                    ToolRow(
                        organization_id=organization,
                        created_by=None,
                        visibility="organization",
                        allowed_teams=[],
                        access_grants=object_grants(organization, "organization", (), None),
                        tool_key=f"synthetic.tool_{number}",
                        name=f"tool_{number}",
                        tool_type=("mcp", "openapi", "python", "cli")[number % 4],
                        description=f"synthetic tool {number}",
                        action_verbs=[],
                        capabilities=[],
                        examples=[],
                        input_schema={},
                        binding={},
                        content_hash=digest,
                        enrichment=[],
                        search_hash=digest,
                        status="active",
                        health="healthy",
                        consecutive_failures=0,
                        success_count=0,
                        failure_count=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
            session.flush()


def latency(tools: int, queries: int, words: int | None = None) -> dict[str, Any]:
    """Search latency with ``tools`` registered tools (see the module docstring); ``words`` cuts each
    query to its first words (agents often search with a few words, not a sentence)."""
    dataset = load_beir(METATOOL)
    texts = [" ".join(text.split()[:words]) if words else text for text in dataset.queries.values()]
    with (
        tempfile.TemporaryDirectory(prefix="bench-tools-") as scratch,
        Librarian(Settings(home=Path(scratch) / "home")) as lib,
    ):
        lib.discovery.register_tools(
            [
                {"toolId": tool_id, "name": title or tool_id, "type": "python", "description": text}
                for tool_id, (title, text) in dataset.corpus.items()
            ]
        )
        _synthetic_tools(lib, max(0, tools - len(dataset.corpus)))
        member = Principal(organization_id=1, user_id=1)
        lib.discovery.search_tools("warm up the index", principal=member)
        search_ms: list[float] = []
        embed_ms: list[float] = []
        rest_ms: list[float] = []
        # The REST route in process (the ASGI app, no network): what it adds to the facade's call.
        with TestClient(create_app(lib)) as client:
            client.post("/tools/search", json={"query": "warm up the route", "top_k": 5})
            for number in range(queries):
                # In turn, each on a text never seen before: the embedding alone, a search through
                # the facade, and one through POST /tools/search (as the local organisation's user).
                text = texts[(3 * number) % len(texts)] + f" #{number}"
                started = time.perf_counter()
                lib.cache.embedder.embed([texts[(3 * number + 1) % len(texts)] + f" #{number}"])
                embed_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                answer = lib.discovery.search_tools(text, principal=member, top_k=5)
                search_ms.append((time.perf_counter() - started) * 1000)
                assert answer["results"], "a search returned nothing"
                started = time.perf_counter()
                reply = client.post(
                    "/tools/search",
                    json={"query": texts[(3 * number + 2) % len(texts)] + f" #{number}", "top_k": 5},
                )
                rest_ms.append((time.perf_counter() - started) * 1000)
                assert reply.status_code == 200 and reply.json()["results"], reply.text
        return {
            "tools": tools,
            "queries": queries,
            "query_words": words or "whole",
            "search_tools_ms": _summary(search_ms),
            "rest_tools_search_ms": _summary(rest_ms),
            "query_embedding_ms": _summary(embed_ms),
        }


def _tool_split(tool_id: str) -> bool:
    """True for the 80 % of tools that are registered (a stable hash split)."""
    return hashlib.sha256(tool_id.encode("utf-8")).digest()[0] % 5 != 0


def _verb_of(query: str) -> str:
    words = [word for word in query.replace("?", " ").replace(",", " ").split() if word.isalpha()]
    return "_".join(words[:4]).upper() or "UNNAMED"


def novel(threshold: float | None = None) -> dict[str, Any]:
    """Novel-verb resolution on MetaTool (see the module docstring)."""
    dataset = load_beir(METATOOL)
    registered = {tool_id for tool_id in dataset.corpus if _tool_split(tool_id)}
    with tempfile.TemporaryDirectory(prefix="bench-novel-") as scratch:
        settings = Settings(home=Path(scratch) / "home")
        if threshold is not None:
            settings = settings.model_copy(update={"tools_substitute_confidence": threshold})
        with Librarian(settings) as lib:
            lib.discovery.register_tools(
                [
                    {"toolId": tool_id, "name": title or tool_id, "type": "python", "description": text}
                    for tool_id, (title, text) in dataset.corpus.items()
                    if tool_id in registered
                ]
            )
            for query_id, text in dataset.queries.items():
                tool = next(iter(dataset.qrels[query_id]))
                if learn_half(query_id) and tool in registered:
                    lib.discovery.record_use(tool, text)
            counts = {
                "paraphrase": 0,
                "substituted_right": 0,
                "substituted_wrong_tool": 0,
                "created": 0,
                "new": 0,
                "new_substituted": 0,
                "new_created": 0,
            }
            for query_id, text in dataset.queries.items():
                if learn_half(query_id):
                    continue
                tool = next(iter(dataset.qrels[query_id]))
                # A unique name: a verb created by one case must not be found exactly by another.
                resolution = lib.discovery.resolve_verb(f"{_verb_of(text)}_{query_id}", text)
                bound = {binding.tool for binding in resolution.bindings}
                if tool in registered:
                    counts["paraphrase"] += 1
                    if resolution.kind == "created":
                        counts["created"] += 1
                    elif tool in bound:
                        counts["substituted_right"] += 1
                    else:
                        counts["substituted_wrong_tool"] += 1
                else:
                    counts["new"] += 1
                    counts["new_created" if resolution.kind == "created" else "new_substituted"] += 1
    paraphrases = max(counts["paraphrase"], 1)
    return {
        "threshold": settings.tools_substitute_confidence,
        "tools_registered": len(registered),
        "tools_held_out": len(dataset.corpus) - len(registered),
        **counts,
        "paraphrase_substituted_correctly_percent": round(100 * counts["substituted_right"] / paraphrases, 1),
        "paraphrase_created_percent": round(100 * counts["created"] / paraphrases, 1),
        # Without discovery every unknown verb is created: the reduction is the share not created.
        "novel_verbs_created_reduction_percent": round(100 * (1 - counts["created"] / paraphrases), 1),
        "new_wrongly_substituted_percent": round(100 * counts["new_substituted"] / max(counts["new"], 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    timed = commands.add_parser("latency")
    timed.add_argument("--tools", type=int, default=10_000)
    timed.add_argument("--queries", type=int, default=400)
    timed.add_argument("--words", type=int, default=None, help="cut each query to its first N words")
    resolved = commands.add_parser("novel")
    resolved.add_argument("--threshold", type=float, default=None)
    arguments = parser.parse_args()
    if arguments.command == "latency":
        result = latency(arguments.tools, arguments.queries, arguments.words)
    else:
        result = novel(arguments.threshold)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
