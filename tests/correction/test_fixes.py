"""Verified fixes, settled from the runtime's real event log: counts, rewards, lookup, two databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, select

from librarian.config import Settings
from librarian.correction.fixes import AttemptRecord, FixStore, learn_from_workflow
from librarian.correction.locate import locate_task
from librarian.correction.models import CorrectionAttempt, VerifiedFix
from librarian.correction.options import CorrectionOption, build_plan
from librarian.correction.problem import problem_of
from librarian.correction.timeline import STEP_KIND, read_timeline
from librarian.runtime import store
from librarian.runtime.correctors import CorrectionContext, CorrectionProposal
from librarian.runtime.engine import Runtime
from librarian.runtime.report import WorkflowReport
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec

ERROR = "error: unknown option --colour; try --color"
FAILING = ["sh", "-c", f"echo '{ERROR}' >&2; exit 2"]
FIXED = ["sh", "-c", "echo fixed > out.txt"]
BROKEN_FIX = ["sh", "-c", "echo still broken >&2; exit 3"]
VERSION = "2.1.0"


class RecordingCorrector:
    """A corrector that stores its correction as the loop does, then proposes it."""

    name = "recorder"

    def __init__(self, fixes: FixStore, fixed: list[str], *, fix_id: int | None = None, applied: bool = True):
        self.fixes = fixes
        self.fixed = fixed
        self.fix_id = fix_id
        self.applied = applied
        self.calls = 0

    def propose(self, context: CorrectionContext) -> CorrectionProposal | None:
        self.calls += 1
        if self.calls > 1:
            return None
        location = locate_task(self.fixes.sessions, context)
        assert location is not None
        argv = list(context.failed.payload["argv"])
        stderr = str(context.failed.feedback_notes["details"]["stderr"])
        self.fixes.record_attempt(
            AttemptRecord(
                workflow_id=location.workflow_id,
                task_id=location.task_id,
                task_key=context.failed.key,
                problem=problem_of(argv, stderr, VERSION),
                trigger_category="api_drift",
                error_text=stderr,
                failed_argv=argv,
                corrected_argv=self.fixed,
                strategy="synopsis_rewrite",
                source="research",
                confidence=0.85,
                rationale="the docs say so",
                fix_id=self.fix_id,
                snippets=[{"entity_name": "tool put", "source_url": "cli://tool/put", "used": True}],
                research_calls=1,
                failed_at=location.failed_at,
            )
        )
        # A plan that is not the recorded one: the attempt must then count as never applied.
        proposed = self.fixed if self.applied else ["sh", "-c", "echo something else"]
        option = CorrectionOption(proposed, "synopsis_rewrite", "research", 0.85, "the docs say so")
        plan = build_plan(
            option,
            task_key=context.failed.key,
            executor_type="command_executor",
            payload=context.failed.payload,
        )
        return CorrectionProposal(self.name, plan, "recorded")


def spec(verify_ok: bool = True) -> WorkflowSpec:
    return (
        WorkflowBuilder("fixes", goal="publish the report")
        .task("publish", "command_executor", {"argv": FAILING}, description="publish it")
        .task(
            "verify",
            "command_executor",
            {"argv": ["sh", "-c", "test -f out.txt" if verify_ok else "exit 1"]},
            depends_on=["publish"],
        )
        .build()
    )


@pytest.fixture
def runtime_settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", runtime_workers=2, runtime_task_timeout_seconds=30.0)


@pytest.fixture
def runtimes() -> Iterator[list[Runtime]]:
    opened: list[Runtime] = []
    yield opened
    for runtime in opened:
        runtime.close()


def run_with(
    settings: Settings, runtimes: list[Runtime], fixed: list[str], workflow: WorkflowSpec, **kwargs: Any
) -> tuple[Runtime, FixStore, WorkflowReport]:
    # One runtime at a time on the shared store: an earlier one's orchestrator, still polling, could
    # otherwise pick up this workflow's failure and correct it with its own corrector.
    for earlier in runtimes:
        earlier.close()  # its sessions stay usable for reading
    runtime = Runtime(settings, correctors=[])
    runtimes.append(runtime)
    fixes = FixStore(runtime.sessions, workspaces=settings.home / "workspaces")
    runtime.correctors.register(RecordingCorrector(fixes, fixed, **kwargs))
    return runtime, fixes, runtime.run(workflow, timeout=60)


def stats(runtime: Runtime, category: str) -> dict[str, tuple[int, float]]:
    with runtime.sessions() as session:
        return {
            name: (row.trials, row.total_reward)
            for name, row in store.strategy_stats(session, category).items()
        }


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_a_correction_that_passes_the_evaluator_and_its_dependants_becomes_a_verified_fix(
    backend: str, runtime_settings: Settings, runtimes: list[Runtime], request: pytest.FixtureRequest
) -> None:
    settings = runtime_settings
    if backend == "postgresql":
        settings = settings.model_copy(update={"database_url": request.getfixturevalue("postgres_url")})
    runtime, fixes, report = run_with(settings, runtimes, FIXED, spec())
    assert report.status == "success", report.failure_report

    [settled] = learn_from_workflow(
        runtime.sessions, report.workflow_id, workspaces=settings.home / "workspaces"
    )

    assert settled.outcome == "succeeded" and settled.new_fix
    assert (settled.successes, settled.failures) == (1, 0) and settled.reward == pytest.approx(1.5)
    assert settled.correction_seconds is not None and 0 <= settled.correction_seconds < 60
    [fix] = fixes.fixes()
    assert fix.failed_template[:2] == ["sh", "-c"] and fix.fixed_template == [
        "{argv0}",
        "-c",
        "echo fixed > out.txt",
    ]
    assert fix.snippets[0]["source_url"] == "cli://tool/put"
    assert fix.signature == problem_of(FAILING, ERROR, VERSION).signature
    # The reward reached the strategy policy under the trigger category and the inner strategy.
    assert list(stats(runtime, "api_drift")) == ["synopsis_rewrite"]
    assert stats(runtime, "api_drift")["synopsis_rewrite"] == (1, 1.5)
    # Settling is idempotent, and the verdict is on the workflow's timeline.
    assert learn_from_workflow(runtime.sessions, report.workflow_id) == []
    learned = [e for e in read_timeline(runtime.sessions, report.workflow_id) if e.kind == STEP_KIND]
    assert [e.stage for e in learned] == ["learned"] and "new verified fix" in learned[0].summary


def test_reusing_a_fix_counts_successes_and_failures(
    runtime_settings: Settings, runtimes: list[Runtime]
) -> None:
    runtime, fixes, report = run_with(runtime_settings, runtimes, FIXED, spec())
    learn_from_workflow(runtime.sessions, report.workflow_id)
    [fix] = fixes.fixes()

    # The same problem again, corrected by reusing the fix: one more success on the same row.
    _, _, again = run_with(runtime_settings, runtimes, FIXED, spec(), fix_id=fix.id)
    [settled] = learn_from_workflow(runtime.sessions, again.workflow_id)
    assert (settled.outcome, settled.new_fix, settled.successes, settled.fix_id) == (
        "succeeded",
        False,
        2,
        fix.id,
    )

    # Reused once more, but its retry fails now: a failure on that fix, and a negative reward.
    _, _, failed = run_with(
        runtime_settings.model_copy(update={"runtime_max_retries": 1}),
        runtimes,
        BROKEN_FIX,
        spec(),
        fix_id=fix.id,
    )
    assert failed.status == "failed"
    [settled] = learn_from_workflow(runtime.sessions, failed.workflow_id)
    assert (settled.outcome, settled.successes, settled.failures) == ("failed", 2, 1)
    assert settled.reward is not None and settled.reward < 0
    trials, total = stats(runtime, "api_drift")["synopsis_rewrite"]
    assert trials == 3 and total == pytest.approx(1.5 + 1.5 + settled.reward)


def test_a_fix_whose_verification_fails_is_not_learned(
    runtime_settings: Settings, runtimes: list[Runtime]
) -> None:
    runtime, fixes, report = run_with(runtime_settings, runtimes, FIXED, spec(verify_ok=False))
    assert report.status == "failed" and report.task("publish").status == "success"
    [settled] = learn_from_workflow(runtime.sessions, report.workflow_id)
    assert settled.outcome == "failed" and settled.fix_id is None
    assert fixes.fixes() == []


def test_a_plan_that_was_never_applied_is_neither_learned_nor_blamed(
    runtime_settings: Settings, runtimes: list[Runtime]
) -> None:
    runtime, fixes, report = run_with(runtime_settings, runtimes, FIXED, spec(), applied=False)
    [settled] = learn_from_workflow(runtime.sessions, report.workflow_id)
    assert settled.outcome == "not_applied" and settled.reward is None
    assert fixes.fixes() == [] and stats(runtime, "api_drift") == {}


def test_lookup_puts_the_same_version_first_and_marks_other_versions(
    runtime_settings: Settings, runtimes: list[Runtime]
) -> None:
    runtime, fixes, report = run_with(runtime_settings, runtimes, FIXED, spec())
    learn_from_workflow(runtime.sessions, report.workflow_id)

    same = fixes.lookup(problem_of(FAILING, ERROR, VERSION))
    other = fixes.lookup(problem_of(FAILING, ERROR, "3.0.0"))
    different_error = fixes.lookup(problem_of(FAILING, "error: permission denied", VERSION))

    assert [(f.same_version, f.entry["successes"]) for f in same] == [(True, 1)]
    assert [(f.same_version, f.tool_version) for f in other] == [(False, VERSION)]
    assert different_error == []


def test_the_migration_creates_both_tables(runtime_settings: Settings, runtimes: list[Runtime]) -> None:
    runtime = Runtime(runtime_settings, correctors=[])
    runtimes.append(runtime)
    tables = set(inspect(runtime.engine).get_table_names())
    assert {"verified_fixes", "correction_attempts"} <= tables
    with runtime.sessions() as session:
        assert session.scalars(select(VerifiedFix)).all() == []
        assert session.scalars(select(CorrectionAttempt)).all() == []
