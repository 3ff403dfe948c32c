"""Dry run: every step rendered with the run's variables, and the path a run would take. Nothing runs.

``bash`` steps are rendered exactly as they would be executed (the argument vector, or the shell
script with its environment), so a reviewer sees that a value stays one argument. The path follows
each step's success; a condition is evaluated when its values are known (variables, or values the
caller ``assume``s for what earlier steps would extract) and otherwise marked undetermined and
followed on its ``if_true`` branch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from librarian.runbooks.conditions import ConditionError, evaluate
from librarian.runbooks.format import Runbook, Step, outcomes
from librarian.runbooks.templates import TemplateError, placeholders, render_command, render_text


def _shown(values: Mapping[str, Any], template: str) -> dict[str, Any]:
    """The values, with a visible marker for each one a real run would only know later."""
    shown = dict(values)
    for name in placeholders(template):
        shown.setdefault(name, f"<{name}>")
    return shown


def render_step(step: Step, values: Mapping[str, Any]) -> dict[str, Any]:
    """One step as it would run with ``values`` (missing values shown as ``<name>``)."""
    entry: dict[str, Any] = {"step": step.number, "title": step.title, "action_type": step.action_type}
    shown = _shown(values, step.template)
    try:
        if step.command is not None:
            command = render_command(step.command, shown)
            entry.update(command=command.display, execution=command.payload())
        elif step.prompt is not None or step.action_type in ("manual", "approval"):
            entry["prompt"] = render_text(step.prompt or step.description, shown)
        if step.condition is not None:
            entry["condition"] = step.condition.strip()
    except TemplateError as exc:
        entry["error"] = str(exc)
    if step.approvers:
        entry["approvers"] = list(step.approvers)
    return entry


def dry_run(
    runbook: Runbook, variables: Mapping[str, Any], assume: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The rendered steps and the path, plus the variables a real run would still need."""
    values = {name: value for name, value in runbook.variables.items() if value is not None}
    values.update(variables)
    known = {**values, **(assume or {})}
    steps = []
    for step in runbook.steps:
        entry = render_step(step, known)
        entry["outcomes"] = outcomes(runbook, step)
        steps.append(entry)
    path: list[dict[str, Any]] = []
    current: int | str = runbook.first.number
    seen: dict[int, int] = {}
    while isinstance(current, int) and len(path) < 200:
        step = runbook.step(current)
        seen[current] = seen.get(current, 0) + 1
        if step.max_visits is not None and seen[current] > step.max_visits:
            path.append({"step": current, "note": f"stops: max_visits ({step.max_visits}) reached"})
            break
        visit: dict[str, Any] = {"step": step.number, "title": step.title}
        targets = outcomes(runbook, step)
        if step.action_type == "conditional":
            assert step.condition is not None
            try:
                branch = "if_true" if evaluate(step.condition, known) else "if_false"
                visit["branch"] = branch
            except ConditionError as exc:
                branch = "if_true"
                visit.update(branch=branch, undetermined=str(exc))
            current = targets[branch]
        else:
            current = targets["on_success"]
        visit["next"] = current
        path.append(visit)
    missing = [name for name in runbook.required_variables if name not in values]
    return {"name": runbook.name, "steps": steps, "path": path, "missing_variables": missing}
