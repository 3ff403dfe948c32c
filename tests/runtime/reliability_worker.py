"""A runtime worker process for the reliability tests (``python -m tests.runtime.reliability_worker``).

It is a real ``librarian worker`` role on PostgreSQL and RabbitMQ, with per-test queue names and two
fault-injection switches: ``--slow-corrector SECONDS`` (the orchestrator's corrector sleeps, so a kill
lands in the middle of a correction) and ``--pause-after-apply SECONDS`` (the evaluator stops after
committing a result and before acknowledging it, so a kill lands in that window); ``--prefetch N``
runs an executor that holds N dispatch messages and runs them as a batch.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from pathlib import Path
from typing import Any

from librarian.config import Settings
from librarian.runtime.broker.rabbitmq import RabbitMQBroker
from librarian.runtime.correctors import CorrectorRegistry, ScriptedCorrector
from librarian.runtime.orchestrator import worker_name
from librarian.runtime.worker import Services, WorkerGroup, evaluator_handler
from librarian.storage.database import open_database

FIX_PLAN: dict[str, Any] = {
    "steps": [
        {
            "description": "write the missing input",
            "executor_type": "file_writer",
            "payload": {"path": "input.txt", "content": "42"},
            "rationale": "cat failed because input.txt does not exist",
        },
        {
            "description": "read again",
            "executor_type": "command_executor",
            "payload": {"argv": ["cat", "input.txt"]},
            "rationale": "the input exists now",
            "retry_failed_task": True,
        },
    ]
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["executor", "evaluator", "orchestrator"])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--broker-url", required=True)
    parser.add_argument("--exchange", required=True)
    parser.add_argument("--dispatch-queue", required=True)
    parser.add_argument("--results-queue", required=True)
    parser.add_argument("--lease-seconds", type=float, default=1.5)
    parser.add_argument("--slow-corrector", type=float, default=0.0)
    parser.add_argument("--pause-after-apply", type=float, default=0.0)
    parser.add_argument("--prefetch", type=int, default=1, help="executor_prefetch of an executor")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    settings = Settings(
        home=args.home,
        database_url=args.database_url,
        broker_url=args.broker_url,
        runtime_lease_seconds=args.lease_seconds,
        runtime_workers=1,
    )
    _, sessions = open_database(settings.resolved_database_url)
    broker = RabbitMQBroker(
        args.broker_url,
        exchange=args.exchange,
        dispatch_queue=args.dispatch_queue,
        results_queue=args.results_queue,
    )
    correctors = CorrectorRegistry([ScriptedCorrector("scripted", [FIX_PLAN] * 10, args.slow_corrector)])
    services = Services(settings, sessions, broker, correctors)
    if args.role == "evaluator" and args.pause_after_apply:
        apply = evaluator_handler(services, worker_name("evaluator"))

        def apply_then_pause(message: dict[str, Any]) -> None:
            apply(message)
            print("applied", flush=True)
            time.sleep(args.pause_after_apply)  # committed, not yet acknowledged

        broker.consume("results", apply_then_pause, threading.Event())
        return
    group = WorkerGroup(services)
    group.start(args.role, executor_threads=1, executor_prefetch=args.prefetch)
    print("ready", flush=True)
    group.wait()


if __name__ == "__main__":
    main()
