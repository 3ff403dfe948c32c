"""The orchestrator and worker handlers over the in-memory broker: leases, stale messages, bundles."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import pytest

from librarian.config import Settings
from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.runtime import attempt_claims, store
from librarian.runtime.broker.memory import InMemoryBroker
from librarian.runtime.broker.replies import BUNDLE_KEY
from librarian.runtime.claims import Claims
from librarian.runtime.contracts import TaskSpec
from librarian.runtime.correctors import CorrectorRegistry
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec
from librarian.runtime.worker import Services, WorkerGroup, evaluator_handler, executor_handler
from librarian.storage.database import open_database
from tests.runtime.test_broker_memory import wait_until


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


def created(shared: Services, spec: WorkflowSpec) -> uuid.UUID:
    """Store ``spec`` as a new workflow (its tasks pending); its id."""
    with shared.sessions.begin() as session:
        return store.create_workflow(session, spec, actor="test").workflow_id


def memory_broker(shared: Services) -> InMemoryBroker:
    """The in-memory broker of ``shared`` (typed as such, for its inspection methods)."""
    assert isinstance(shared.broker, InMemoryBroker)
    return shared.broker


def test_an_expired_lease_is_dispatched_again_and_the_old_message_is_ignored(tmp_path: Path) -> None:
    # Long enough that the second tick comes before the lease runs out (it would extend it instead).
    shared = services(tmp_path, lease_seconds=1.0)
    broker = memory_broker(shared)
    orchestrator = shared.orchestrator("orch")
    spec = WorkflowBuilder("w").task("only", "command_executor", {"argv": ["echo", "hi"]}).build()
    workflow_id = created(shared, spec)

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
    broker = memory_broker(shared)
    orchestrator = shared.orchestrator("orch")
    spec = WorkflowBuilder("w").task("only", "command_executor", {"argv": ["sh", "-c", "exit 0"]}).build()
    workflow_id = created(shared, spec)
    orchestrator.tick()
    message = take(broker, "dispatch")
    with shared.sessions.begin() as session:  # a worker starts it, then stalls past its lease
        assert attempt_claims.mark_in_progress(
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
    broker = memory_broker(shared)
    orchestrator = shared.orchestrator("orch")
    builder = WorkflowBuilder("w")
    for key in ("a", "b"):
        builder.task(key, "command_executor", {"argv": ["true"]})
    workflow_id = created(shared, builder.build())
    assert orchestrator.tick() == 2
    time.sleep(0.3)  # both leases expired while the messages wait
    assert orchestrator.tick() == 0, "a queued task must not be dispatched a second time"
    assert broker.message_count("dispatch") == 2

    take(broker, "dispatch")
    take(broker, "dispatch")  # ...now both messages are gone and no executor claimed them: lost
    # Both are dispatched again; on a loaded machine the two leases may be found in different ticks.
    deadline = time.monotonic() + 5
    while broker.message_count("dispatch") < 2:
        assert time.monotonic() < deadline
        orchestrator.tick()
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


def test_the_evaluator_applies_every_result_of_a_bundle_and_drops_a_malformed_one(tmp_path: Path) -> None:
    shared = services(tmp_path, lease_seconds=30)
    broker = memory_broker(shared)
    orchestrator = shared.orchestrator("orch")
    builder = WorkflowBuilder("w")
    for key in ("a", "b", "c"):
        builder.task(key, "command_executor", {"argv": ["true"]})
    workflow_id = created(shared, builder.build())
    assert orchestrator.tick() == 3
    run = executor_handler(shared, "exec", Claims(shared.sessions, lease_seconds=30))
    results: list[dict[str, Any]] = []
    for _ in range(3):
        result = run(take(broker, "dispatch"))
        assert result is not None
        results.append(result)

    apply = evaluator_handler(shared, "eval")
    apply({BUNDLE_KEY: "not a list of results"})  # logged and dropped, not redelivered forever
    apply({BUNDLE_KEY: results[:2]})  # what an executor holding two tasks sends
    apply(results[2])  # and a plain one
    orchestrator.tick()

    with shared.sessions() as session:
        workflow = store.get_workflow(session, workflow_id)
        tasks = store.workflow_tasks(session, workflow_id)
    assert [task.status for task in tasks] == ["success"] * 3
    assert workflow.final_status == "success" and workflow.total_reward == 3.0


def test_a_worker_group_refuses_an_executor_prefetch_below_one(tmp_path: Path) -> None:
    group = WorkerGroup(services(tmp_path, lease_seconds=30))
    with pytest.raises(InvalidInputError, match="executor_prefetch"):
        group.start("executor", executor_prefetch=0)
    assert group.threads == []


def test_a_finished_task_keeps_its_lease_while_the_rest_of_its_batch_runs(tmp_path: Path) -> None:
    # Lease 2 s; "a" ends at once, but its result goes out with "b"'s, 6 s later.
    shared = services(tmp_path, lease_seconds=2.0)
    broker = memory_broker(shared)
    group = WorkerGroup(shared)
    spec = (
        WorkflowBuilder("w")
        .task("a", "command_executor", {"argv": ["echo", "a"]})
        .task("b", "command_executor", {"argv": ["sleep", "6"]})
        .build()
    )
    try:
        group.start("orchestrator")
        group.start("evaluator")
        workflow_id = created(shared, spec)
        group.wake()
        # Both wait in the queue before the executor starts: one batch.
        wait_until(lambda: broker.message_count("dispatch") == 2, what="the two tasks dispatched")
        group.start("executor", executor_prefetch=4)
        wait_until(lambda: status_of(shared, workflow_id) != "running", 30, "the workflow's end")
        with shared.sessions() as session:
            workflow = store.get_workflow(session, workflow_id)
            tasks = store.workflow_tasks(session, workflow_id)
            kinds = [
                event.kind for task in tasks for event in store.events(session, workflow_id, task.task_id)
            ]
    finally:
        group.stop()
    assert workflow.final_status == "success"
    assert [task.attempt for task in tasks] == [1, 1], "a lease ran out and a task ran twice"
    assert kinds.count("started") == 2 and "lease_expired" not in kinds


def test_a_stopping_executor_claims_nothing_more(tmp_path: Path) -> None:
    shared = services(tmp_path, lease_seconds=30)
    broker = memory_broker(shared)
    spec = WorkflowBuilder("w").task("only", "command_executor", {"argv": ["true"]}).build()
    workflow_id = created(shared, spec)
    assert shared.orchestrator("orch").tick() == 1
    shared.environment.shutdown()
    run = executor_handler(shared, "exec", Claims(shared.sessions, lease_seconds=30))
    with pytest.raises(BackendUnavailableError, match="stopping"):
        run(take(broker, "dispatch"))
    with shared.sessions() as session:
        task = store.workflow_tasks(session, workflow_id)[0]
    assert task.status == "dispatched", "claimed by an executor that was stopping"


def status_of(shared: Services, workflow_id: Any, key: str | None = None) -> str:
    """The status of the workflow, or of its task ``key``."""
    with shared.sessions() as session:
        if key is None:
            return store.get_workflow(session, workflow_id).final_status
        return next(
            task.status for task in store.workflow_tasks(session, workflow_id) if task.task_key == key
        )


def test_a_stopping_batch_executor_hands_back_the_tasks_it_never_started(tmp_path: Path) -> None:
    shared = services(tmp_path, lease_seconds=30)
    group = WorkerGroup(shared)
    spec = (
        WorkflowBuilder("w")
        .task("long", "command_executor", {"script": "touch started; sleep 30"})
        .task("b", "command_executor", {"argv": ["true"]})
        .task("c", "command_executor", {"argv": ["true"]})
        .build()
    )
    workflow_id = created(shared, spec)
    assert shared.orchestrator("orch").tick() == 3  # all three wait: one batch
    try:
        group.start("executor", executor_prefetch=4)
        # Claimed with the batch, all three are in_progress at once: wait until "long" really runs.
        marker = tmp_path / "home" / "workspaces" / str(workflow_id) / "started"
        wait_until(marker.exists, what="long started")
    finally:
        group.stop()  # kills "long"; "b" and "c", claimed with it, never started
    with shared.sessions() as session:
        tasks = {task.task_key: task for task in store.workflow_tasks(session, workflow_id)}
        released = {
            key: [event.kind for event in store.events(session, workflow_id, tasks[key].task_id)]
            for key in ("b", "c")
        }

    assert [(tasks[key].status, tasks[key].attempt) for key in ("b", "c")] == [("dispatched", 1)] * 2
    assert released == {key: ["task_created", "dispatched", "started", "released"] for key in ("b", "c")}
    assert tasks["long"].status == "in_progress", "killed mid-run: its lease expires, then it runs again"


def test_a_batch_executor_drops_a_malformed_message_and_runs_the_rest(tmp_path: Path) -> None:
    shared = services(tmp_path, lease_seconds=30)
    broker = memory_broker(shared)
    spec = WorkflowBuilder("w").task("only", "command_executor", {"argv": ["true"]}).build()
    workflow_id = created(shared, spec)
    broker.publish(
        "dispatch", {"task_id": "not-a-uuid", "workflow_id": "w", "executor_type": "x", "payload": {}}
    )
    assert shared.orchestrator("orch").tick() == 1
    group = WorkerGroup(shared)
    try:
        group.start("executor", executor_prefetch=4)
        wait_until(lambda: broker.message_count("results") == 1, what="the well-formed task's result")
        assert status_of(shared, workflow_id, "only") == "in_progress"
    finally:
        group.stop()
    assert broker.message_count("dispatch") == 0, "the malformed message was redelivered"
    assert take(broker, "results")["task"]["task_id"] != "not-a-uuid"
