"""The orchestrator and worker handlers over the in-memory broker: leases, stale and duplicate messages."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Literal

from librarian.config import Settings
from librarian.runtime import attempts, store
from librarian.runtime.broker.memory import InMemoryBroker
from librarian.runtime.claims import Claims
from librarian.runtime.contracts import TaskSpec
from librarian.runtime.correctors import CorrectorRegistry
from librarian.runtime.spec import WorkflowBuilder
from librarian.runtime.worker import Services, evaluator_handler, executor_handler
from librarian.storage.database import open_database


def take(broker: InMemoryBroker, queue: Literal["dispatch", "results"]) -> dict[str, Any]:
    """The next message of ``queue`` (acknowledged), waiting up to 5 s."""
    taken: list[dict[str, Any]] = []
    stop = threading.Event()

    def handler(message: dict[str, Any]) -> None:
        taken.append(message)
        stop.set()

    timer = threading.Timer(5.0, stop.set)
    timer.start()
    broker.consume(queue, handler, stop)
    timer.cancel()
    assert taken, f"no message on {queue}"
    return taken[0]


def services(tmp_path: Path, lease_seconds: float) -> Services:
    settings = Settings(home=tmp_path / "home", runtime_lease_seconds=lease_seconds)
    _, sessions = open_database(settings.resolved_database_url)
    return Services(settings, sessions, InMemoryBroker(), CorrectorRegistry([]))


def test_an_expired_lease_is_dispatched_again_and_the_old_message_is_ignored(tmp_path: Path) -> None:
    shared = services(tmp_path, lease_seconds=0.2)
    broker = shared.broker
    assert isinstance(broker, InMemoryBroker)
    orchestrator = shared.orchestrator("orch")
    spec = WorkflowBuilder("w").task("only", "command_executor", {"argv": ["echo", "hi"]}).build()
    with shared.sessions.begin() as session:
        workflow_id = store.create_workflow(session, spec, actor="test").workflow_id

    assert orchestrator.tick() == 1
    assert orchestrator.tick() == 0  # leased: not dispatched twice
    first = take(broker, "dispatch")  # ...and then the executor that took it vanished
    deadline = time.monotonic() + 5
    while orchestrator.tick() == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = take(broker, "dispatch")
    assert (first["attempt"], second["attempt"]) == (1, 2)

    run = executor_handler(shared, "exec", Claims(shared.sessions, lease_seconds=30))
    assert run(first) is None  # a late redelivery of the superseded attempt: ignored, no reply
    result = run(second)
    assert result is not None and result["result"]["ok"]
    apply = evaluator_handler(shared, "eval")
    apply(result)
    apply(result)  # the same result delivered twice
    orchestrator.tick()

    with shared.sessions() as session:
        workflow = store.get_workflow(session, workflow_id)
        task = store.workflow_tasks(session, workflow_id)[0]
        kinds = [event.kind for event in store.events(session, workflow_id, task.task_id)]
    assert workflow.final_status == "success" and workflow.total_reward == 1.0
    assert task.attempt == 2 and task.reward == 1.0
    assert kinds == [
        "task_created",
        "dispatched",
        "lease_expired",
        "stale_dispatch_ignored",
        "started",
        "result_applied",
        "stale_result_ignored",
    ]


def test_a_result_arriving_after_its_lease_expired_is_ignored(tmp_path: Path) -> None:
    shared = services(tmp_path, lease_seconds=0.2)
    broker = shared.broker
    assert isinstance(broker, InMemoryBroker)
    orchestrator = shared.orchestrator("orch")
    spec = WorkflowBuilder("w").task("only", "command_executor", {"argv": ["sh", "-c", "exit 0"]}).build()
    with shared.sessions.begin() as session:
        workflow_id = store.create_workflow(session, spec, actor="test").workflow_id
    orchestrator.tick()
    message = take(broker, "dispatch")
    with shared.sessions.begin() as session:  # a worker starts it, then stalls past its lease
        assert attempts.mark_in_progress(
            session, TaskSpec.from_dict(message), worker="slow", lease_seconds=0.1
        )
    deadline = time.monotonic() + 5
    while orchestrator.tick() == 0:  # the slow worker's lease runs out: attempt 2
        assert time.monotonic() < deadline
        time.sleep(0.05)
    late = {"task": message, "result": {"ok": True, "feedback": {"status": "success", "notes": ""}}}
    evaluator_handler(shared, "eval")(late)
    with shared.sessions() as session:
        task = store.workflow_tasks(session, workflow_id)[0]
        kinds = [event.kind for event in store.events(session, workflow_id, task.task_id)]
    assert task.status == "dispatched" and task.attempt == 2 and task.reward is None
    assert kinds[-1] == "stale_result_ignored"


def test_an_unclaimed_task_still_queued_keeps_its_lease_until_the_queue_drains(tmp_path: Path) -> None:
    # Two tasks dispatched to a queue nobody consumes: a backlog, not a loss.
    shared = services(tmp_path, lease_seconds=0.2)
    broker = shared.broker
    assert isinstance(broker, InMemoryBroker)
    orchestrator = shared.orchestrator("orch")
    builder = WorkflowBuilder("w")
    for key in ("a", "b"):
        builder.task(key, "command_executor", {"argv": ["true"]})
    with shared.sessions.begin() as session:
        workflow_id = store.create_workflow(session, builder.build(), actor="test").workflow_id
    assert orchestrator.tick() == 2
    time.sleep(0.3)  # both leases expired while the messages wait
    assert orchestrator.tick() == 0, "a queued task must not be dispatched a second time"
    assert broker.message_count("dispatch") == 2

    take(broker, "dispatch")
    take(broker, "dispatch")  # ...now both messages are gone and no executor claimed them: lost
    deadline = time.monotonic() + 5
    while orchestrator.tick() == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert broker.message_count("dispatch") == 2
    with shared.sessions() as session:
        tasks = store.workflow_tasks(session, workflow_id)
        kinds = [event.kind for event in store.events(session, workflow_id, tasks[0].task_id)]
    assert [task.attempt for task in tasks] == [2, 2]
    assert kinds == ["task_created", "dispatched", "lease_extended", "lease_expired"]


def test_expired_leases_are_looked_for_at_most_once_per_interval(tmp_path: Path) -> None:
    shared = services(tmp_path, lease_seconds=0.2)
    orchestrator = shared.orchestrator("orch")
    orchestrator.lease_check_seconds = 60.0
    spec = WorkflowBuilder("w").task("only", "command_executor", {"argv": ["true"]}).build()
    with shared.sessions.begin() as session:
        store.create_workflow(session, spec, actor="test")
    assert orchestrator.tick() == 1  # the first pass looks (nothing expired yet) and dispatches
    assert isinstance(shared.broker, InMemoryBroker)
    take(shared.broker, "dispatch")  # lost
    time.sleep(0.3)
    assert orchestrator.tick() == 0, "looked again before the interval passed"
    orchestrator._next_lease_check = 0.0  # the interval has passed
    assert orchestrator.tick() == 1
