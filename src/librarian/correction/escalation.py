"""The escalation report: what a person needs when the loop could not fix a failure on its own.

It holds the goal, every failed command of the task with its exit code and stderr, the detected
version, each research attempt with its top snippets, the candidate corrections that were considered
and why none was good enough, any clarification asked and answered, and what to try next. It is
written as Markdown (to read) and JSON (for tools), with secrets and home directories scrubbed
(:mod:`librarian.research.scrub`): the report is meant to be pasted into a ticket.

Example:
    >>> report = EscalationReport(goal="publish the site", task_key="upload", reason="no candidate")
    >>> report.to_markdown().splitlines()[0]
    '# Escalation: `upload` needs a person'
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from librarian.research.scrub import scrub

__all__ = ["EscalationReport", "FailedCommand"]

_OUTPUT_LIMIT = 4000
_EXCERPT_LIMIT = 400
_FILE_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class FailedCommand:
    """One failed run of the task's command.

    Attributes:
        argv: the command line.
        exit_code: its exit status (``None`` when it did not exit normally).
        stderr: its standard error (scrubbed, last 4000 characters).
        stdout: its standard output (scrubbed, last 4000 characters).
        classification: what the trigger rules said (``category``, ``rule_id``, ``correctable``).
        code: for a code task, the source that failed (``argv`` is then empty).
    """

    argv: list[str]
    exit_code: int | None
    stderr: str
    stdout: str = ""
    classification: dict[str, Any] = field(default_factory=dict)
    code: str | None = None

    @property
    def key(self) -> tuple[str, ...] | str:
        """What ran, comparably: the argv, or the code."""
        return self.code if self.code is not None else tuple(self.argv)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready, scrubbed copy."""
        return {
            **({"code": scrub(self.code)[-_OUTPUT_LIMIT:]} if self.code is not None else {}),
            "argv": [scrub(token) for token in self.argv],
            "exit_code": self.exit_code,
            "stderr": scrub(self.stderr)[-_OUTPUT_LIMIT:],
            "stdout": scrub(self.stdout)[-_OUTPUT_LIMIT:],
            "classification": dict(self.classification),
        }


