"""Reuse before research: the session cache and the knowledge base of verified fixes.

- The *session cache* holds the corrections made earlier in the same workflow for the same tool,
  intent, version and error, read from the stored correction attempts (so it survives a restart of
  the orchestrator). One that passed the evaluator counts as a fix with one success; one still
  waiting for its verdict is discounted a little.
- The *knowledge base* holds the verified fixes of the problem signature, with their record; fixes
  verified with another version of the tool are discounted.

Either way the ``learned_fix`` strategy applies the stored template to this command's values.
"""

from __future__ import annotations

from typing import Any

from librarian.correction.fix_templates import make_fix_template
from librarian.correction.fixes import FixStore
from librarian.correction.options import CorrectionOption, from_candidate
from librarian.correction.state import LoopOptions, LoopRun, StepRecorder
from librarian.correction.strategies import LearnedFix

__all__ = ["knowledge_base_options", "session_cache_options"]


def session_cache_options(
    fixes: FixStore, run: LoopRun, options: LoopOptions, step: StepRecorder
) -> list[CorrectionOption]:
    """Corrections made earlier in this workflow for the same problem, applied to this command."""
    problem = run.problem
    if run.location is None or problem is None:
        return []
    entries: list[dict[str, Any]] = []
    for attempt in fixes.attempts(run.location.workflow_id):
        if (
            attempt.task_id == run.location.task_id
            or attempt.outcome not in ("succeeded", "proposed")
            or (attempt.tool, attempt.intent, attempt.tool_version, attempt.normalized_error)
            != (problem.tool, problem.intent, problem.version, problem.normalized_error)
        ):
            continue
        workspace = run.workspace.root if run.workspace else None
        template = make_fix_template(attempt.failed_argv, attempt.corrected_argv, workspace)
        entries.append(
            {
                "id": attempt.fix_id,
                "signature": attempt.signature,
                **template.to_dict(),
                # A correction not yet verified counts as a fix with no record either way.
                "successes": 1 if attempt.outcome == "succeeded" else 0,
                "failures": 0,
            }
        )
    found: list[CorrectionOption] = []
    for candidate in LearnedFix().propose(run.failure_input(learned=entries)):
        unverified = not candidate.evidence.get("successes")
        found.append(
            from_candidate(
                candidate,
                "session_cache",
                scale=options.pending_session_factor if unverified else 1.0,
                note="Learned earlier in this workflow" + (" (not verified yet)." if unverified else "."),
            )
        )
    step(
        "session_cache",
        f"{len(found)} correction(s) from earlier in this workflow apply"
        if found
        else "nothing learned earlier in this workflow applies",
        {"options": [o.to_dict() for o in found]},
    )
    return found


def knowledge_base_options(
    fixes: FixStore, run: LoopRun, options: LoopOptions, step: StepRecorder
) -> list[CorrectionOption]:
    """Verified fixes of the problem's signature (other versions discounted), applied to this command."""
    assert run.problem is not None
    known = fixes.lookup(run.problem)
    entries = [fix.entry for fix in known]
    by_id = {fix.fix_id: fix for fix in known}
    found: list[CorrectionOption] = []
    for candidate in LearnedFix().propose(run.failure_input(learned=entries)):
        fix = by_id.get(int(candidate.evidence.get("id") or -1))
        other = fix is not None and not fix.same_version
        found.append(
            from_candidate(
                candidate,
                "knowledge_base",
                scale=options.other_version_factor if other else 1.0,
                note=f"Verified with version {fix.tool_version}, not {run.problem.version}."
                if other and fix is not None
                else "",
            )
        )
    step(
        "knowledge_base",
        f"{len(known)} verified fix(es) for this problem; {len(found)} apply to this command"
        if known
        else "no verified fix for this problem yet",
        {
            "signature": run.problem.signature,
            "intent": run.problem.intent,
            "options": [o.to_dict() for o in found],
        },
    )
    return found
