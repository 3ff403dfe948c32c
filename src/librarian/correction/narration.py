"""One-line summaries of the loop's steps, as the timeline shows them to a person."""

from __future__ import annotations

from librarian.correction.options import CorrectionOption, rank_options
from librarian.correction.research_step import ResearchAttempt
from librarian.correction.triggers import FailureClass

__all__ = ["candidates_summary", "research_summary", "trigger_summary"]


def trigger_summary(trigger: FailureClass) -> str:
    """``api_drift (rule unknown-option), correctable: <the matched line>``."""
    what = f"{trigger.category} (rule {trigger.rule_id})" if trigger.rule_id else trigger.category
    verdict = "correctable" if trigger.correctable else "not correctable"
    return f"{what}, {verdict}" + (f": {trigger.matched_text}" if trigger.matched_text else "")


def research_summary(attempt: ResearchAttempt, broad: bool) -> str:
    """The question, the versions asked and used, the confidence and the top hits with their scores."""
    kind = "broader research" if broad else "research"
    if attempt.error:
        return f"{kind} for {attempt.query!r} failed: {attempt.message}"
    hits = ", ".join(
        f"{s.get('entity_name')} ({float(s.get('score') or 0):.2f})" for s in attempt.snippets[:5]
    )
    return (
        f"{kind} for {attempt.query!r} (version {attempt.version} -> {attempt.resolved_version}, "
        f"confidence {attempt.confidence:.2f}): {hits or 'nothing found'}"
    )


def candidates_summary(
    options: list[CorrectionOption], chosen: CorrectionOption | None, threshold: float
) -> str:
    """How many candidates there were and which one was chosen, or why none was."""
    if not options:
        return "no strategy proposed a correction"
    best = rank_options(options)[0]
    if chosen is None:
        return (
            f"{len(options)} candidate(s); the best, {best.strategy} at {best.confidence:.2f}, is below "
            f"the threshold {threshold:.2f} or was already tried"
        )
    return f"{len(options)} candidate(s); chosen {chosen.strategy} at {chosen.confidence:.2f}"
