"""Runbook engine overhead and ``get_runbook`` latency (issue 15 goals).

Goals: engine overhead per no-op ``bash`` step <= 10 ms p50 (embedded); a 10-step runbook of no-op
steps finishes in under 0.5 s (embedded); ``get_runbook`` by problem description p50 <= 30 ms with
10,000 runbooks.

``steps``: a runbook of ten ``true`` steps is run ``--runs`` times (the first run, which starts the
embedded runtime and its sandbox helpers, is reported apart). Side by side, in the same process and
alternating, a one-task workflow running ``true`` is submitted to the same runtime and waited for
with the same polling: the step's time minus that is what the runbook engine adds (its step-run
rows, the lease, the values, routing). Both include the bubblewrap sandbox of every task.

``match``: N runbooks are written straight through the ORM (triggers from the failure families of
``bench/data/incidents_eval.yaml`` over 300 services, random unit text vectors in the embedding
cache, three organisations), then ``lib.runbooks.find(problem_description=...)`` is timed for a
member of one organisation, query embedding and the best runbook's full view included; every query
text is unique.

    .venv/bin/python -m bench.runbook_latency steps --runs 30
    .venv/bin/python -m bench.runbook_latency match --runbooks 10000 --queries 300
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.incident_quality import DATA, _fill
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.cache import content_hash
from librarian.knowledge.access import Principal, object_grants
from librarian.runbooks.catalog import RunbookInput
from librarian.runbooks.models import RunbookRow
from librarian.runbooks.steps import RuntimeCommandRunner
from librarian.runtime.spec import WorkflowBuilder
from librarian.safe_yaml import load_yaml
from librarian.storage.models import EmbeddingCacheEntry

TEN_NO_OPS = "name: ten no-ops\nsteps:\n" + "".join(
    f"  - {{step: {n}, title: no-op {n}, action_type: bash, command: 'true'"
    + (", final_step: true}\n" if n == 10 else "}\n")
    for n in range(1, 11)
)


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


def bench_steps(runs: int, database_url: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="librarian-bench-") as home:
        settings = Settings(home=Path(home), database_url=database_url)
        with Librarian(settings) as lib:
            me = lib.default_principal
            runbook_id = lib.runbooks.add(me, RunbookInput(TEN_NO_OPS))["id"]
            started = time.perf_counter()
            lib.runbooks.start(me, runbook_id)
            first_run_ms = (time.perf_counter() - started) * 1000
            runner = lib.runbooks.engine._commands()
            assert isinstance(runner, RuntimeCommandRunner)
            runtime = runner.runtime
            totals, per_step, bare = [], [], []
            for number in range(runs):
                started = time.perf_counter()
                run = lib.runbooks.start(me, runbook_id)
                total = (time.perf_counter() - started) * 1000
                assert run["status"] == "completed", run
                totals.append(total)
                per_step.append(total / 10)
                # The same command as a bare one-task workflow, waited for the same way.
                spec = (
                    WorkflowBuilder(f"bare {number}")
                    .task("step", "command_executor", {"argv": ["true"]})
                    .build()
                )
                for _ in range(3):
                    started = time.perf_counter()
                    workflow_id = runtime.submit(spec)
                    runtime.wait(workflow_id, first_poll=0.001)
                    bare.append((time.perf_counter() - started) * 1000)
            bare_p50 = statistics.median(bare)
            return {
                "benchmark": "steps",
                "database": lib.engine.dialect.name,
                "runs": runs,
                "first_run_ms": round(first_run_ms, 1),
                "ten_step_runbook_ms": _summary(totals),
                "per_step_ms": _summary(per_step),
                "bare_one_task_workflow_ms": _summary(bare),
                "engine_overhead_per_step_ms_p50": round(statistics.median(per_step) - bare_p50, 2),
            }


def build_runbooks(lib: Librarian, count: int, seed: int = 7) -> float:
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    kinds = load_yaml(DATA.read_text(encoding="utf-8"), str(DATA))["families"]["kinds"]
    services = [f"service{number}" for number in range(300)]
    model = lib.cache.embedder.model_version
    started = time.perf_counter()
    batch = 2000
    for start in range(0, count, batch):
        rows, cache = [], []
        size = min(batch, count - start)
        vectors = np_rng.standard_normal((size, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for offset in range(size):
            kind, service = rng.choice(kinds), rng.choice(services)
            organization = 1 + (start + offset) % 3
            name = f"{kind['title'].replace('{service}', service)} #{start + offset}"
            text = f"{name}\n{' '.join(kind['symptoms'])}"
            # The error pattern is the family's error with its identifiers generalised.
            pattern = _fill(kind["error"], service, rng).split(":")[0][:60]
            definition = {
                "name": name,
                "steps": [
                    {"step": 1, "title": "look", "action_type": "bash", "command": "true", "final_step": True}
                ],
            }
            rows.append(
                RunbookRow(
                    organization_id=organization,
                    created_by=10 * organization,
                    visibility="organization",
                    allowed_teams=[],
                    access_grants=object_grants(organization, "organization", (), 10 * organization),
                    name=name,
                    description=kind["title"].replace("{service}", service),
                    category=kind["key"],
                    tags=[],
                    trigger_patterns={
                        "symptoms": list(kind["symptoms"]),
                        "services": [service],
                        "error_patterns": [re.escape(pattern)],
                    },
                    version=1,
                    version_label="1",
                    definition=definition,
                    search_hash=content_hash(text),
                    execution_count=rng.randint(0, 50),
                    effectiveness_score=round(rng.random(), 3),
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


def bench_match(count: int, queries: int, database_url: str | None) -> dict[str, Any]:
    kinds = load_yaml(DATA.read_text(encoding="utf-8"), str(DATA))["families"]["kinds"]
    with tempfile.TemporaryDirectory(prefix="librarian-bench-") as home:
        settings = Settings(home=Path(home), database_url=database_url)
        with Librarian(settings) as lib:
            build_seconds = build_runbooks(lib, count)
        with Librarian(settings) as lib:
            member = Principal(organization_id=2, user_id=21)
            lib.cache.embed_query("warm up the model")
            started = time.perf_counter()
            lib.runbooks.find(member, problem_description="warm up the matrix")
            load_seconds = time.perf_counter() - started
            rng = random.Random(11)
            latencies, found = [], []
            for number in range(queries):
                kind, service = rng.choice(kinds), f"service{rng.randrange(300)}"
                error = _fill(kind["error"], service, rng)
                problem = f"{rng.choice(kind['descriptions'])} on {service}: {error} ({number})"
                started = time.perf_counter()
                answer = lib.runbooks.find(member, problem_description=problem)
                latencies.append((time.perf_counter() - started) * 1000)
                found.append(answer["runbook"] is not None)
            return {
                "benchmark": "match",
                "runbooks": count,
                "database": lib.engine.dialect.name,
                "build_seconds": round(build_seconds, 1),
                "load_seconds": round(load_seconds, 2),
                "latency_ms": _summary(latencies),
                "answered": sum(found),
                "queries": queries,
            }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("which", choices=["steps", "match"])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--runbooks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temporary folder")
    args = parser.parse_args()
    if args.which == "steps":
        result = bench_steps(args.runs, args.database_url)
    else:
        result = bench_match(args.runbooks, args.queries, args.database_url)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
