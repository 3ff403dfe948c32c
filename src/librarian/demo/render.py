"""The demo as a person reads it: the plan, a timeline per run, the DAG before and after surgery.

The timeline is the workflow's event log (:func:`librarian.correction.timeline.read_timeline`): the
runtime's events (a task failed, surgery, the retry succeeded, the strategy's reward) interleaved with
the loop's steps (trigger, version, reuse, research hits, the correction and its rationale, what was
learned), each with the time since the workflow started.
"""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from librarian.correction.escalation import EscalationReport
from librarian.correction.timeline import STEP_KIND, TimelineEvent
from librarian.demo.scenario import DemoResult, RunResult
from librarian.runtime.spec import WorkflowSpec

__all__ = ["render_demo", "spec_tree"]

# The runtime events worth a line; dispatch and lease bookkeeping would drown the story.
_RUNTIME_LABELS = {
    "surgery": ("surgery", "magenta"),
    "strategy_rewarded": ("reward", "green"),
    "workflow_success": ("done", "bold green"),
    "workflow_failed": ("done", "bold red"),
}
_STEP_LABELS = {"session_cache": "cache", "knowledge_base": "knowledge", "fix_not_applied": "not applied"}
_SUMMARY_LIMIT = 400
_STEP_STYLES = {
    "trigger": "yellow",
    "version": "cyan",
    "session_cache": "cyan",
    "knowledge_base": "cyan",
    "research": "blue",
    "candidates": "blue",
    "llm": "blue",
    "correction": "bold magenta",
    "escalation": "bold red",
    "learned": "bold green",
    "fix_failed": "red",
    "fix_not_applied": "dim",
}


def render_demo(result: DemoResult, console: Console) -> None:
    """Print the whole demo: documentation, each run's timeline and outcome, the DAGs, a summary."""
    docs = result.docs
    console.print(
        f"[bold]Documentation:[/] {escape(str(docs.get('uri')))} "
        + ("indexed now" if docs.get("ingested") else "already indexed")
        + f" (aws-cli {docs.get('sdk_version')}); the CLI reports version {result.tool_version}",
        highlight=False,
    )
    if result.runs:
        console.print("\n[bold]Plan[/] (the planner's static knowledge):")
        for number, task in enumerate(result.runs[0].spec.tasks, start=1):
            argv = task.payload.get("argv")
            what = shlex.join(argv) if isinstance(argv, list) else f"write {task.payload.get('path')}"
            console.print(f"  {number}. [bold]{escape(task.id)}[/]: {escape(what)}", highlight=False)
    for run in result.runs:
        _render_run(run, console)
    if result.runs:
        console.print("\n[bold]DAG before surgery[/]")
        console.print(spec_tree(result.runs[0].spec))
        for run in result.runs:
            if run.report is not None:
                console.print(f"\n[bold]DAG after surgery, run {run.number}[/]")
                console.print(run.report.tree())
    _render_summary(result, console)


def spec_tree(spec: WorkflowSpec) -> Tree:
    """The submitted workflow as a tree (every task pending, dependencies named)."""
    root = Tree(f"[bold]{escape(spec.name)}[/] [dim]{escape(spec.goal)}[/]")
    for task in spec.tasks:
        after = f" [dim]after {escape(', '.join(task.depends_on))}[/]" if task.depends_on else ""
        root.add(f"[dim]pending[/]     [bold]{escape(task.id)}[/] ({task.executor_type}){after}")
    return root


def _render_run(run: RunResult, console: Console) -> None:
    console.rule(f"run {run.number}")
    start = run.timeline[0].at if run.timeline else None
    for event in run.timeline:
        line = _line(event)
        if line is None:
            continue
        label, style, text = line
        offset = (event.at - start).total_seconds() if start is not None else 0.0
        task = f"{event.task:<13}" if event.task else " " * 13
        console.print(
            f"[dim]+{offset:6.2f}s[/] [{style}]{label:<11}[/] {escape(task)} {escape(_short(text))}",
            highlight=False,
            soft_wrap=True,
        )
    outcome = "[bold green]succeeded[/]" if run.succeeded else "[bold red]failed[/]"
    console.print(
        f"\nrun {run.number} {outcome}: {run.research_calls} research call(s), strategy "
        f"{run.strategy or '-'} ({run.source or '-'}); final command "
        f"[bold]{escape(shlex.join(run.final_command))}[/]",
        highlight=False,
    )
    if run.correction_seconds is not None:
        console.print(
            f"correction took {run.correction_seconds:.3f} s from the failure to the corrected retry being "
            f"scheduled; {run.failure_to_success_seconds or 0:.3f} s from the failure to the successful "
            "retry",
            highlight=False,
        )
    console.print(f"tags read back from the S3 server: {run.object_tags or 'none'}", highlight=False)
    if run.escalation is not None:
        console.print("\n[bold red]The loop could not fix this on its own. Escalation report:[/]")
        console.print(Markdown(EscalationReport.from_dict(run.escalation).to_markdown()))


def _line(event: TimelineEvent) -> tuple[str, str, str] | None:
    if event.kind == STEP_KIND:
        return (
            _STEP_LABELS.get(event.stage, event.stage),
            _STEP_STYLES.get(event.stage, "white"),
            event.summary,
        )
    if event.kind == "result_applied":
        if event.to_status == "failed":
            return "failure", "bold red", event.summary
        return "success", "green", event.summary
    if event.kind in _RUNTIME_LABELS:
        label, style = _RUNTIME_LABELS[event.kind]
        return label, style, event.summary
    return None


def _short(text: str) -> str:
    return text if len(text) <= _SUMMARY_LIMIT else text[: _SUMMARY_LIMIT - 3] + "..."


def _render_summary(result: DemoResult, console: Console) -> None:
    table = Table("run", "succeeded", "research calls", "strategy", "correction s", "failure to success s")
    for run in result.runs:
        table.add_row(
            str(run.number),
            "yes" if run.succeeded else "no",
            str(run.research_calls),
            f"{run.strategy or '-'} ({run.source or '-'})",
            f"{run.correction_seconds:.3f}" if run.correction_seconds is not None else "-",
            f"{run.failure_to_success_seconds:.3f}" if run.failure_to_success_seconds is not None else "-",
        )
    console.print()
    console.print(table)
    console.print(f"object tags on the S3 server after the last run: {result.object_tags}", highlight=False)
