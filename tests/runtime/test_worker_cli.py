"""``librarian worker`` as a real process on PostgreSQL and RabbitMQ: it runs workflows, stops on SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from librarian.config import Settings
from librarian.runtime.engine import Runtime
from librarian.runtime.sandbox import FORKSERVER_AVAILABLE
from librarian.runtime.spec import WorkflowBuilder
from tests.runtime.cluster import RABBIT_URL
from tests.skipping import unavailable

LIBRARIAN = [sys.executable, "-m", "librarian.cli.main"]


@pytest.fixture
def rabbitmq() -> str:
    """The machine's RabbitMQ, with the default queues (the ones ``librarian worker`` uses) emptied.

    Whatever another run left there would otherwise be worked through before this test's tasks.
    """
    try:
        import pika

        connection = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    except Exception as exc:  # any failure to connect means the service is missing here
        unavailable(f"RabbitMQ at {RABBIT_URL} unreachable: {exc!r}")
    try:
        channel = connection.channel()
        for queue in ("task_dispatch_queue", "task_results_queue"):
            channel.queue_declare(queue, durable=True)
            channel.queue_purge(queue)
    finally:
        connection.close()
    return RABBIT_URL


def wait_for_line(text: str, log: Path, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None, f"the worker exited early:\n{log.read_text(errors='replace')}"
        assert time.monotonic() < deadline, f"{text!r} not printed within {seconds} s"
        time.sleep(0.1)  # polling interval of a deadline-bounded wait


@pytest.mark.parametrize(
    ("options", "holding"),
    [([], ""), (["--prefetch", "4"], "; each executor holds up to 4 tasks")],
    ids=["one-task-at-a-time", "prefetch-4"],
)
def test_a_worker_process_runs_submitted_workflows_and_stops_on_sigterm(
    tmp_path: Path, postgres_url: str, rabbitmq: str, options: list[str], holding: str
) -> None:
    home = tmp_path / "home"
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("LIBRARIAN_")},
        "LIBRARIAN_HOME": str(home),
        "LIBRARIAN_DATABASE_URL": postgres_url,
        "LIBRARIAN_BROKER_URL": rabbitmq,
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
    }
    log = tmp_path / "worker.log"
    spec = (
        WorkflowBuilder("via-cli-worker", goal="two steps through a worker process")
        .task("write", "file_writer", {"path": "note.txt", "content": "hello"})
        .task(
            "read",
            "command_executor",
            {"argv": ["cat", "note.txt"], "expect": {"stdout_contains": "hello"}},
            depends_on=["write"],
        )
        .build()
    )
    with log.open("wb") as sink:
        worker = subprocess.Popen(
            [*LIBRARIAN, "worker", "--role", "all", "--threads", "2", *options],
            stdout=sink,
            stderr=sink,
            env=env,
        )
        try:
            wait_for_line("worker running (all; tasks start through ", log, worker, 60)
            printed = " ".join(log.read_text().split())  # the console wraps long lines
            named = re.search(r"tasks start through (\w+)", printed)
            assert named is not None and (named[1] == "forkserver" or not FORKSERVER_AVAILABLE)
            launcher = named[1]
            assert f"worker running (all; tasks start through {launcher}{holding}); Ctrl-C to stop" in printed
            with Runtime(Settings(home=home, database_url=postgres_url, broker_url=rabbitmq)) as runtime:
                report = runtime.run(spec, timeout=60)
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=30)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    assert report.status == "success", report.failure_report
    assert (report.task("read").status, report.task("read").reward) == ("success", 1.0)
    assert (home / "workspaces" / report.workflow_id / "note.txt").read_text() == "hello"
    assert code == 0, log.read_text(errors="replace")
