"""Candidate corrections of every origin, how the loop ranks them, and the plan it hands the runtime.

Offline strategies return :class:`~librarian.correction.candidates.Candidate` command lines (or, for a
code task, corrected source); the LLM returns a whole plan. All become a :class:`CorrectionOption`,
ranked by confidence (rounded to two decimals, so that near ties are broken by the strategy policy's
preference: strategies that earned more reward on this category of failure come first). The chosen
option becomes the runtime's plan: its preparation steps, if any, then the retry of the failed task
with the corrected payload (``argv`` for a command, ``code`` for a code task).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from librarian.correction.candidates import Candidate

__all__ = ["CorrectionOption", "build_plan", "from_candidate", "rank_options"]


@dataclass(frozen=True)
class CorrectionOption:
    """One way to correct the failed task.

    Attributes:
        argv: the corrected command.
        strategy: the strategy that proposed it (``learned_fix``, ``explicit_replacement``,
            ``synopsis_rewrite``, ``llm``...).
        source: where the knowledge came from: ``session_cache``, ``knowledge_base``, ``research``,
            ``llm`` or ``user``.
        confidence: 0..1.
        rationale: why, in words a person can check.
        evidence: what it relied on (an error line, a snippet, a stored fix).
        steps: preparation steps to run before the retry (plan steps, for an LLM plan).
        retry_payload: the retry payload, when it is more than the failed payload with a new argv.
        fix_id: the verified fix it applies, if any.
        code: for a code task, the corrected source (``argv`` is then empty).
        edits: the edits that made it (command-line spans, or syntax-tree edits of code).
    """

    argv: list[str]
    strategy: str
    source: str
    confidence: float
    rationale: str
    evidence: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    retry_payload: dict[str, Any] | None = None
    fix_id: int | None = None
    code: str | None = None
    edits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, ...] | str:
        """What it runs, comparably: the argv, or the corrected code."""
        return self.code if self.code is not None else tuple(self.argv)

    @property
    def shown(self) -> str:
        """What it runs, for a person: the command line, or the edits made to the code."""
        if self.code is None:
            return shlex.join(self.argv)
        described = [str(edit.get("summary") or "") for edit in self.edits]
        return "; ".join(d for d in described if d) or "the corrected code"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (for the timeline and the escalation report)."""
        return {
            **({"code": self.code, "edits": list(self.edits)} if self.code is not None else {}),
            "argv": list(self.argv),
            "strategy": self.strategy,
            "source": self.source,
            "confidence": round(self.confidence, 4),
            "rationale": self.rationale,
            "evidence": self.evidence,
            "steps": len(self.steps),
            "fix_id": self.fix_id,
        }


def from_candidate(
    candidate: Candidate, source: str, *, scale: float = 1.0, note: str = ""
) -> CorrectionOption:
    """An offline strategy's candidate as an option (confidence times ``scale``, ``note`` appended)."""
    fix_id = candidate.evidence.get("id") if candidate.strategy == "learned_fix" else None
    return CorrectionOption(
        argv=list(candidate.argv),
        strategy=candidate.strategy,
        source=source,
        confidence=round(candidate.confidence * scale, 4),
        rationale=f"{candidate.rationale} {note}".strip(),
        evidence=dict(candidate.evidence),
        fix_id=fix_id if isinstance(fix_id, int) else None,
        edits=list(candidate.evidence.get("edits") or []),
    )


def rank_options(
    options: Iterable[CorrectionOption],
    *,
    preference: Sequence[str] = (),
    exclude: Iterable[Sequence[str] | str] = (),
) -> list[CorrectionOption]:
    """Options best first, one per command line (or corrected code), leaving out the ``exclude``d ones.

    Args:
        options: the candidates.
        preference: strategy names in the policy's order; among options whose confidences agree to
            two decimals, the preferred strategy comes first.
        exclude: command lines (or code) already tried, and failed, for this task.
    """
    skip = {item if isinstance(item, str) else tuple(item) for item in exclude}
    order = {name: index for index, name in enumerate(preference)}
    best: dict[tuple[str, ...] | str, CorrectionOption] = {}
    for option in options:
        key = option.key
        if key in skip:
            continue
        if key not in best or option.confidence > best[key].confidence:
            best[key] = option
    return sorted(
        best.values(),
        key=lambda o: (-round(o.confidence, 2), order.get(o.strategy, len(order)), -o.confidence),
    )


def build_plan(
    option: CorrectionOption,
    *,
    task_key: str,
    executor_type: str,
    payload: Mapping[str, Any],
) -> dict[str, Any]:
    """The runtime plan for ``option``: its preparation steps, then the retry with the corrected command."""
    if option.retry_payload is not None:
        retry_payload = dict(option.retry_payload)
    elif option.code is not None:
        retry_payload = {**payload, "code": option.code}
    else:
        retry_payload = {**payload, "argv": option.argv}
    retry = {
        "description": f"retry {task_key} as `{option.shown}`"
        if option.code is None
        else f"retry {task_key} with {option.shown}",
        "executor_type": executor_type,
        "payload": retry_payload,
        "rationale": option.rationale or f"corrected by {option.strategy}",
        "retry_failed_task": True,
    }
    steps = [dict(step) for step in option.steps]
    for step in steps:
        step.pop("retry_failed_task", None)
    return {"steps": [*steps, retry], "rationale": option.rationale}
