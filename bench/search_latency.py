"""Search latency at scale: warm, one query at a time, query embedding included, sdk+version filter.

Builds a synthetic store of N chunks (text drawn from the AWS CLI's bundled examples, random unit
vectors, spread over 20 SDKs x 5 versions) straight through the repository layer and the vector
index, then times ``Librarian.search`` with a different query text each time (so the query-embedding
cache never helps).

    .venv/bin/python bench/search_latency.py --chunks 10000 --chunks 100000

``--remembered N`` first records N helpful verdicts with their queries (what learning from use reads,
``knowledge/learned_search.py``) spread over the store's documents, and ``--compare-learning`` then times the
same searches with learning off (``search_learned_weight=0``) and on, side by side.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sqlalchemy import func, select

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.cache import content_hash
from librarian.index.base import VectorMetadata, VectorRecord
from librarian.index.scope import scope_tokens
from librarian.knowledge.models import KnowledgeFeedback
from librarian.storage.models import Chunk, Document, EmbeddingCacheEntry, Source

SDKS = [f"sdk{i}" for i in range(20)]
VERSIONS = ["1.0", "1.1", "2.0", "2.1", "3.0"]
QUERY_WORDS = [
    "upload",
    "bucket",
    "object",
    "tags",
    "queue",
    "message",
    "list",
    "delete",
    "create",
    "policy",
    "instance",
    "table",
    "stream",
    "key",
    "role",
    "user",
    "function",
    "invoke",
    "snapshot",
    "volume",
]


def vocabulary() -> list[str]:
    import awscli  # type: ignore[import-untyped]

    words: list[str] = []
    for path in sorted((Path(awscli.__file__).parent / "examples").glob("s3*/*.rst"))[:200]:
        words.extend(re.findall(r"[a-z][a-z0-9-]{2,}", path.read_text(encoding="utf-8").lower()))
    return words


def build(lib: Librarian, chunks: int, seed: int = 7) -> float:
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    words = vocabulary()
    started = time.perf_counter()
    index = lib.vectors.active()
    model = lib.cache.embedder.model_version
    now = datetime.now(UTC)
    per_scope = chunks // (len(SDKS) * len(VERSIONS))
    with lib.sessions() as session:  # continue after chunks already in the store
        next_id = (session.scalar(select(func.max(Chunk.id))) or 0) + 1
    for sdk in SDKS:
        for version in VERSIONS:
            with lib.sessions.begin() as session:
                source = Source(
                    source_key=f"{sdk}@{version}",
                    uri=f"bench://{sdk}/{version}",
                    kind="local",
                    sdk_name=sdk,
                    sdk_version=version,
                    document_type="sdk_reference",
                    tags=[],
                    last_errors=[],
                    last_stats={},
                    visibility="public",
                )
                session.add(source)
                session.flush()
                document = Document(
                    source_id=source.id,
                    path="synthetic.md",
                    source_url="bench://synthetic",
                    current_version_no=1,
                    visibility="public",
                    access_grants=["public"],
                )
                session.add(document)
                session.flush()
                # SDK documentation is public: every caller's grants include "public".
                scope = scope_tokens(sdk, version, "sdk_reference", None, (), ("public",))
                rows = []
                for ordinal in range(per_scope):
                    text = f"{sdk} {version} {ordinal} " + " ".join(rng.choice(words) for _ in range(60))
                    entity = f"{rng.choice(words)} {rng.choice(words)}"
                    rows.append(
                        Chunk(
                            id=next_id + ordinal,
                            document_id=document.id,
                            document_version_no=1,
                            ordinal=ordinal,
                            sdk_name=sdk,
                            sdk_version=version,
                            entity_name=entity,
                            entity_type="command",
                            section_path=entity,
                            source_url="bench://synthetic",
                            content=text,
                            content_hash=content_hash(text),
                            last_fetched_at=now,
                            embedding_model_version="synthetic",
                            document_type="sdk_reference",
                            category=None,
                            tags=[],
                            search_title=entity,
                            search_scope=scope,
                            access_grants=["public"],
                        )
                    )
                session.add_all(rows)
            vectors = np_rng.standard_normal((per_scope, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            with lib.sessions.begin() as session:
                # The embedding cache is what the exact scoped search (and reindex) read.
                session.add_all(
                    EmbeddingCacheEntry(
                        content_hash=row.content_hash,
                        model_version=model,
                        dimension=384,
                        vector=vector.tobytes(),
                    )
                    for row, vector in zip(rows, vectors, strict=True)
                )
            meta = VectorMetadata(
                sdk_name=sdk,
                sdk_version=version,
                document_type="sdk_reference",
                fetched_at=now,
                access_grants=("public",),
            )
            index.upsert([VectorRecord(next_id + i, vectors[i], meta) for i in range(per_scope)])
            next_id += per_scope
    return time.perf_counter() - started


def wait_until_idle(limit_seconds: float = 900.0) -> float:
    """Wait until this process stops using CPU; returns the seconds waited.

    Embedded Chroma builds its HNSW index in background threads after a bulk write; searching while
    it does measures that build, not search. Users see the settled figure once an ingest is done.
    """
    import psutil

    process = psutil.Process()
    started = time.perf_counter()
    process.cpu_percent(None)
    while time.perf_counter() - started < limit_seconds:
        if process.cpu_percent(interval=2.0) < 15.0:
            break
    return time.perf_counter() - started


def remember(lib: Librarian, verdicts: int, seed: int = 5) -> None:
    """Record ``verdicts`` helpful verdicts of the local organisation, each with a query it answered."""
    rng = random.Random(seed)
    with lib.sessions.begin() as session:
        documents = list(session.scalars(select(Document.id)))
        session.add_all(
            KnowledgeFeedback(
                document_id=rng.choice(documents),
                document_version_no=1,
                organization_id=lib.default_principal.organization_id,
                user_id=0,
                feedback_type="helpful",
                search_query=" ".join(rng.choice(QUERY_WORDS) for _ in range(5)) + f" {number}",
                was_used=True,
                details={},
            )
            for number in range(verdicts)
        )


def measure(lib: Librarian, queries: int, seed: int = 11) -> dict[str, float]:
    """Time ``queries`` searches; query texts are unique per (seed, number), so no cache helps."""
    rng = random.Random(seed)
    latencies = []
    lib.search("warm up the model", sdk_name="sdk0", sdk_version="1.0")
    for number in range(queries):
        verb, noun, extra = (rng.choice(QUERY_WORDS) for _ in range(3))
        query = f"how do I {verb} a {noun} with {extra} {seed}-{number}"
        sdk, version = rng.choice(SDKS), rng.choice(VERSIONS)
        started = time.perf_counter()
        results = lib.search(query, sdk_name=sdk, sdk_version=version, top_k=10)
        latencies.append((time.perf_counter() - started) * 1000)
        assert results and all(r.sdk_name == sdk and r.sdk_version == version for r in results)
    latencies.sort()
    return {
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "mean_ms": round(statistics.fmean(latencies), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, action="append", help="store sizes (repeatable)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temporary folder")
    parser.add_argument("--vector-url", default=None, help="default: embedded Chroma in a temporary folder")
    parser.add_argument(
        "--exact-max",
        type=int,
        action="append",
        help="exact_search_max_chunks values to compare (0 = ANN only)",
    )
    parser.add_argument("--remembered", type=int, default=0, help="helpful verdicts with queries to record")
    parser.add_argument(
        "--compare-learning", action="store_true", help="time learning from use off and on, side by side"
    )
    args = parser.parse_args()
    learned_weights = [0.0, Settings().search_learned_weight] if args.compare_learning else [None]
    for size in args.chunks or [10_000, 100_000]:
        with tempfile.TemporaryDirectory(prefix="librarian-bench-") as home:
            settings = Settings(home=Path(home), database_url=args.database_url, vector_url=args.vector_url)
            with Librarian(settings) as lib:
                build_seconds = build(lib, size)
                remember(lib, args.remembered)
                settle_seconds = wait_until_idle()
            configurations = [
                (exact_max, weight)
                for exact_max in args.exact_max or [settings.exact_search_max_chunks]
                for weight in learned_weights
            ]
            for run, (exact_max, weight) in enumerate(configurations):
                # A fresh facade per configuration: the retriever is built once per facade.
                update: dict[str, object] = {"exact_search_max_chunks": exact_max}
                if weight is not None:
                    update["search_learned_weight"] = weight
                configured = settings.model_copy(update=update)
                with Librarian(configured) as lib:
                    # A fit of the fusion weight is due once verdicts exist; a search would start it
                    # in the background. Run it first and time it apart, so the searches measure the
                    # steady state (a fit recurs only after a quarter of its sample is new).
                    lib.search("warm up the model", sdk_name="sdk0", sdk_version="1.0")
                    started = time.perf_counter()
                    lib.retriever.fit_fusion_weight(lib.default_principal.organization_id)
                    fit_seconds = time.perf_counter() - started
                    result = {
                        "chunks": size,
                        "exact_search_max_chunks": exact_max,
                        "remembered": args.remembered,
                        "search_learned_weight": configured.search_learned_weight,
                        "database": lib.engine.dialect.name,
                        "vectors": settings.resolved_vector_url.split(":")[0],
                        "build_seconds": round(build_seconds, 1),
                        "settle_seconds": round(settle_seconds, 1),
                        "fit_seconds": round(fit_seconds, 2),
                        # The same query texts for every configuration of a store size.
                        **measure(lib, args.queries, seed=11 + run // len(learned_weights)),
                    }
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