@dataclass(frozen=True)
class EscalationReport:
    """Everything the loop knew when it gave up on a failure.

    Attributes:
        goal: the workflow's goal.
        task_key: the failed task.
        reason: why the loop escalates (one sentence).
        workflow_id: the workflow, when known.
        tool: the failing tool.
        version: the detected version (``None`` when it could not be detected).
        version_output: what the version command printed.
        failures: every failed command of the task, oldest first.
        research: each research attempt (``ResearchAttempt.to_dict()``), in order.
        candidates: the candidates considered (``Candidate.to_dict()`` plus ``rejected_because``).
        threshold: the confidence a candidate needed.
        clarification: questions asked of the user and their answers.
        next_steps: what a person could try.
        runbooks: the team's runbooks that match the failure (id, name, score, reasons).
        created_at: when the report was made (UTC, ISO 8601).
    """

    goal: str
    task_key: str
    reason: str
    workflow_id: str | None = None
    tool: str | None = None
    version: str | None = None
    version_output: str = ""
    failures: list[FailedCommand] = field(default_factory=list)
    research: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    threshold: float | None = None
    clarification: list[dict[str, str]] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    runbooks: list[dict[str, Any]] = field(default_factory=list)
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (scrubbed)."""
        return {
            "goal": scrub(self.goal),
            "workflow_id": self.workflow_id,
            "task_key": self.task_key,
            "reason": scrub(self.reason),
            "tool": self.tool,
            "version": self.version,
            "version_output": scrub(self.version_output)[:_EXCERPT_LIMIT],
            "failures": [failure.to_dict() for failure in self.failures],
            "research": [_scrub_research(attempt) for attempt in self.research],
            "candidates": [_scrub_candidate(candidate) for candidate in self.candidates],
            "threshold": self.threshold,
            "clarification": [{k: scrub(v) for k, v in item.items()} for item in self.clarification],
            "next_steps": [scrub(step) for step in self.next_steps],
            "runbooks": [dict(runbook) for runbook in self.runbooks],
            "created_at": self.created_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EscalationReport:
        """A report from :meth:`to_dict`'s output (as stored on the timeline)."""

        def items(name: str) -> list[dict[str, Any]]:
            value = data.get(name)
            return [dict(item) for item in value if isinstance(item, dict)] if isinstance(value, list) else []

        threshold = data.get("threshold")
        return cls(
            goal=str(data.get("goal") or ""),
            task_key=str(data.get("task_key") or ""),
            reason=str(data.get("reason") or ""),
            workflow_id=data.get("workflow_id") or None,
            tool=data.get("tool") or None,
            version=data.get("version") or None,
            version_output=str(data.get("version_output") or ""),
            failures=[
                FailedCommand(
                    argv=[str(token) for token in item.get("argv") or []],
                    exit_code=item.get("exit_code"),
                    stderr=str(item.get("stderr") or ""),
                    stdout=str(item.get("stdout") or ""),
                    classification=dict(item.get("classification") or {}),
                    code=str(item["code"]) if item.get("code") is not None else None,
                )
                for item in items("failures")
            ],
            research=items("research"),
            candidates=items("candidates"),
            threshold=float(threshold) if isinstance(threshold, int | float) else None,
            clarification=[{str(k): str(v) for k, v in item.items()} for item in items("clarification")],
            next_steps=[str(step) for step in data.get("next_steps") or []],
            runbooks=items("runbooks"),
            created_at=str(data.get("created_at") or datetime.now(UTC).isoformat()),
        )

    def to_json(self) -> str:
        """The report as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=str)

    def to_markdown(self) -> str:
        """The report as Markdown a person can read top to bottom."""
        data = self.to_dict()
        lines = [
            f"# Escalation: `{self.task_key}` needs a person",
            "",
            f"**Goal:** {data['goal']}",
            "",
            f"**Why escalated:** {data['reason']}",
            "",
        ]
        if self.workflow_id:
            lines += [
                f"**Workflow:** `{self.workflow_id}` (`librarian workflow status {self.workflow_id}`)",
                "",
            ]
        version = data["version"] or "not detected"
        lines += [f"**Tool:** `{self.tool or 'unknown'}`, version **{version}**", ""]
        if data["version_output"]:
            lines += ["```text", data["version_output"], "```", ""]
        lines += ["## Failed commands", ""]
        for number, failure in enumerate(data["failures"], start=1):
            classification = failure["classification"]
            ran = "the task's code" if failure.get("code") is not None else f"`{shlex.join(failure['argv'])}`"
            lines += [
                f"{number}. {ran} exited with {failure['exit_code']}"
                + (
                    f" ({classification.get('category')}, rule `{classification.get('rule_id')}`)"
                    if classification
                    else ""
                ),
                "",
                "   ```text",
                *[
                    f"   {line}"
                    for line in (failure["stderr"] or failure["stdout"] or "(no output)").splitlines()
                ],
                "   ```",
                "",
            ]
        lines += ["## Research", ""]
        if not data["research"]:
            lines += ["No research was possible.", ""]
        for number, attempt in enumerate(data["research"], start=1):
            lines += [
                f"### Attempt {number}: `{attempt.get('query')}`",
                "",
                f"SDK `{attempt.get('sdk_name')}`, version asked `{attempt.get('version')}`, used "
                f"`{attempt.get('resolved_version')}`; confidence {float(attempt.get('confidence') or 0):.2f}"
                + (f". {attempt['version_note']}" if attempt.get("version_note") else "")
                + (f". Error: {attempt['message']}" if attempt.get("error") else ""),
                "",
            ]
            for snippet in attempt.get("top_snippets") or []:
                lines.append(
                    f"- `{snippet.get('entity_name')}` (score {float(snippet.get('score') or 0):.2f}) "
                    f"<{snippet.get('source_url')}>"
                )
            lines.append("")
        lines += ["## Candidate corrections", ""]
        if not data["candidates"]:
            lines += ["No strategy proposed a correction.", ""]
        for candidate in data["candidates"]:
            shown = (
                "; ".join(str(e.get("summary") or "") for e in candidate.get("edits") or [])
                if candidate.get("code") is not None
                else shlex.join(candidate.get("argv") or [])
            )
            lines += [
                f"- `{shown}`: {candidate.get('strategy')}, confidence "
                f"{float(candidate.get('confidence') or 0):.2f}"
                + (f" (threshold {self.threshold:.2f})" if self.threshold is not None else "")
                + (
                    f"; rejected: {candidate['rejected_because']}"
                    if candidate.get("rejected_because")
                    else ""
                ),
                f"  - {candidate.get('rationale', '')}",
            ]
        lines.append("")
        if data["clarification"]:
            lines += ["## Clarification", ""]
            for item in data["clarification"]:
                lines += [f"- Q: {item.get('question', '')}", f"  A: {item.get('answer', '(no answer)')}"]
            lines.append("")
        if data["next_steps"]:
            lines += ["## What to try next", ""]
            lines += [f"- {step}" for step in data["next_steps"]]
            lines.append("")
        if data["runbooks"]:
            lines += ["## Runbooks that match", ""]
            for runbook in data["runbooks"]:
                lines.append(
                    f"- **{runbook.get('name')}** (runbook {runbook.get('id')}, score "
                    f"{float(runbook.get('score') or 0):.2f}): {'; '.join(runbook.get('reasons') or [])}. "
                    f"Run it: `librarian runbook run {runbook.get('id')}`"
                )
            lines.append("")
        lines += [f"_Report made {self.created_at}._", ""]
        return "\n".join(lines)

    def write(self, directory: Path) -> tuple[Path, Path]:
        """Write ``<workflow>-<task>.md`` and ``.json`` into ``directory``; returns both paths."""
        directory.mkdir(parents=True, exist_ok=True)
        stem = _FILE_SAFE.sub("_", f"{self.workflow_id or 'workflow'}-{self.task_key}")[:200]
        markdown = directory / f"{stem}.md"
        document = directory / f"{stem}.json"
        markdown.write_text(self.to_markdown(), encoding="utf-8")
        document.write_text(self.to_json() + "\n", encoding="utf-8")
        return markdown, document


def _scrub_research(attempt: dict[str, Any]) -> dict[str, Any]:
    cleaned = dict(attempt)
    cleaned["query"] = scrub(str(attempt.get("query") or ""))
    cleaned["top_snippets"] = [
        {**snippet, "excerpt": scrub(str(snippet.get("excerpt") or ""))}
        for snippet in attempt.get("top_snippets") or []
    ]
    return cleaned


def _scrub_candidate(candidate: dict[str, Any]) -> dict[str, Any]:
    cleaned = dict(candidate)
    cleaned["argv"] = [scrub(str(token)) for token in candidate.get("argv") or []]
    cleaned["rationale"] = scrub(str(candidate.get("rationale") or ""))
    return cleaned
