"""Worker processes on PostgreSQL and RabbitMQ for the reliability tests, and a way to wait on them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from librarian.config import Settings
from librarian.runtime.engine import Runtime
from librarian.runtime.report import WorkflowReport
from librarian.runtime.spec import WorkflowSpec

RABBIT_URL = os.environ.get("LIBRARIAN_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
REPO = Path(__file__).resolve().parents[2]


class Cluster:
    """Worker processes sharing one database, and an exchange and two queues unique to the test.

    The exchange is the test's own too: messages published to the shared ``agent_exchange`` would
    also be routed to the default queues bound to it, and pile up there with nobody consuming them.
    """

    def __init__(self, home: Path, database_url: str, broker_url: str = RABBIT_URL) -> None:
        self.home = home
        self.database_url = database_url
        self.broker_url = broker_url
        suffix = uuid.uuid4().hex[:8]
        self.exchange = f"test_exchange_{suffix}"
        self.queues = (f"test_dispatch_{suffix}", f"test_results_{suffix}")
        self.processes: list[subprocess.Popen[str]] = []
        settings = Settings(home=home, database_url=database_url, broker_url=RABBIT_URL)
        self.runtime = Runtime(settings)  # with a broker URL it only submits and reads

    def start(self, role: str, *flags: str) -> subprocess.Popen[str]:
        command = [
            sys.executable,
            "-m",
            "tests.runtime.reliability_worker",
            role,
            "--home",
            str(self.home),
            "--database-url",
            self.database_url,
            "--broker-url",
            self.broker_url,
            "--exchange",
            self.exchange,
            "--dispatch-queue",
            self.queues[0],
            "--results-queue",
            self.queues[1],
            *flags,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LIBRARIAN_")}
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.processes.append(process)
        return process

    def kill(self, process: subprocess.Popen[str]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def submit(self, spec: WorkflowSpec) -> str:
        return self.runtime.submit(spec)

    def report(self, workflow_id: str) -> WorkflowReport:
        return self.runtime.status(workflow_id)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(10)
        self.runtime.close()
        _delete_topology(self.exchange, self.queues)


def _delete_topology(exchange: str, queues: tuple[str, str]) -> None:
    import pika

    connection = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    try:
        channel = connection.channel()
        for queue in queues:
            channel.queue_delete(queue)
        channel.exchange_delete(exchange)
    finally:
        connection.close()


def wait_for(condition: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def kinds(report: WorkflowReport, task: str | None = None) -> list[str]:
    return [event.kind for event in report.events if task is None or event.task == task]


def assert_applied_once(report: WorkflowReport) -> None:
    for task in report.tasks:
        assert task.status == "success", (task.key, task.outcome)
        applied = [e for e in report.events if e.task == task.key and e.kind == "result_applied"]
        assert len(applied) == task.retries + 1, task.key
    assert report.total_reward == pytest.approx(sum(task.reward or 0.0 for task in report.tasks))
