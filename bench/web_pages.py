"""Web UI render time at scale, and how soon the live workflow view shows a task's new status.

Builds a store of N chunks (bench/search_latency.py's synthetic corpus, random unit vectors) and W
finished workflows of three tasks each, plus the registries the other pages show (``--incidents``
incidents, ``--tools`` tools, ``--runbooks`` runbooks, ``--fixes`` verified fixes), then times every
page server-side through the ASGI app
(Starlette's test client: no network, the whole request including authentication and templates),
each with a different query where the page takes one.

The live figure: a workflow of chained one-second tasks is followed through ``/ui/workflows/{id}/follow``
(what ui.js listens to); for each task's status change, the delay from the change's event time in
the store to the stream's ``change`` message reaching the client.

    .venv/bin/python -m bench.web_pages --chunks 100000 --workflows 10000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from bench.search_latency import QUERY_WORDS, SDKS, VERSIONS, build, wait_until_idle
from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.correction.models import VerifiedFix
from librarian.incidents.service import IncidentDraft
from librarian.research.service import research_api_usage
from librarian.runbooks.catalog import RunbookInput
from librarian.runtime import store
from librarian.runtime.contracts import TaskStatus, WorkflowStatus
from librarian.runtime.models import Task, Workflow
from librarian.runtime.spec import WorkflowBuilder
from librarian.storage.models import as_utc

WORKFLOW_STATUSES = (WorkflowStatus.SUCCESS, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED)


def add_workflows(lib: Librarian, count: int, seed: int = 5) -> list[str]:
    """``count`` finished workflows of three tasks each, in batches of 500 per transaction."""
    rng = random.Random(seed)
    spec = (
        WorkflowBuilder("bench", goal="three tasks")
        .task("a", "command_executor", {"argv": ["true"]})
        .task("b", "command_executor", {"argv": ["true"]}, depends_on=["a"])
        .task("c", "command_executor", {"argv": ["true"]}, depends_on=["b"])
        .build()
    )
    ids: list[str] = []
    for start in range(0, count, 500):
        with lib.sessions.begin() as session:
            for _ in range(min(500, count - start)):
                workflow = store.create_workflow(session, spec, actor="bench")
                final = rng.choice(WORKFLOW_STATUSES)
                workflow.final_status = final.value
                workflow.finished_at = workflow.creation_timestamp
                for task in session.query(Task).filter(Task.workflow_id == workflow.workflow_id):
                    task.status = TaskStatus.SUCCESS.value
                    task.reward = 1.0
                    task.feedback_notes = {"status": "success", "notes": "`true` exited with code 0"}
                ids.append(str(workflow.workflow_id))
    return ids


RUNBOOK = """
name: {name}
description: Restart the {service} worker when its queue stalls
tags: [queue]
trigger_patterns:
  symptoms: [{service} queue stalled]
variables:
  worker: {service}
steps:
  - step: 1
    title: Look at the queue
    action_type: bash
    command: echo queue of {{{{worker}}}} is stalled
  - step: 2
    title: Restart the worker
    action_type: bash
    command: echo restarting {{{{worker}}}}
    final_step: true
"""
SERVICES = ["checkout", "billing", "search", "auth", "orders", "payments", "inventory", "mail", "gateway"]


def add_registries(
    lib: Librarian, incidents: int, tools: int, runbooks: int, fixes: int, seed: int = 7
) -> None:
    """What the incidents, tools, runbooks and fixes pages list: real objects through the services
    (embedded as users' would be), and verified fixes written as the loop writes them."""
    rng = random.Random(seed)
    operator = lib.default_principal
    for number in range(incidents):
        service = rng.choice(SERVICES)
        lib.incidents.create(
            operator,
            IncidentDraft(
                title=f"{service} {rng.choice(QUERY_WORDS)} failure #{number}",
                description=f"{service} failed: {' '.join(rng.sample(QUERY_WORDS, 8))}",
                severity=rng.choice(["low", "medium", "high", "critical"]),
            ),
        )
    for number in range(tools):
        lib.discovery.register_tool(
            {
                "name": f"tool-{number}",
                "type": "openapi",
                "description": f"{' '.join(rng.sample(QUERY_WORDS, 6))} for {rng.choice(SERVICES)}",
                "binding": {"url": "https://api.example.org/op", "method": "GET"},
            },
            principal=operator,
        )
    for number in range(runbooks):
        text = RUNBOOK.format(name=f"Restart a stalled worker {number}", service=rng.choice(SERVICES))
        lib.runbooks.add(operator, RunbookInput(text=text))
    with lib.sessions.begin() as session:
        for number in range(fixes):
            session.add(
                VerifiedFix(
                    signature=f"{number:064x}",
                    tool=rng.choice(["git", "pip", "aws", "ruff", "npm"]),
                    tool_version="1.0",
                    normalized_error=f"error: unknown option --{rng.choice(QUERY_WORDS)}",
                    intent="bench",
                    template_key="bench",
                    failed_template=["tool", "--old"],
                    fixed_template=["tool", "--new"],
                    strategy="synopsis_rewrite",
                    successes=rng.randint(1, 9),
                    failures=rng.randint(0, 3),
                )
            )


def timed(client: TestClient, paths: list[str]) -> dict[str, float]:
    """p50 / p95 / max milliseconds of GETting each path once (after one warm-up request)."""
    client.get(paths[0])
    samples = []
    for path in paths:
        started = time.perf_counter()
        answer = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200:
            raise SystemExit(f"{path}: HTTP {answer.status_code}: {answer.text[:300]}")
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
        "max_ms": round(samples[-1], 2),
        "requests": len(samples),
    }


