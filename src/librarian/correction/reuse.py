"""Reuse before research: the session cache and the knowledge base of verified fixes.

- The *session cache* holds the corrections made earlier in the same workflow for the same tool,
  intent, version and error, read from the stored correction attempts (so it survives a restart of
  the orchestrator). One that passed the evaluator counts as a fix with one success; one still
  waiting for its verdict is discounted a little.
- The *knowledge base* holds the verified fixes of the problem signature, with their record; fixes
  verified with another version of the tool are discounted.

Either way a stored fix is applied to *this* failure: a command template to this command's values
(:class:`~librarian.correction.strategies.LearnedFix`), a list of code edits to this task's code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from librarian.correction.fix_templates import make_fix_template
from librarian.correction.fixes import FixStore
from librarian.correction.options import CorrectionOption
from librarian.correction.state import LoopOptions, LoopRun, StepRecorder

__all__ = ["Applier", "knowledge_base_options", "session_cache_options"]

Applier = Callable[[LoopRun, list[dict[str, Any]], str], list[CorrectionOption]]
"""``apply(run, entries, source)``: stored fixes applied to the run's failure, as options."""


def session_cache_options(
    fixes: FixStore, run: LoopRun, options: LoopOptions, step: StepRecorder, apply: Applier
) -> list[CorrectionOption]:
    """Corrections made earlier in this workflow for the same problem, applied to this failure."""
    problem = run.problem
    if run.location is None or problem is None:
        return []
    entries: list[dict[str, Any]] = []
    workspace = run.workspace.root if run.workspace else None
    for attempt in fixes.attempts(run.location.workflow_id):
        if (
            attempt.task_id == run.location.task_id
            or attempt.outcome not in ("succeeded", "proposed")
            or (attempt.tool, attempt.intent, attempt.tool_version, attempt.normalized_error)
            != (problem.tool, problem.intent, problem.version, problem.normalized_error)
        ):
            continue
        if attempt.kind == "code":
            template: dict[str, Any] = {
                "failed_argv_template": [],
                "fixed_argv_template": list(attempt.edits or []),
            }
        else:
            template = make_fix_template(attempt.failed_argv, attempt.corrected_argv, workspace).to_dict()
        entries.append(
            {
                "id": attempt.fix_id,
                "kind": attempt.kind,
                "signature": attempt.signature,
                **template,
                # A correction not yet verified counts as a fix with no record either way.
                "successes": 1 if attempt.outcome == "succeeded" else 0,
                "failures": 0,
            }
        )
    found: list[CorrectionOption] = []
    for option in apply(run, entries, "session_cache"):
        unverified = not option.evidence.get("successes")
        scale = options.pending_session_factor if unverified else 1.0
        note = "Learned earlier in this workflow" + (" (not verified yet)." if unverified else ".")
        found.append(_scaled(option, scale, note))
    step(
        "session_cache",
        f"{len(found)} correction(s) from earlier in this workflow apply"
        if found
        else "nothing learned earlier in this workflow applies",
        {"options": [o.to_dict() for o in found]},
    )
    return found


def knowledge_base_options(
    fixes: FixStore, run: LoopRun, options: LoopOptions, step: StepRecorder, apply: Applier
) -> list[CorrectionOption]:
    """Verified fixes of the problem's signature (other versions discounted), applied to this failure."""
    assert run.problem is not None
    known = fixes.lookup(run.problem)
    by_id = {fix.fix_id: fix for fix in known}
    found: list[CorrectionOption] = []
    for option in apply(run, [fix.entry for fix in known], "knowledge_base"):
        fix = by_id.get(option.fix_id if option.fix_id is not None else -1)
        other = fix is not None and not fix.same_version
        note = (
            f"Verified with version {fix.tool_version}, not {run.problem.version}."
            if other and fix is not None
            else ""
        )
        found.append(_scaled(option, options.other_version_factor if other else 1.0, note))
    step(
        "knowledge_base",
        f"{len(known)} verified fix(es) for this problem; {len(found)} apply here"
        if known
        else "no verified fix for this problem yet",
        {
            "signature": run.problem.signature,
            "intent": run.problem.intent,
            "options": [o.to_dict() for o in found],
        },
    )
    return found


def _scaled(option: CorrectionOption, scale: float, note: str) -> CorrectionOption:
    return replace(
        option,
        confidence=round(option.confidence * scale, 4),
        rationale=f"{option.rationale} {note}".strip(),
    )
