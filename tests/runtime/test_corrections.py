"""Correction off the dispatch loop: a slow corrector times out, and other work goes on meanwhile."""

from __future__ import annotations

import threading
import time

from librarian.runtime.correctors import CorrectionContext, CorrectionProposal, ScriptedCorrector
from librarian.runtime.spec import WorkflowBuilder
from tests.runtime.conftest import RuntimeFactory
from tests.runtime.test_engine import fix_plan, missing_input_spec


class SlowCorrector:
    """Thinks for ``seconds``, then proposes a plan that must never be used (it comes too late)."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.finished = threading.Event()

    def propose(self, context: CorrectionContext) -> CorrectionProposal | None:
        time.sleep(self.seconds)
        self.finished.set()
        return CorrectionProposal(self.name, {"steps": "not even a valid plan"}, "too late")


def test_a_corrector_that_takes_too_long_is_rejected_and_the_next_one_is_tried(
    open_runtime: RuntimeFactory,
) -> None:
    slow = SlowCorrector(30.0)
    runtime = open_runtime(
        correctors=[slow, ScriptedCorrector("scripted", [fix_plan()])], corrector_timeout_seconds=0.5
    )
    started = time.monotonic()
    report = runtime.run(missing_input_spec(), timeout=60)

    assert report.status == "success", report.failure_report
    assert time.monotonic() - started < 20  # not held for the slow corrector's 30 s
    rejected = [event for event in report.events if event.kind == "plan_rejected"]
    assert len(rejected) == 1 and "'slow'" in rejected[0].reason and "timed out" in rejected[0].reason
    surgery = next(event for event in report.events if event.kind == "surgery")
    assert "'scripted'" in surgery.reason
    assert not slow.finished.is_set()


def test_other_tasks_are_dispatched_while_a_corrector_thinks(open_runtime: RuntimeFactory) -> None:
    builder = WorkflowBuilder("busy", goal="keep going while correcting")
    builder.task("read", "command_executor", {"argv": ["cat", "data/input.txt"]})
    for index in range(1, 4):  # a chain that needs the orchestrator three more times
        after = [f"b{index - 1}"] if index > 1 else []
        builder.task(f"b{index}", "command_executor", {"argv": ["sleep", "0.2"]}, depends_on=after)
    runtime = open_runtime(
        correctors=[SlowCorrector(8.0), ScriptedCorrector("scripted", [fix_plan()])],
        corrector_timeout_seconds=5.0,  # the chain's 0.6 s, with room for a loaded machine
    )
    report = runtime.run(builder.build(), timeout=60)

    assert report.status == "success", report.failure_report
    kinds = [(event.kind, event.task) for event in report.events]
    correcting = kinds.index(("correction_started", "read"))
    gave_up = kinds.index(("plan_rejected", "read"))
    chain_done = kinds.index(("result_applied", "b3"))
    # b2 and b3 were dispatched and finished while the slow corrector was still thinking.
    assert correcting < chain_done < gave_up, kinds


def test_a_task_longer_than_its_lease_keeps_it_through_the_heartbeat(open_runtime: RuntimeFactory) -> None:
    # Renewed every 0.5 s: a stall of up to 1 s in the heartbeat still keeps the lease.
    runtime = open_runtime(runtime_lease_seconds=1.5)
    spec = WorkflowBuilder("long").task("slow", "command_executor", {"argv": ["sleep", "4"]}).build()
    report = runtime.run(spec, timeout=60)
    assert report.status == "success"
    assert report.task("slow").attempt == 1
    assert "lease_expired" not in [event.kind for event in report.events]