def page_paths(workflow_ids: list[str], requests: int, seed: int = 13) -> dict[str, list[str]]:
    rng = random.Random(seed)

    def query() -> str:
        return " ".join(rng.sample(QUERY_WORDS, 3))

    return {
        "search (docs + knowledge)": [f"/ui/search?q={query()}" for _ in range(requests)],
        "search, sdk + version": [
            f"/ui/search?q={query()}&sdk={rng.choice(SDKS)}&version={rng.choice(VERSIONS)}"
            for _ in range(requests)
        ],
        "research": [f"/ui/research?sdk={rng.choice(SDKS)}&q={query()}" for _ in range(requests)],
        "workflows list": ["/ui/workflows"] * requests,
        "workflows list, by status": [
            f"/ui/workflows?status={rng.choice(WORKFLOW_STATUSES).value}" for _ in range(requests)
        ],
        "one workflow": [f"/ui/workflows/{rng.choice(workflow_ids)}" for _ in range(requests)],
        "sources": ["/ui/sources"] * requests,
        "page": ["/ui/page?url=bench://synthetic&version=1.0"] * requests,
        "runbooks": ["/ui/runbooks"] * requests,
        "runbooks matching a problem": [f"/ui/runbooks?q={query()}" for _ in range(requests)],
        "incidents": ["/ui/incidents"] * requests,
        "incidents similar to a problem": [f"/ui/incidents?q={query()}" for _ in range(requests)],
        "tools": ["/ui/tools"] * requests,
        "tools for a task": [f"/ui/tools?q={query()}" for _ in range(requests)],
        "fixes": ["/ui/fixes"] * requests,
    }


def service_times(lib: Librarian, requests: int, seed: int = 13) -> dict[str, dict[str, float]]:
    """The same retrievals called on the facade directly: what a page adds is the difference."""
    rng = random.Random(seed)
    queries = [" ".join(rng.sample(QUERY_WORDS, 3)) for _ in range(requests)]
    calls: dict[str, Callable[[str], object]] = {
        "lib.search (no filter)": lambda q: lib.search(q, top_k=10),
        "lib.knowledge.search": lambda q: lib.knowledge.search(q, limit=10),
        "research_api_usage": lambda q: research_api_usage(lib, rng.choice(SDKS), q),
    }
    found = {}
    for name, call in calls.items():
        samples = []
        for query in queries:
            started = time.perf_counter()
            call(query)
            samples.append((time.perf_counter() - started) * 1000)
        samples.sort()
        found[name] = {
            "p50_ms": round(statistics.median(samples), 2),
            "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
        }
    return found


def live_delays(client: TestClient, lib: Librarian, tasks: int) -> dict[str, float]:
    """Delay from each status change in the store to its ``change`` message on the follow stream."""
    builder = WorkflowBuilder("live", goal="chained sleeps")
    previous: list[str] = []
    for number in range(tasks):
        builder.task(f"t{number}", "command_executor", {"argv": ["sleep", "1"]}, depends_on=previous)
        previous = [f"t{number}"]
    workflow_id = lib.workflows.submit(lib.default_principal, builder.build().to_dict())["workflow_id"]
    arrivals: list[tuple[int, float]] = []

    def listen() -> None:
        with client.stream("GET", f"/ui/workflows/{workflow_id}/follow") as stream:
            for line in stream.iter_lines():
                if line.startswith("id: "):
                    arrivals.append((int(line[4:]), time.time()))

    listener = threading.Thread(target=listen)
    listener.start()
    listener.join(timeout=tasks * 5 + 60)
    with lib.sessions() as session:
        events = {
            event.id: as_utc(event.at).timestamp() for event in store.events(session, _uuid(workflow_id))
        }
    # A change message names the newest event of its batch; every event up to it arrived with it.
    delays = []
    seen = 0
    for last_id, arrived in arrivals:
        for event_id in sorted(e for e in events if seen < e <= last_id):
            delays.append((arrived - events[event_id]) * 1000)
        seen = last_id
    delays.sort()
    return {
        "events": len(delays),
        "p50_ms": round(statistics.median(delays), 1),
        "p95_ms": round(delays[int(0.95 * (len(delays) - 1))], 1),
        "max_ms": round(delays[-1], 1),
    }


def _uuid(text: str) -> Any:
    import uuid

    return uuid.UUID(text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--workflows", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=60, help="requests per page")
    parser.add_argument("--live-tasks", type=int, default=8)
    parser.add_argument("--incidents", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=300)
    parser.add_argument("--runbooks", type=int, default=30)
    parser.add_argument("--fixes", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="librarian-bench-web-") as home:
        settings = Settings(home=Path(home))
        with Librarian(settings) as lib:
            started = time.perf_counter()
            build(lib, args.chunks)
            workflow_ids = add_workflows(lib, args.workflows)
            add_registries(lib, args.incidents, args.tools, args.runbooks, args.fixes)
            built = time.perf_counter() - started
            settled = wait_until_idle()
        with Librarian(settings) as lib:
            lib.warm_up()
            with lib.sessions() as session:
                stored = session.query(Workflow).count()
            with TestClient(create_app(lib)) as client:
                result: dict[str, Any] = {
                    "chunks": args.chunks,
                    "workflows": stored,
                    "incidents": args.incidents,
                    "tools": args.tools,
                    "runbooks": args.runbooks,
                    "fixes": args.fixes,
                    "build_seconds": round(built, 1),
                    "settle_seconds": round(settled, 1),
                    "measured_at": datetime.now().astimezone().isoformat(timespec="seconds"),
                    "pages": {
                        name: timed(client, paths)
                        for name, paths in page_paths(workflow_ids, args.requests).items()
                    },
                    "services": service_times(lib, args.requests, seed=17),
                    "live": live_delays(client, lib, args.live_tasks),
                }
    print(json.dumps(result, indent=2), flush=True)


if __name__ == "__main__":
    main()
