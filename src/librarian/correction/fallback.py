"""The loop's last resorts: ask the user a question, then escalate with a report.

When no correction reaches the threshold, the loop pauses the workflow with a question
(:func:`ask_user`); when even the user's answer gives nothing, or every correction budget is spent,
it writes an escalation report (Markdown and JSON, :mod:`~librarian.correction.escalation`) and gives
up, so the workflow ends with a report instead of a guess (:func:`escalate`).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Protocol

from librarian.correction.answers import answers_for
from librarian.correction.escalation import EscalationReport, FailedCommand
from librarian.correction.options import rank_options
from librarian.correction.state import LoopOptions, LoopRun, StepRecorder
from librarian.runtime.correctors import ClarificationRequest

__all__ = ["ask_user", "escalate"]


class _Loop(Protocol):
    name: str
    options: LoopOptions
    escalations: Path | None

    def investigation_escalated(self, report: EscalationReport) -> None: ...

    def matching_runbooks(self, problem: str) -> list[dict[str, Any]]: ...


def ask_user(loop: _Loop, run: LoopRun, step: StepRecorder) -> ClarificationRequest:
    """Pause the workflow with a question only the user can answer."""
    best = rank_options(run.considered)[:1]
    what = "code" if run.kind == "code" else "command"
    failed = "The task's code" if run.kind == "code" else f"`{shlex.join(run.argv)}`"
    question = (
        f"{failed} failed with: {run.trigger.matched_text if run.trigger else ''} -- "
        + (
            f"the best correction found, `{best[0].shown}` ({best[0].strategy}), has "
            f"confidence {best[0].confidence:.2f}, below {loop.options.threshold:.2f}. "
            if best
            else "no correction was found in the documentation. "
        )
        + (
            "Which command should run instead? Answer with the full command line, or say what to use "
            "(for example 'use NEW instead of OLD')."
            if what == "command"
            else "What should the code use instead? Say it as 'use NEW instead of OLD'."
        )
    )
    step("clarification", question, {"question": question, "candidates": [o.to_dict() for o in best]})
    return ClarificationRequest(strategy=loop.name, question=question, rationale="no confident correction")


def escalate(loop: _Loop, run: LoopRun, step: StepRecorder, *, reason: str | None = None) -> None:
    """Write the escalation report and record it on the timeline."""
    failed = run.context.failed
    threshold = loop.options.threshold
    ranked = rank_options(run.considered)
    tried = {_key(item) for item in [run.subject, *run.tried]}
    candidates = [
        {
            **option.to_dict(),
            "rejected_because": "already tried for this task"
            if option.key in tried
            else f"confidence {option.confidence:.2f} is below {threshold:.2f}",
        }
        for option in ranked[:10]
    ]
    history = list(run.history)
    if run.trigger is not None and history:
        last = history[-1]
        history[-1] = FailedCommand(
            last.argv, last.exit_code, last.stderr, last.stdout, run.trigger.to_dict(), code=last.code
        )
    suggestions = list(dict.fromkeys(s for attempt in run.research for s in attempt.suggestions))
    last_error = history[-1].stderr if history else ""
    runbooks = loop.matching_runbooks(f"{run.context.goal}\n{failed.description}\n{last_error}")
    report = EscalationReport(
        goal=run.context.goal,
        task_key=failed.key,
        reason=reason
        or (
            f"no correction reached confidence {threshold:.2f} after {len(run.research)} research "
            f"attempt(s) and {len(ranked)} candidate(s)"
        ),
        workflow_id=str(run.location.workflow_id) if run.location else None,
        tool=run.tool or None,
        version=run.version.version if run.version else None,
        version_output=run.version.raw if run.version else "",
        failures=history,
        research=[attempt.to_dict() for attempt in run.research],
        candidates=candidates,
        threshold=threshold,
        clarification=[
            {"question": item.question, "answer": item.answer} for item in answers_for(run.context, loop.name)
        ],
        next_steps=suggestions
        or ["check the tool's own help for the failed command", "index the tool's documentation"],
        runbooks=runbooks,
    )
    paths: list[str] = []
    if loop.escalations is not None:
        markdown, document = report.write(loop.escalations)
        paths = [str(markdown), str(document)]
    step(
        "escalation",
        report.reason + (f"; report: {paths[0]}" if paths else ""),
        {"report": report.to_dict(), "paths": paths},
    )
    loop.investigation_escalated(report)


def _key(subject: Any) -> Any:
    return subject if isinstance(subject, str) else tuple(subject)
