"""``search_knowledge`` latency at scale, with access control on and off, side by side in one run.

Builds a synthetic multi-tenant store straight through the ORM and the vector index: N chunks in
documents of 5 chunks (text drawn from the AWS CLI's bundled examples, random unit vectors), spread
over 3 organisations with 2 teams each and every visibility (public 20 %, organisation 40 %, teams
20 %, private 20 %). Then it times, alternating query by query (so load drift hits both alike):

* ``acl``: ``lib.knowledge.search`` as a member of one organisation and one team (the grants filter
  inside the lexical and vector queries);
* ``no_acl``: the same search by a principal that sees everything (no filter at all);

and the same pair for the chunk-level ``Librarian.search``. Query texts are unique per call, so the
query-embedding cache never helps either side.

    .venv/bin/python -m bench.knowledge_latency --chunks 100000 --queries 300

With ``--reuse`` a store this benchmark built before in the same database (PostgreSQL) is measured
again instead of building another (about ten minutes at 100,000 chunks on pgvector). With
``--compare-encoders`` both searches with access control are also timed on a second store handle
whose embedder loaded PyTorch first, as ``librarian serve`` does.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sqlalchemy import func, select

from bench.search_latency import QUERY_WORDS, vocabulary, wait_until_idle
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.cache import content_hash
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.index.base import VectorMetadata, VectorRecord
from librarian.index.scope import scope_tokens
from librarian.knowledge.access import Principal, object_grants
from librarian.storage.models import Chunk, Document, EmbeddingCacheEntry, Source

TYPES = ["runbook", "incident_report", "documentation", "wiki", "solution"]
CHUNKS_PER_DOCUMENT = 5
VISIBILITIES = ["public"] * 2 + ["organization"] * 4 + ["teams"] * 2 + ["private"] * 2


# The caller measured with access control: a member of organisation 2 and its team 3.
MEMBER = Principal(organization_id=2, user_id=21, team_ids=frozenset({3}))


def built_before(lib: Librarian) -> int:
    """How many chunks a previous :func:`build` left in ``lib``'s database (0 when none)."""
    with lib.sessions() as session:
        first = session.scalar(select(Source.id).where(Source.source_key == "bench-0"))
        if first is None:
            return 0
        return int(
            session.scalar(
                select(func.count(Chunk.id))
                .join(Document, Document.id == Chunk.document_id)
                .join(Source, Source.id == Document.source_id)
                .where(Source.source_key.like("bench-%"))
            )
            or 0
        )


