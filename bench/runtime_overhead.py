"""Per-task overhead and throughput of the task runtime on a no-op command task (``["true"]``).

Two workflow shapes are measured, each repeated and reported as medians over the repeats:

* ``chain``: N tasks, each depending on the one before, so every task waits for the orchestrator to
  notice its predecessor's result. Per task it reports
  ``dispatch_to_recorded`` (the ``dispatched`` event to the ``result_applied`` event: the queue, the
  executor's claim, the sandboxed run, the result message, the evaluator's commit),
  ``recorded_to_dispatch`` (a result applied to its dependent dispatched: the orchestrator's
  reaction), and ``cycle`` (one result applied to the next: the whole per-task cost of a chain);
* ``independent``: N tasks with no dependencies; throughput in tasks per second from the submission
  to the last result applied (and as the client saw it, until ``wait`` returned).

Timestamps come from the runtime's own event log, so they measure the system, not this script. The
sandbox is also timed alone (``EnvironmentManager.run(["true"])``), the floor under every figure.

Modes: ``embedded`` (the in-process queue and worker threads; SQLite unless ``--database-url``) and
``distributed`` (worker processes on PostgreSQL + RabbitMQ: one orchestrator, one evaluator and
``--workers`` executor processes of one thread each, on an exchange and queues named for this run
and deleted after).

    .venv/bin/python -m bench.runtime_overhead --mode embedded --tasks 200
    .venv/bin/python -m bench.runtime_overhead --mode distributed --tasks 200 \\
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/test --fresh-database \\
        --broker-url amqp://guest:guest@127.0.0.1:5672/
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, make_url, select, text

from bench.machine_cpu import busy_seconds, tree_cpu_seconds
from librarian.config import Settings
from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.runtime.engine import Runtime
from librarian.runtime.isolation import NamespaceSandbox
from librarian.runtime.models import TaskEvent, Workflow
from librarian.runtime.sandbox import EnvironmentManager, Launcher
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec

NOOP = {"argv": ["true"]}
REPO = Path(__file__).resolve().parents[1]


# -- workflows -----------------------------------------------------------------------------------


def chain_spec(tasks: int) -> WorkflowSpec:
    """``t0 -> t1 -> ... -> t(N-1)``, every task a no-op command."""
    builder = WorkflowBuilder(f"bench-chain-{tasks}", goal="runtime overhead: a chain of no-ops")
    for index in range(tasks):
        after = [f"t{index - 1}"] if index else []
        builder.task(f"t{index}", "command_executor", dict(NOOP), depends_on=after)
    return builder.build()


def independent_spec(tasks: int) -> WorkflowSpec:
    """N no-op command tasks with no dependencies."""
    builder = WorkflowBuilder(f"bench-independent-{tasks}", goal="runtime throughput: independent no-ops")
    for index in range(tasks):
        builder.task(f"t{index}", "command_executor", dict(NOOP))
    return builder.build()


# -- statistics ----------------------------------------------------------------------------------


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean of ``samples`` (seconds) in milliseconds."""
    ordered = sorted(samples)
    if not ordered:
        return {"p50_ms": float("nan"), "p95_ms": float("nan"), "mean_ms": float("nan")}
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(p95 * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


@dataclass
class Timeline:
    """The event times of one workflow: per task, its last dispatch, start and result."""

    submitted: datetime
    finished: datetime | None
    dispatched: dict[str, datetime] = field(default_factory=dict)
    started: dict[str, datetime] = field(default_factory=dict)
    applied: dict[str, datetime] = field(default_factory=dict)


def timeline(runtime: Runtime, workflow_id: str) -> Timeline:
    """Read the event log of ``workflow_id``."""
    with runtime.sessions() as session:
        workflow = session.get(Workflow, uuid.UUID(workflow_id))
        assert workflow is not None
        rows = session.execute(
            select(TaskEvent.task_id, TaskEvent.kind, TaskEvent.at)
            .where(TaskEvent.workflow_id == workflow.workflow_id)
            .order_by(TaskEvent.id)
        ).all()
        result = Timeline(submitted=workflow.creation_timestamp, finished=workflow.finished_at)
    slots = {"dispatched": result.dispatched, "started": result.started, "result_applied": result.applied}
    for task_id, kind, at in rows:
        if kind in slots and task_id is not None:
            slots[kind][str(task_id)] = at
    return result


def seconds(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def measure_chain(runtime: Runtime, tasks: int, timeout: float) -> dict[str, Any]:
    """Run one chain and derive its per-task figures from the event log."""
    started = time.perf_counter()
    report = runtime.run(chain_spec(tasks), timeout=timeout)
    wall = time.perf_counter() - started
    if report.status != "success":
        raise RuntimeError(f"the chain ended {report.status}: {report.failure_report}")
    ids = [report.task(f"t{index}").task_id for index in range(tasks)]
    times = timeline(runtime, report.workflow_id)
    to_recorded = [seconds(times.applied[i], times.dispatched[i]) for i in ids]
    queue_and_claim = [seconds(times.started[i], times.dispatched[i]) for i in ids]
    reaction = [seconds(times.dispatched[b], times.applied[a]) for a, b in itertools.pairwise(ids)]
    cycle = [seconds(times.applied[b], times.applied[a]) for a, b in itertools.pairwise(ids)]
    return {
        "dispatch_to_recorded": percentiles(to_recorded),
        "dispatch_to_started": percentiles(queue_and_claim),
        "recorded_to_dispatch": percentiles(reaction),
        "cycle": percentiles(cycle),
        "wall_per_task_ms": round(wall / tasks * 1000, 2),
    }


def measure_independent(runtime: Runtime, tasks: int, timeout: float) -> dict[str, Any]:
    """Run N independent tasks; throughput from the event log and as the client saw it."""
    started = time.perf_counter()
    report = runtime.run(independent_spec(tasks), timeout=timeout)
    wall = time.perf_counter() - started
    if report.status != "success":
        raise RuntimeError(f"the independent run ended {report.status}: {report.failure_report}")
    times = timeline(runtime, report.workflow_id)
    span = seconds(max(times.applied.values()), times.submitted)
    to_recorded = [seconds(times.applied[i], times.dispatched[i]) for i in times.applied]
    return {
        "tasks_per_second": round(tasks / span, 1),
        "client_tasks_per_second": round(tasks / wall, 1),
        "dispatch_to_recorded": percentiles(to_recorded),
    }


def measure_sandbox(runs: int = 200) -> dict[str, Any]:
    """``EnvironmentManager.run(["true"])`` alone, after a warm-up, with each available launcher.

    Each launcher is timed without isolation and in namespaces (``<launcher>+namespaces``), in
    alternating rounds of 20 runs so both see the same load.
    """
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as root:
        launchers: tuple[Launcher, ...] = ("forkserver", "prlimit", "python")
        for launcher in launchers:
            try:
                managers = {
                    launcher: EnvironmentManager(Path(root), launcher=launcher),
                    f"{launcher}+namespaces": EnvironmentManager(
                        Path(root), launcher=launcher, isolation=NamespaceSandbox.create(hidden=[Path(root)])
                    ),
                }
            except (InvalidInputError, BackendUnavailableError):  # no prlimit, pidfd or bwrap here
                continue
            samples: dict[str, list[float]] = {name: [] for name in managers}
            for round_index in range(runs // 20 + 1):
                for name, manager in managers.items():
                    workspace = manager.workspace_for("bench")
                    for _ in range(20):
                        began = time.perf_counter()
                        manager.run(["true"], workspace)
                        if round_index:  # the first round warms up
                            samples[name].append(time.perf_counter() - began)
            for name, manager in managers.items():
                manager.shutdown()
                figures[name] = percentiles(samples[name])
    return figures


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Element-wise median of nested figure dicts (one per repeat)."""
    merged: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            merged[key] = median_of([run[key] for run in runs])
        else:
            merged[key] = round(statistics.median(run[key] for run in runs), 2)
    return merged


# -- distributed mode: worker processes ----------------------------------------------------------


@dataclass
class Cluster:
    """Worker processes of one run, on an exchange and queues of their own.

    The exchange is the run's own too: messages published to the shared ``agent_exchange`` would
    also be routed to the default queues bound to it, where they would pile up (and cost RabbitMQ a
    second persistent copy of every message).
    """

    home: Path
    database_url: str
    broker_url: str
    workers: int
    evaluators: int
    executor_threads: int = 1
    executor_prefetch: int = 1
    # "split": an orchestrator, an evaluator and ``workers`` executor processes; "single": one
    # ``librarian worker --role all`` process (the default deployment) with ``executor_threads``.
    layout: str = "split"
    launcher: str = "auto"
    topology: tuple[str, str, str] = field(default_factory=lambda: _topology_names())
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def roles(self) -> list[str]:
        if self.layout == "single":
            return ["all"]
        return ["orchestrator", "evaluator", *["executor"] * self.workers]

    def start(self) -> None:
        roles = self.roles
        log = self.home / "workers.log"
        self.home.mkdir(parents=True, exist_ok=True)
        env = {key: value for key, value in os.environ.items() if not key.startswith("LIBRARIAN_")}
        for role in roles:
            command = [
                sys.executable,
                "-m",
                "bench.runtime_overhead",
                "--worker-role",
                role,
                "--home",
                str(self.home),
                "--database-url",
                self.database_url,
                "--broker-url",
                self.broker_url,
                "--topology",
                *self.topology,
                "--evaluators",
                str(self.evaluators),
                "--executor-threads",
                str(self.executor_threads),
                "--executor-prefetch",
                str(self.executor_prefetch),
                "--launcher",
                self.launcher,
            ]
            with log.open("ab") as sink:
                self.processes.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=sink))

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by the worker processes and their descendants, summed per role.

        Descendants include each executor's fork servers and the task programs they start.
        """
        used: dict[str, float] = {}
        for role, process in zip(self.roles, self.processes, strict=True):
            used[role] = used.get(role, 0.0) + tree_cpu_seconds([process.pid])
        return used

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        with contextlib.suppress(Exception):  # best effort: the queues are uniquely named anyway
            import pika

            connection = pika.BlockingConnection(pika.URLParameters(self.broker_url))
            channel = connection.channel()
            exchange, *queues = self.topology
            for queue in queues:
                channel.queue_delete(queue)
            channel.exchange_delete(exchange)
            connection.close()


def _topology_names() -> tuple[str, str, str]:
    """Names of this run's exchange, dispatch queue and results queue."""
    suffix = uuid.uuid4().hex[:8]
    return (f"bench_exchange_{suffix}", f"bench_dispatch_{suffix}", f"bench_results_{suffix}")


def run_worker(args: argparse.Namespace) -> None:
    """Body of one worker process (``--worker-role``): a real runtime role on the run's queues."""
    from librarian.runtime.broker.rabbitmq import RabbitMQBroker
    from librarian.runtime.correctors import CorrectorRegistry, default_correctors
    from librarian.runtime.worker import Services, WorkerGroup
    from librarian.storage.database import open_database

    settings = Settings(
        home=args.home,
        database_url=args.database_url,
        broker_url=args.broker_url,
        runtime_workers=1,
        runtime_sandbox_launcher=args.launcher,
    )
    engine, sessions = open_database(settings.resolved_database_url)
    exchange, dispatch, results = args.topology
    broker = RabbitMQBroker(
        args.broker_url, exchange=exchange, dispatch_queue=dispatch, results_queue=results
    )
    group = WorkerGroup(Services(settings, sessions, broker, CorrectorRegistry(default_correctors())))
    signal.signal(signal.SIGTERM, lambda *_: group.stop_event.set())
    group.start(
        args.worker_role,
        executor_threads=args.executor_threads,
        evaluator_threads=args.evaluators,
        executor_prefetch=args.executor_prefetch,
    )
    try:
        group.wait()
    finally:
        group.stop()
        broker.close()
        engine.dispose()


def cpu_usage(cluster: Cluster | None) -> dict[str, float]:
    """CPU seconds used so far: per worker role in distributed mode, this process when embedded."""
    if cluster is not None:
        return cluster.cpu_seconds()
    # This process, its fork servers and the task programs they started.
    return {"runtime_process": tree_cpu_seconds([os.getpid()])}


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new PostgreSQL database on the server of ``server_url``, dropped afterwards."""
    name = f"librarian_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# -- main ----------------------------------------------------------------------------------------


def bench(args: argparse.Namespace, database_url: str | None) -> dict[str, Any]:
    """Every measurement of one mode."""
    with tempfile.TemporaryDirectory(prefix="librarian-bench-") as directory:
        home = Path(directory)
        cluster: Cluster | None = None
        if args.mode == "distributed":
            assert database_url is not None
            settings = Settings(home=home, database_url=database_url, broker_url=args.broker_url)
            runtime = Runtime(settings)  # creates the schema before the workers start
            cluster = Cluster(
                home,
                database_url,
                args.broker_url,
                args.workers,
                args.evaluators,
                args.executor_threads,
                args.executor_prefetch,
                args.layout,
                args.launcher,
            )
            cluster.start()
        else:
            settings = Settings(
                home=home,
                database_url=database_url,
                runtime_workers=args.workers,
                runtime_sandbox_launcher=args.launcher,
                runtime_sandbox_isolation=args.isolation,
            )
            runtime = Runtime(settings)
        try:
            measure_independent(runtime, 20, args.timeout)  # warm-up: connections, consumers, caches
            results: dict[str, Any] = {}
            shapes = {"chain": measure_chain, "independent": measure_independent}
            for shape in args.shapes:
                runs = []
                for _ in range(args.repeat):
                    before, machine_before = cpu_usage(cluster), busy_seconds()
                    figures = shapes[shape](runtime, args.tasks, args.timeout)
                    after = cpu_usage(cluster)
                    figures["cpu_ms_per_task"] = {
                        role: round((after[role] - before[role]) / args.tasks * 1000, 2) for role in after
                    }
                    # Every process on the machine: PostgreSQL, RabbitMQ and this client included.
                    figures["machine_cpu_ms_per_task"] = round(
                        (busy_seconds() - machine_before) / args.tasks * 1000, 2
                    )
                    runs.append(figures)
                results[shape] = median_of(runs)
            return results
        finally:
            runtime.close()
            if cluster is not None:
                cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=["embedded", "distributed"], default="embedded")
    parser.add_argument("--tasks", type=int, default=200, help="tasks per workflow (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each shape; medians are reported")
    parser.add_argument("--workers", type=int, default=4, help="executor threads (embedded) or processes")
    parser.add_argument("--shapes", default="chain,independent", help="comma-separated: chain, independent")
    parser.add_argument("--database-url", default=None, help="required in distributed mode")
    parser.add_argument("--broker-url", default=None, help="amqp:// URL; required in distributed mode")
    parser.add_argument("--fresh-database", action="store_true", help="run in a new database, dropped after")
    parser.add_argument("--no-sandbox", action="store_true", help="skip timing the sandbox alone")
    parser.add_argument(
        "--evaluators", type=int, default=1, help="evaluator threads (distributed mode; default 1)"
    )
    parser.add_argument(
        "--launcher",
        choices=["auto", "forkserver", "prlimit", "python"],
        default="auto",
        help="the sandbox launcher of the executors (runtime_sandbox_launcher)",
    )
    parser.add_argument(
        "--isolation",
        choices=["namespaces", "none"],
        default="namespaces",
        help="runtime_sandbox_isolation of the embedded runtime (default namespaces)",
    )
    parser.add_argument(
        "--layout",
        choices=["split", "single"],
        default="split",
        help="split: one process per role and --workers executor processes; single: one process with "
        "every role and --executor-threads executors (distributed mode)",
    )
    parser.add_argument(
        "--executor-threads",
        type=int,
        default=1,
        help="executor threads per executor process (distributed mode; default 1)",
    )
    parser.add_argument(
        "--executor-prefetch",
        type=int,
        default=1,
        help="dispatch messages each executor thread holds, run as a batch with one result message "
        "(runtime_executor_prefetch; distributed mode; default 1)",
    )
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true", help="print one JSON document only")
    # Internal: the body of a worker process started by a distributed run.
    parser.add_argument("--worker-role", help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--topology", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_role:
        run_worker(args)
        return
    args.shapes = [shape.strip() for shape in args.shapes.split(",") if shape.strip()]
    if args.mode == "distributed" and not (args.database_url and args.broker_url):
        parser.error("distributed mode needs --database-url (PostgreSQL) and --broker-url (amqp://)")

    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        database_url = args.database_url
        if database_url and args.fresh_database:
            database_url = stack.enter_context(fresh_database(database_url))
        figures = bench(args, database_url)
    document = {
        "mode": args.mode,
        "tasks": args.tasks,
        "repeat": args.repeat,
        "workers": args.workers,
        "executor_threads": args.executor_threads,
        "executor_prefetch": args.executor_prefetch,
        "layout": args.layout,
        "launcher": args.launcher,
        "isolation": args.isolation,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpus": os.cpu_count(),
        "load_before": [round(value, 2) for value in load_before],
        "load_after": [round(value, 2) for value in os.getloadavg()],
        **figures,
    }
    if not args.no_sandbox:
        document["sandbox_true"] = measure_sandbox()
    if args.json:
        print(json.dumps(document, indent=2))
        return
    print(summary_table(document))


def summary_table(document: dict[str, Any]) -> str:
    """The figures as a Markdown table (milliseconds per task unless named otherwise)."""
    lines = [
        f"{document['mode']}, {document['tasks']} tasks x {document['repeat']} runs (medians), "
        f"{document['workers']} executors, {document['cpus']} CPUs, load {document['load_before']}",
        "",
        "| shape | figure | p50 | p95 |",
        "|---|---|---|---|",
    ]
    for shape in ("chain", "independent"):
        for name, value in document.get(shape, {}).items():
            if isinstance(value, dict) and "p50_ms" in value:
                lines.append(f"| {shape} | {name} ms | {value['p50_ms']} | {value['p95_ms']} |")
            elif isinstance(value, dict):
                cpu = ", ".join(f"{role} {ms}" for role, ms in value.items())
                lines.append(f"| {shape} | {name} | {cpu} | |")
            else:
                lines.append(f"| {shape} | {name} | {value} | |")
    for launcher, value in document.get("sandbox_true", {}).items():
        lines.append(f"| sandbox alone | `true` via {launcher} ms | {value['p50_ms']} | {value['p95_ms']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
