"""Correctors that learn hear when a workflow they may have corrected has finished."""

from __future__ import annotations

import time
from pathlib import Path

from librarian.config import Settings
from librarian.runtime.correctors import CorrectionContext, CorrectionProposal
from librarian.runtime.engine import Runtime
from librarian.runtime.spec import WorkflowBuilder


class Listening:
    """A corrector that never proposes anything but records finished workflows."""

    name = "listening"

    def __init__(self) -> None:
        self.finished: list[str] = []

    def propose(self, context: CorrectionContext) -> CorrectionProposal | None:
        return None

    def workflow_finished(self, workflow_id: str) -> None:
        self.finished.append(workflow_id)


class Broken(Listening):
    name = "broken"

    def workflow_finished(self, workflow_id: str) -> None:
        raise RuntimeError("cannot learn today")


class SlowToLearn(Listening):
    """Takes a moment over each finished workflow, as a corrector updating its memory might."""

    name = "slow-to-learn"

    def workflow_finished(self, workflow_id: str) -> None:
        time.sleep(0.5)
        super().workflow_finished(workflow_id)


def test_the_orchestrator_tells_correctors_once_when_a_workflow_succeeds(tmp_path: Path) -> None:
    listening = Listening()
    spec = WorkflowBuilder("two", goal="two no-ops").task("a", "command_executor", {"argv": ["true"]})
    spec = spec.task("b", "command_executor", {"argv": ["true"]}, depends_on=["a"])
    with Runtime(Settings(home=tmp_path), correctors=[Broken(), listening]) as runtime:
        report = runtime.run(spec.build(), timeout=60)
        second = runtime.run(spec.build(), timeout=60)

    # A corrector whose hook fails does not stop the others, nor the runtime.
    assert report.status == second.status == "success"
    assert listening.finished == [report.workflow_id, second.workflow_id]


def test_correctors_hear_of_a_workflow_that_failed_for_want_of_a_correction(tmp_path: Path) -> None:
    # The workflow fails in a background correction, whose hooks run after the failure's commit; the
    # run returns at that commit, and closing the runtime waits for the correction to end.
    listening = SlowToLearn()
    spec = WorkflowBuilder("fails", goal="a failing task").task("a", "command_executor", {"argv": ["false"]})
    with Runtime(Settings(home=tmp_path), correctors=[listening]) as runtime:
        report = runtime.run(spec.build(), timeout=60)

    assert report.status == "failed"
    assert listening.finished == [report.workflow_id], "the runtime closed before the hook ran"