def build(lib: Librarian, chunks: int, seed: int = 7) -> tuple[float, Principal]:
    """The store; returns the build time and a principal of organisation 2, team 3, user 5."""
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    words = vocabulary()
    started = time.perf_counter()
    index = lib.vectors.active()
    model = lib.cache.embedder.model_version
    now = datetime.now(UTC)
    documents = chunks // CHUNKS_PER_DOCUMENT
    with lib.sessions() as session:
        next_id = (session.scalar(select(func.max(Chunk.id))) or 0) + 1
    batch = 500
    for start in range(0, documents, batch):
        rows: list[Chunk] = []
        records: list[tuple[int, VectorMetadata]] = []
        with lib.sessions.begin() as session:
            source = Source(
                source_key=f"bench-{start}",
                uri=f"bench://knowledge/{start}",
                kind="knowledge",
                tags=[],
                last_errors=[],
                last_stats={},
                options={},
            )
            session.add(source)
            session.flush()
            for number in range(start, min(documents, start + batch)):
                organization = 1 + number % 3
                visibility = rng.choice(VISIBILITIES)
                teams = [2 * organization - 1 + rng.randint(0, 1)] if visibility == "teams" else []
                author = 10 * organization + rng.randint(0, 4)
                grants = object_grants(organization, visibility, teams, author)
                kind = rng.choice(TYPES)
                document = Document(
                    source_id=source.id,
                    path=f"{number}",
                    source_url=f"/knowledge/{number}",
                    current_version_no=1,
                    title=" ".join(rng.choice(words) for _ in range(5)),
                    organization_id=organization,
                    created_by=author,
                    visibility=visibility,
                    allowed_teams=teams,
                    access_grants=grants,
                    document_type=kind,
                    source_type="manual",
                    tags=[],
                    attributes={},
                )
                session.add(document)
                session.flush()
                scope = scope_tokens(None, None, kind, None, (), grants)
                for ordinal in range(CHUNKS_PER_DOCUMENT):
                    text = " ".join(rng.choice(words) for _ in range(60))
                    entity = f"{rng.choice(words)} {rng.choice(words)}"
                    rows.append(
                        Chunk(
                            id=next_id,
                            document_id=document.id,
                            document_version_no=1,
                            ordinal=ordinal,
                            entity_name=entity,
                            entity_type="section",
                            section_path=entity,
                            source_url=document.source_url,
                            content=text,
                            content_hash=content_hash(text),
                            last_fetched_at=now,
                            embedding_model_version=model,
                            document_type=kind,
                            tags=[],
                            attributes={},
                            search_title=entity,
                            search_scope=scope,
                            access_grants=grants,
                        )
                    )
                    records.append(
                        (
                            next_id,
                            VectorMetadata(document_type=kind, fetched_at=now, access_grants=tuple(grants)),
                        )
                    )
                    next_id += 1
            session.add_all(rows)
        vectors = np_rng.standard_normal((len(rows), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with lib.sessions.begin() as session:
            session.add_all(
                EmbeddingCacheEntry(
                    content_hash=row.content_hash, model_version=model, dimension=384, vector=v.tobytes()
                )
                for row, v in zip(rows, vectors, strict=True)
            )
        index.upsert([VectorRecord(chunk_id, vectors[i], meta) for i, (chunk_id, meta) in enumerate(records)])
    return time.perf_counter() - started, MEMBER


def timed(
    calls: list[tuple[str, Callable[[str], object]]], queries: int, seed: int
) -> dict[str, dict[str, float]]:
    """Run each call once per query, in alternating order, with its own unique query text."""
    rng = random.Random(seed)
    latencies: dict[str, list[float]] = {name: [] for name, _ in calls}
    for number in range(queries):
        order = calls if number % 2 == 0 else list(reversed(calls))
        for name, call in order:
            verb, noun, extra = (rng.choice(QUERY_WORDS) for _ in range(3))
            query = f"how do I {verb} the {noun} when {extra} fails {seed}-{number}-{name}"
            started = time.perf_counter()
            call(query)
            latencies[name].append((time.perf_counter() - started) * 1000)
    result = {}
    for name, values in latencies.items():
        values.sort()
        result[name] = {
            "p50_ms": round(statistics.median(values), 2),
            "p95_ms": round(values[int(0.95 * (len(values) - 1))], 2),
            "mean_ms": round(statistics.fmean(values), 2),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temporary folder")
    parser.add_argument("--vector-url", default=None, help="default: embedded Chroma in a temporary folder")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure the store an earlier run built in --database-url (and --vector-url) again",
    )
    parser.add_argument(
        "--compare-encoders",
        action="store_true",
        help="also time both searches with access control on a store handle whose embedder loaded "
        "PyTorch first, as `librarian serve` does (the other calls embed queries with NumPy)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="librarian-bench-") as home:
        settings = Settings(home=Path(home), database_url=args.database_url, vector_url=args.vector_url)
        with Librarian(settings) as lib:
            found = built_before(lib) if args.reuse else 0
            if args.reuse and found != args.chunks:
                parser.error(f"--reuse: the database holds {found} benchmark chunks, not {args.chunks}")
            build_seconds, member = (0.0, MEMBER) if args.reuse else build(lib, args.chunks)
            settle_seconds = wait_until_idle()
        with Librarian(settings) as lib, Librarian(settings) as warmed:
            everyone = Principal(organization_id=2, user_id=21, team_ids=frozenset({3}), sees_everything=True)
            lib.knowledge.search("warm up the model", principal=member)
            lib.knowledge.search("warm up the model again", principal=everyone)
            on_pytorch: list[tuple[str, Callable[[str], object]]] = []
            if args.compare_encoders:
                assert isinstance(warmed.cache.embedder, LocalMiniLMEmbedder)
                warmed.cache.embedder.warm_up_in_background().join()
                warmed.knowledge.search("warm up the model", principal=member)
                on_pytorch = [
                    (
                        "search_knowledge_acl_pytorch",
                        lambda q: warmed.knowledge.search(q, limit=10, principal=member),
                    ),
                    ("chunk_search_acl_pytorch", lambda q: warmed.search(q, top_k=10, principal=member)),
                ]
            results = timed(
                [
                    *on_pytorch,
                    ("search_knowledge_acl", lambda q: lib.knowledge.search(q, limit=10, principal=member)),
                    (
                        "search_knowledge_no_acl",
                        lambda q: lib.knowledge.search(q, limit=10, principal=everyone),
                    ),
                    ("chunk_search_acl", lambda q: lib.search(q, top_k=10, principal=member)),
                    ("chunk_search_no_acl", lambda q: lib.search(q, top_k=10, principal=everyone)),
                ],
                args.queries,
                seed=11,
            )
            visible = len(lib.knowledge.search("create a bucket policy", limit=10, principal=member))
        print(
            json.dumps(
                {
                    "chunks": args.chunks,
                    "database": lib.engine.dialect.name,
                    "vectors": settings.resolved_vector_url.split(":")[0],
                    "build_seconds": round(build_seconds, 1),
                    "settle_seconds": round(settle_seconds, 1),
                    "results_for_member": visible,
                    **results,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
