"""Prompt wake-ups across processes on PostgreSQL: LISTEN/NOTIFY after a commit, never after a rollback."""

from __future__ import annotations

import statistics
import threading
import time
from datetime import datetime
from pathlib import Path

from librarian.config import Settings
from librarian.runtime import wakeup
from librarian.runtime.broker.memory import InMemoryBroker
from librarian.runtime.correctors import CorrectorRegistry
from librarian.runtime.engine import Runtime
from librarian.runtime.spec import WorkflowBuilder
from librarian.runtime.worker import Services, WorkerGroup
from librarian.storage.database import open_database
from tests.runtime.cluster import wait_for


def test_a_notification_arrives_after_commit_and_not_after_rollback(postgres_url: str) -> None:
    engine, sessions = open_database(postgres_url)
    calls: list[float] = []
    listener = wakeup.listener_for(postgres_url, lambda: calls.append(time.monotonic()))
    assert listener is not None
    try:
        assert listener.connected.wait(10), "the listener did not connect"
        wait_for(lambda: len(calls) >= 1, what="the call made on connecting")
        with sessions() as session:
            wakeup.notify(session)
            session.rollback()  # a change that never happened must wake no one
        with sessions.begin() as session:
            wakeup.notify(session)
            wakeup.notify(session)  # folded into one by PostgreSQL
        wait_for(lambda: len(calls) >= 2, what="the committed notification")
        # Delivery is in commit order, so a notification of the rolled-back transaction would have
        # come first; one more pass of the loop shows nothing else is queued.
        with sessions.begin() as session:
            wakeup.notify(session)
        wait_for(lambda: len(calls) >= 3, what="the last notification")
        assert len(calls) == 3
    finally:
        listener.stop()
        engine.dispose()


def test_sqlite_has_no_listener_and_notify_does_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runtime.db'}"
    engine, sessions = open_database(url)
    assert wakeup.listener_for(url, lambda: None) is None
    with sessions.begin() as session:
        wakeup.notify(session)
    engine.dispose()


def test_an_orchestrator_in_another_group_reacts_to_results_at_once(
    tmp_path: Path, postgres_url: str
) -> None:
    settings = Settings(home=tmp_path / "home", database_url=postgres_url, runtime_lease_seconds=30)
    engine, sessions = open_database(postgres_url)
    broker = InMemoryBroker()
    # Two groups as two processes would be: the evaluator has no orchestrator to wake in its own
    # group, so only the PostgreSQL notification can wake the other group's (which polls every 0.5 s).
    orchestrating = WorkerGroup(Services(settings, sessions, broker, CorrectorRegistry([])))
    working = WorkerGroup(Services(settings, sessions, broker, CorrectorRegistry([])))
    orchestrating.start("orchestrator")
    working.start("executor")
    working.start("evaluator")
    submitter = Runtime(settings.model_copy(update={"broker_url": "amqp://unused:5672/"}))
    try:
        assert orchestrating.listener is not None and orchestrating.listener.connected.wait(10)
        builder = WorkflowBuilder("chain")
        for index in range(8):
            builder.task(
                f"t{index}",
                "command_executor",
                {"argv": ["true"]},
                depends_on=[f"t{index - 1}"] if index else [],
            )
        report = submitter.wait(submitter.submit(builder.build()), timeout=60)
        assert report.status == "success"
        applied = {
            event.task: datetime.fromisoformat(event.at)
            for event in report.events
            if event.kind == "result_applied"
        }
        dispatched = {
            event.task: datetime.fromisoformat(event.at)
            for event in report.events
            if event.kind == "dispatched"
        }
        reactions = [(dispatched[f"t{i}"] - applied[f"t{i - 1}"]).total_seconds() for i in range(1, 8)]
        # Polling alone would average 0.25 s per step (uniform over the 0.5 s idle wait).
        assert statistics.median(reactions) < 0.15, reactions
    finally:
        stop = threading.Thread(target=orchestrating.stop)
        stop.start()
        working.stop()
        stop.join()
        submitter.close()
        broker.close()
        engine.dispose()
