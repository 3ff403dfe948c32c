"""``find_similar_incidents`` latency at scale (goal: p50 <= 30 ms at 50,000 incidents).

Builds N incidents straight through the ORM: problem signatures from the failure families of
``bench/data/incidents_eval.yaml`` spread over 300 services with fresh identifiers, random unit
problem vectors in the embedding cache, three organisations and every visibility. Then times
``lib.incidents.find_similar`` for a member of one organisation, one query at a time, query
embedding included; query texts are unique, so the query-embedding cache never helps. The first
call loads the incident matrix from the store; it is reported apart (``load_seconds``).

    .venv/bin/python -m bench.incident_latency --incidents 50000 --queries 300

``--reuse`` measures the incidents an earlier run left in ``--database-url`` again; with
``--compare-encoders`` each query is also timed on a second store handle whose embedder loaded
PyTorch first, as ``librarian serve`` does, alternating with the NumPy-embedded one query by query.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, select

from bench.incident_quality import DATA, _fill
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.cache import content_hash
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.incidents.models import Incident
from librarian.incidents.signature import ProblemSignature
from librarian.knowledge.access import Principal, object_grants
from librarian.safe_yaml import load_yaml
from librarian.storage.models import EmbeddingCacheEntry

VISIBILITIES = ["organization"] * 6 + ["private"] * 2 + ["public"] * 2


def build(lib: Librarian, incidents: int, seed: int = 7) -> float:
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    kinds = load_yaml(DATA.read_text(encoding="utf-8"), str(DATA))["families"]["kinds"]
    services = [f"service{number}" for number in range(300)]
    model = lib.cache.embedder.model_version
    started = time.perf_counter()
    batch = 2000
    for start in range(0, incidents, batch):
        rows, cache = [], []
        count = min(batch, incidents - start)
        vectors = np_rng.standard_normal((count, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for offset in range(count):
            kind, service = rng.choice(kinds), rng.choice(services)
            organization = 1 + (start + offset) % 3
            visibility = rng.choice(VISIBILITIES)
            author = 10 * organization + rng.randint(0, 4)
            signature = ProblemSignature(
                symptoms=tuple(kind["symptoms"]),
                error_messages=(_fill(kind["error"], service, rng),),
                affected_services=(service,),
            )
            title = kind["title"].replace("{service}", service)
            text = signature.text(title=title, description=f"{title} {start + offset}")
            rows.append(
                Incident(
                    organization_id=organization,
                    created_by=author,
                    visibility=visibility,
                    allowed_teams=[],
                    access_grants=object_grants(organization, visibility, (), author),
                    title=title,
                    description=f"{title} {start + offset}",
                    problem_signature=signature.to_dict(),
                    normalized=signature.normalized(),
                    problem_hash=content_hash(text),
                    resolution_steps=[],
                    tags=[],
                    related_incidents=[],
                    was_successful=rng.random() < 0.8,
                    recurred=rng.random() < 0.1,
                    origin={},
                )
            )
            cache.append(
                EmbeddingCacheEntry(
                    content_hash=content_hash(text),
                    model_version=model,
                    dimension=384,
                    vector=vectors[offset].tobytes(),
                )
            )
        with lib.sessions.begin() as session:
            session.add_all(rows)
            session.add_all(cache)
    return time.perf_counter() - started


def queries(kinds: list[dict[str, Any]], count: int) -> list[tuple[str, ProblemSignature]]:
    """``count`` unique questions: a description, one symptom, an error with fresh identifiers and
    (every other query) a service."""
    rng = random.Random(11)
    made = []
    for number in range(count):
        kind, service = rng.choice(kinds), f"service{rng.randrange(300)}"
        signature = ProblemSignature(
            symptoms=tuple(kind["symptoms"][:1]),
            error_messages=(_fill(kind["error"], service, rng),),
            affected_services=(service,) if number % 2 else (),
        )
        made.append((f"{rng.choice(kind['descriptions'])} ({number})", signature))
    return made


def summary(latencies: list[float]) -> dict[str, float]:
    latencies = sorted(latencies)
    return {
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "mean_ms": round(statistics.fmean(latencies), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--incidents", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temporary folder")
    parser.add_argument(
        "--reuse", action="store_true", help="measure the incidents already in --database-url again"
    )
    parser.add_argument(
        "--compare-encoders",
        action="store_true",
        help="time each query twice, alternating: queries embedded by NumPy, and by PyTorch warmed up "
        "as `librarian serve` does",
    )
    args = parser.parse_args()
    kinds = load_yaml(DATA.read_text(encoding="utf-8"), str(DATA))["families"]["kinds"]
    with tempfile.TemporaryDirectory(prefix="librarian-bench-") as home:
        settings = Settings(home=Path(home), database_url=args.database_url)
        with Librarian(settings) as lib:
            with lib.sessions() as session:
                stored = int(session.scalar(select(func.count()).select_from(Incident)) or 0)
            if args.reuse and stored != args.incidents:
                parser.error(f"--reuse: the database holds {stored} incidents, not {args.incidents}")
            if not args.reuse and stored:
                parser.error(f"the database already holds {stored} incidents: use --reuse or a fresh one")
            build_seconds = 0.0 if args.reuse else build(lib, args.incidents)
        with Librarian(settings) as lib, Librarian(settings) as warmed:
            member = Principal(organization_id=2, user_id=21)
            lib.cache.embed_query("warm up the model")
            started = time.perf_counter()
            lib.incidents.find_similar(member, "warm up the matrix")
            load_seconds = time.perf_counter() - started
            variants = {"numpy_queries": lib}
            if args.compare_encoders:
                assert isinstance(warmed.cache.embedder, LocalMiniLMEmbedder)
                warmed.cache.embedder.warm_up_in_background().join()
                warmed.incidents.find_similar(member, "warm up the matrix")
                variants["pytorch_queries"] = warmed
            latencies: dict[str, list[float]] = {name: [] for name in variants}
            returned = []
            for number, (description, signature) in enumerate(queries(kinds, args.queries)):
                order = list(variants.items()) if number % 2 == 0 else list(reversed(variants.items()))
                for name, each in order:
                    started = time.perf_counter()
                    found = each.incidents.find_similar(
                        member, f"{description} {name}", signature=signature, limit=5
                    )
                    latencies[name].append((time.perf_counter() - started) * 1000)
                    returned.append(len(found))
            figures = {name: summary(values) for name, values in latencies.items()}
            print(
                json.dumps(
                    {
                        "incidents": args.incidents,
                        "database": lib.engine.dialect.name,
                        "build_seconds": round(build_seconds, 1),
                        "load_seconds": round(load_seconds, 2),
                        **figures["numpy_queries"],
                        **({"by_encoder": figures} if args.compare_encoders else {}),
                        "mean_results": round(statistics.fmean(returned), 2),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
