"""Celery running the same no-op command task as ``bench.runtime_overhead``, on the same RabbitMQ.

The Celery side of the throughput comparison (Celery is only in the ``bench`` extra; Librarian itself
never imports it). The task runs ``["true"]`` through ``subprocess.run`` and returns its exit code,
the nearest Celery equivalent of a ``command_executor`` task; results go back over the ``rpc://``
backend so the client knows when every task has finished. The queue is named for this run, so it
never meets the runtime's queues or another run's.

By default Celery runs as it ships (early acknowledgement, prefetch multiplier 4, no publisher
confirms); ``--reliable`` switches to the delivery guarantees the runtime gives (acknowledgement after
the task, prefetch 1, publisher confirms). ``--durable-results DATABASE_URL`` adds what the runtime
also records in its database: Celery's database result backend stores each task's start
(``task_track_started``) and result in PostgreSQL, in a fresh database dropped afterwards, and the
client polls one count of finished tasks (backing off from 20 to 200 ms, as ``Runtime.wait`` does)
instead of waiting on each result. So a stock, a like-for-like delivery and a like-for-like delivery
and storage figure can be reported.

    .venv/bin/python -m bench.celery_noop --tasks 500 --workers 4 --repeat 3 \\
        --broker-url amqp://guest:guest@127.0.0.1:5672//
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import celery
from celery import Celery
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import ProgrammingError

from bench.machine_cpu import busy_seconds, tree_cpu_seconds
from bench.runtime_overhead import fresh_database

REPO = Path(__file__).resolve().parents[1]
_BROKER = os.environ.get("BENCH_CELERY_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
_QUEUE = os.environ.get("BENCH_CELERY_QUEUE", "bench_celery_noop")
_RELIABLE = os.environ.get("BENCH_CELERY_RELIABLE") == "1"
# ``db+postgresql+psycopg://...`` for --durable-results; the reply queue otherwise.
_BACKEND = os.environ.get("BENCH_CELERY_BACKEND", "rpc://")

app = Celery("librarian_bench", broker=_BROKER, backend=_BACKEND)
app.conf.update(
    task_default_queue=_QUEUE,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
if _RELIABLE:
    app.conf.update(
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={"confirm_publish": True},
    )
if _BACKEND.startswith("db+"):
    app.conf.update(task_track_started=True)  # the runtime records each start too (its claim)


def run_true() -> int:
    """Run ``true`` in a subprocess, as the runtime's no-op command task does."""
    return subprocess.run(["true"], capture_output=True, timeout=300, check=False).returncode


# Celery is untyped (it is only in the bench extra), hence Any.
noop: Any = app.task(name="bench.noop")(run_true)


def start_workers(
    workers: int, concurrency: int, env: dict[str, str], log: Path
) -> list[subprocess.Popen[bytes]]:
    """``workers`` Celery worker processes (prefork pool of ``concurrency`` each)."""
    processes = []
    for index in range(workers):
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "bench.celery_noop",
            "worker",
            "-Q",
            env["BENCH_CELERY_QUEUE"],
            "--concurrency",
            str(concurrency),
            "--pool",
            "prefork",
            "--loglevel",
            "WARNING",
            "--hostname",
            f"bench{index}-{uuid.uuid4().hex[:6]}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        with log.open("ab") as sink:
            processes.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=sink))
    return processes


def run_batch(tasks: int, timeout: float, database: Engine | None = None) -> float:
    """Enqueue ``tasks`` no-ops and wait for every result; returns the seconds it took.

    With ``database`` (the result backend's), one count of the finished tasks is polled instead of
    fetching each result, which would cost the client a query per task.
    """
    started = time.perf_counter()
    results = [noop.delay() for _ in range(tasks)]
    if database is None:
        for result in results:
            if result.get(timeout=timeout) != 0:
                raise RuntimeError("a no-op task failed")
        return time.perf_counter() - started
    ids = [result.id for result in results]
    count = text("SELECT status, count(*) FROM celery_taskmeta WHERE task_id = ANY(:ids) GROUP BY status")
    deadline, pause = started + timeout, 0.02
    while True:
        try:
            with database.connect() as connection:
                states: dict[str, int] = dict(connection.execute(count, {"ids": ids}).tuples().all())
        except ProgrammingError:
            states = {}  # the workers have not created the backend's table yet
        if states.get("FAILURE"):
            raise RuntimeError("a no-op task failed")
        if states.get("SUCCESS", 0) == tasks:
            return time.perf_counter() - started
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{states} of {tasks} tasks after {timeout:g}s")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.2)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--concurrency", type=int, default=4, help="pool processes per worker (default 4)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--broker-url", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--reliable", action="store_true", help="late acks, prefetch 1, publisher confirms")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--durable-results",
        metavar="DATABASE_URL",
        help="store starts and results in a fresh PostgreSQL database on this server (implies --reliable)",
    )
    args = parser.parse_args()
    if args.durable_results:
        args.reliable = True
    with contextlib.ExitStack() as stack:
        backend = None
        if args.durable_results:
            backend = stack.enter_context(fresh_database(args.durable_results))
        print(json.dumps(measure(args, backend), indent=2))


def measure(args: argparse.Namespace, backend: str | None) -> dict[str, Any]:
    """Start the workers, time ``args.repeat`` batches, stop them; the figures as a document."""
    queue = f"bench_celery_{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "BENCH_CELERY_BROKER": args.broker_url,
        "BENCH_CELERY_QUEUE": queue,
        "BENCH_CELERY_RELIABLE": "1" if args.reliable else "0",
        "BENCH_CELERY_BACKEND": f"db+{backend}" if backend else "rpc://",
    }
    database = create_engine(backend) if backend else None
    # This process is the client: it must publish to the same queue with the same options.
    app.conf.update(broker_url=args.broker_url, task_default_queue=queue)
    if args.reliable:
        app.conf.update(broker_transport_options={"confirm_publish": True})
    if backend:
        app.conf.update(result_backend=f"db+{backend}", task_track_started=True)
    log = Path(f"/tmp/{queue}.log")
    processes = start_workers(args.workers, args.concurrency, env, log)
    load_before = os.getloadavg()
    try:
        run_batch(20, 120, database)  # warm-up: the workers are up and connected once these come back
        rates, cpu, machine = [], [], []
        roots = [process.pid for process in processes]
        for _ in range(args.repeat):
            before, machine_before = tree_cpu_seconds(roots), busy_seconds()
            rates.append(args.tasks / run_batch(args.tasks, args.timeout, database))
            cpu.append((tree_cpu_seconds(roots) - before) / args.tasks * 1000)
            machine.append((busy_seconds() - machine_before) / args.tasks * 1000)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        with app.connection_for_write() as connection:
            connection.default_channel.queue_delete(queue)
        if database is not None:
            database.dispose()
    document: dict[str, Any] = {
        "system": "celery",
        "celery_version": celery.__version__,
        "tasks": args.tasks,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "reliable": args.reliable,
        "durable_results": bool(backend),
        "repeat": args.repeat,
        "tasks_per_second": round(statistics.median(rates), 1),
        "runs": [round(rate, 1) for rate in rates],
        "worker_cpu_ms_per_task": round(statistics.median(cpu), 2),
        # Every process on the machine, RabbitMQ and this client included.
        "machine_cpu_ms_per_task": round(statistics.median(machine), 2),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load_before": [round(value, 2) for value in load_before],
        "load_after": [round(value, 2) for value in os.getloadavg()],
    }
    return document


if __name__ == "__main__":
    main()
