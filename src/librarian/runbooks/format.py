"""The runbook file format: the design's YAML, validated by a JSON schema and a graph check.

A runbook (``docs/runbooks.md`` has the whole reference)::

    name: Disk usage investigation
    version: 1.0
    category: linux
    tags: [disk]
    trigger_patterns:
      symptoms: [disk full, no space left on device]
      services: [storage]
      error_patterns: ["No space left on device"]
    variables:
      path: /var/log        # a default; ``null`` makes it required per run
    steps:
      - step: 1
        title: Measure the directory
        action_type: bash
        command: du -sk {{path}}
        extract:
          kilobytes: "regex:^(\\d+)"
        on_success: 2
      - step: 2
        title: Is it large?
        action_type: conditional
        condition: "{{kilobytes}} > 1000000"
        if_true: 3
        if_false: 4
      ...

Problems are reported together, each naming the file, the step and the field: every schema problem
(wrong types, unknown fields); when the schema holds, every field and expression problem and, unless
step numbers repeat, every graph problem. The graph check refuses targets that name no step, steps
no path reaches, a runbook without a final step, and loops none of whose steps has ``max_visits``
(a loop must be bounded, or a run could go on forever).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from librarian.errors import InvalidInputError
from librarian.runbooks.templates import TemplateError, placeholders
from librarian.safe_yaml import check_depth, load_json, load_yaml

ACTION_TYPES = ("bash", "agent_prompt", "manual", "conditional", "approval")
# Where a step's outcome leads besides another step: stop the run as failed, or the next step in the
# file's order.
ABORT = "abort"
CONTINUE = "continue"
MAX_RUNBOOK_BYTES = 1024 * 1024
MAX_STEPS = 500
# What the text of an outcome target may be: a step number, ``abort`` or ``continue``.
_TARGET: dict[str, Any] = {
    "oneOf": [{"type": "integer", "minimum": 1}, {"enum": [ABORT, CONTINUE]}],
}
_EXTRACTOR: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "jsonpath": {"type": "string", "minLength": 1},
                "regex": {"type": "string", "minLength": 1},
                "group": {"type": ["integer", "string"]},
            },
            "oneOf": [{"required": ["jsonpath"]}, {"required": ["regex"]}],
        },
    ]
}
VARIABLE_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"

RUNBOOK_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["name", "steps"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 255},
        "version": {"type": ["string", "number"]},
        "description": {"type": "string"},
        "category": {"type": "string", "maxLength": 100},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "trigger_patterns": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "symptoms": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "services": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "error_patterns": {"type": "array", "items": {"type": "string", "minLength": 1}},
            },
        },
        "variables": {
            "type": "object",
            "propertyNames": {"pattern": VARIABLE_NAME},
            "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
        },
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_STEPS,
            "items": {
                "type": "object",
                "required": ["step", "title", "action_type"],
                "additionalProperties": False,
                "properties": {
                    "step": {"type": "integer", "minimum": 1},
                    "title": {"type": "string", "minLength": 1, "maxLength": 500},
                    "description": {"type": "string"},
                    "action_type": {"enum": list(ACTION_TYPES)},
                    "command": {"type": "string", "minLength": 1},
                    "prompt": {"type": "string", "minLength": 1},
                    "condition": {"type": "string", "minLength": 1},
                    "expected_output": {"type": "string"},
                    "extract": {
                        "type": "object",
                        "propertyNames": {"pattern": VARIABLE_NAME},
                        "additionalProperties": _EXTRACTOR,
                    },
                    "on_success": _TARGET,
                    "on_failure": _TARGET,
                    "if_true": _TARGET,
                    "if_false": _TARGET,
                    "final_step": {"type": "boolean"},
                    "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 86_400},
                    "retries": {"type": "integer", "minimum": 0, "maximum": 20},
                    "retry_delay_seconds": {"type": "number", "minimum": 0, "maximum": 3600},
                    "max_visits": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "approvers": {"type": "array", "items": {"type": "string", "minLength": 1}},
                    "network": {"type": "boolean"},
                },
            },
        },
    },
}

# The field each action type needs, and the fields that only make sense for some action types.
_REQUIRED_FIELD = {"bash": "command", "agent_prompt": "prompt", "conditional": "condition"}
_ONLY_FOR = {
    "command": ("bash",),
    "condition": ("conditional",),
    "if_true": ("conditional",),
    "if_false": ("conditional",),
    "approvers": ("approval",),
    "network": ("bash",),
    "extract": ("bash", "agent_prompt", "manual"),
}


class RunbookInvalidError(InvalidInputError):
    """A runbook breaks the format; ``problems`` lists every problem found, each naming its place."""

    def __init__(self, origin: str, problems: list[str]) -> None:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        super().__init__(f"{origin}: {shown}", hint="see docs/runbooks.md for the runbook format")
        self.origin = origin
        self.problems = problems

    def to_dict(self) -> dict[str, object]:
        """The error with every problem listed (interfaces return it as is)."""
        return {**super().to_dict(), "origin": self.origin, "problems": list(self.problems)}


@dataclass(frozen=True)
class Step:
    """One step of a runbook, as the file gives it."""

    number: int
    title: str
    action_type: str
    description: str = ""
    command: str | None = None
    prompt: str | None = None
    condition: str | None = None
    expected_output: str | None = None
    extract: Mapping[str, Any] = field(default_factory=dict)
    on_success: int | str | None = None
    on_failure: int | str | None = None
    if_true: int | str | None = None
    if_false: int | str | None = None
    final_step: bool = False
    timeout_seconds: float | None = None
    retries: int = 0
    retry_delay_seconds: float = 0.0
    max_visits: int | None = None
    approvers: tuple[str, ...] = ()
    network: bool = False

    @property
    def label(self) -> str:
        """``step 3 ("Check logs")`` for messages."""
        return f"step {self.number} ({self.title!r})"

    @property
    def template(self) -> str:
        """The text this step renders: its command, prompt or condition (a manual step's prompt)."""
        return self.command or self.prompt or self.condition or ""


@dataclass(frozen=True)
class Runbook:
    """A validated runbook: its metadata, variables with their defaults, and steps in file order."""

    name: str
    steps: tuple[Step, ...]
    version_label: str = ""
    description: str = ""
    category: str | None = None
    tags: tuple[str, ...] = ()
    symptoms: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    error_patterns: tuple[str, ...] = ()
    variables: Mapping[str, Any] = field(default_factory=dict)
    document: Mapping[str, Any] = field(default_factory=dict)

    def step(self, number: int) -> Step:
        """The step numbered ``number``."""
        for step in self.steps:
            if step.number == number:
                return step
        raise KeyError(number)

    def next_in_order(self, number: int) -> int | None:
        """The number of the step after ``number`` in the file, or ``None`` after the last."""
        numbers = [step.number for step in self.steps]
        index = numbers.index(number)
        return numbers[index + 1] if index + 1 < len(numbers) else None

    @property
    def first(self) -> Step:
        """Where every run starts: the first step in the file."""
        return self.steps[0]

    @property
    def required_variables(self) -> list[str]:
        """Variables a run must be given: used in a template, and without a default."""
        produced = {name for step in self.steps for name in step.extract}
        used = {name for step in self.steps for name in placeholders(step.template)}
        defaults = {name for name, value in self.variables.items() if value is not None}
        return sorted(name for name in used - produced - defaults if not _builtin(name))

    def search_text(self) -> str:
        """What the runbook is about, for matching it by meaning: name, description, triggers, steps."""
        parts = [self.name, self.description, " ".join(self.tags), *self.symptoms, *self.services]
        parts.extend(step.title for step in self.steps)
        return "\n".join(part for part in parts if part)


def _builtin(name: str) -> bool:
    return name == "all_previous_outputs" or (
        name.startswith("step_") and name.endswith("_output") and name[5:-7].isdigit()
    )


def load_runbook(path: Path) -> Runbook:
    """Read and validate a runbook file (``.yaml``/``.yml`` or ``.json``).

    Raises:
        RunbookInvalidError: the file breaks the format (every problem, each with its step and field).
        InvalidInputError: the file cannot be read or parsed.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read runbook file {path}: {exc.strerror}") from exc
    return parse_runbook_text(raw, origin=str(path), json_format=path.suffix.lower() == ".json")


def parse_runbook_text(text: str | bytes, *, origin: str = "runbook", json_format: bool = False) -> Runbook:
    """Parse and validate a runbook given as YAML (or JSON) text."""
    raw = text.encode() if isinstance(text, str) else text
    if json_format:
        data = load_json(raw, origin, max_bytes=MAX_RUNBOOK_BYTES)
    else:
        data = load_yaml(raw, origin, max_bytes=MAX_RUNBOOK_BYTES)
        check_depth(data, origin)
    return parse_runbook(data, origin=origin)


def parse_runbook(data: Any, *, origin: str = "runbook") -> Runbook:
    """Validate a decoded runbook document and return the runbook.

    Raises:
        RunbookInvalidError: every problem found, each naming the step and the field.
    """
    validator = jsonschema.Draft202012Validator(RUNBOOK_SCHEMA)
    schema_errors = sorted(validator.iter_errors(data), key=lambda error: list(error.absolute_path))
    if schema_errors:
        raise RunbookInvalidError(origin, _unique([_describe(error, data) for error in schema_errors]))
    steps = tuple(_step(item) for item in data["steps"])
    triggers = data.get("trigger_patterns") or {}
    runbook = Runbook(
        name=data["name"].strip(),
        steps=steps,
        version_label=str(data.get("version", "")),
        description=data.get("description", ""),
        category=data.get("category"),
        tags=tuple(data.get("tags", ())),
        symptoms=tuple(triggers.get("symptoms", ())),
        services=tuple(triggers.get("services", ())),
        error_patterns=tuple(triggers.get("error_patterns", ())),
        variables=dict(data.get("variables") or {}),
        document=data,
    )
    problems = check_runbook(runbook)
    if problems:
        raise RunbookInvalidError(origin, problems)
    return runbook


def _step(item: Mapping[str, Any]) -> Step:
    return Step(
        number=item["step"],
        title=item["title"].strip(),
        action_type=item["action_type"],
        description=item.get("description", ""),
        command=item.get("command"),
        prompt=item.get("prompt"),
        condition=item.get("condition"),
        expected_output=item.get("expected_output"),
        extract=dict(item.get("extract") or {}),
        on_success=item.get("on_success"),
        on_failure=item.get("on_failure"),
        if_true=item.get("if_true"),
        if_false=item.get("if_false"),
        final_step=bool(item.get("final_step", False)),
        timeout_seconds=item.get("timeout_seconds"),
        retries=item.get("retries", 0),
        retry_delay_seconds=float(item.get("retry_delay_seconds", 0)),
        max_visits=item.get("max_visits"),
        approvers=tuple(item.get("approvers", ())),
        network=bool(item.get("network", False)),
    )


def check_runbook(runbook: Runbook) -> list[str]:
    """Problems beyond the schema: fields per action type, templates, expressions, the step graph."""
    from librarian.runbooks.conditions import ConditionError, check_condition
    from librarian.runbooks.extract import ExtractError, check_extractor

    problems: list[str] = []
    numbers: set[int] = set()
    for step in runbook.steps:
        if step.number in numbers:
            problems.append(f"{step.label}, field step: the number {step.number} is used twice")
        numbers.add(step.number)
        needed = _REQUIRED_FIELD.get(step.action_type)
        if needed is not None and getattr(step, needed) is None:
            problems.append(f"{step.label}, field {needed}: a {step.action_type} step needs one")
        if step.action_type in ("manual", "approval") and step.prompt is None and not step.description:
            problems.append(f"{step.label}, field prompt: tell the person what to do (prompt or description)")
        for name, allowed in _ONLY_FOR.items():
            value = getattr(step, name)
            if value not in (None, False, (), {}) and step.action_type not in allowed:
                problems.append(f"{step.label}, field {name}: not used by a {step.action_type} step")
        for name in ("command", "prompt", "condition"):
            text = getattr(step, name)
            if text is None:
                continue
            try:
                placeholders(text)
            except TemplateError as exc:
                problems.append(f"{step.label}, field {name}: {exc}")
        if step.condition is not None:
            try:
                check_condition(step.condition)
            except (ConditionError, TemplateError) as exc:
                problems.append(f"{step.label}, field condition: {exc}")
        for name, spec in step.extract.items():
            try:
                check_extractor(spec)
            except ExtractError as exc:
                problems.append(f"{step.label}, field extract.{name}: {exc}")
    for pattern_index, pattern in enumerate(runbook.error_patterns):
        import re

        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(
                f"field trigger_patterns.error_patterns[{pattern_index}]: not a regular expression: {exc}"
            )
    if len(numbers) < len(runbook.steps):  # the graph is ambiguous until the numbers are unique
        return problems
    return problems + _graph_problems(runbook) + _template_problems(runbook)


def outcomes(runbook: Runbook, step: Step) -> dict[str, int | str]:
    """Where each outcome of ``step`` leads: a step number, or ``abort`` (an end that fails).

    ``continue`` and an omitted ``on_success`` lead to the next step in the file. A final step's
    success ends the run (``end``).
    """
    after = runbook.next_in_order(step.number)

    def resolve(target: int | str | None, default: int | str | None) -> int | str:
        if target is None:
            target = default
        if target == CONTINUE:
            target = after
        return "end" if target is None else target

    if step.action_type == "conditional":
        return {"if_true": resolve(step.if_true, CONTINUE), "if_false": resolve(step.if_false, CONTINUE)}
    success = "end" if step.final_step and step.on_success is None else resolve(step.on_success, CONTINUE)
    return {"on_success": success, "on_failure": resolve(step.on_failure, ABORT)}


def _graph_problems(runbook: Runbook) -> list[str]:
    problems: list[str] = []
    numbers = {step.number for step in runbook.steps}
    edges: dict[int, list[int]] = {}
    for step in runbook.steps:
        targets = outcomes(runbook, step)
        edges[step.number] = []
        for field_name, target in targets.items():
            if isinstance(target, int):
                if target not in numbers:
                    problems.append(f"{step.label}, field {field_name}: no step {target}")
                else:
                    edges[step.number].append(target)
            elif target == "end" and not step.final_step and field_name != "on_failure":
                problems.append(
                    f"{step.label}, field {field_name}: the run would end after the last step, which is "
                    "not a final step (add final_step: true, or a target)"
                )
    if not any(step.final_step for step in runbook.steps):
        problems.append("field steps: no step has final_step: true, so no run can finish")
    reached = _reachable(runbook.first.number, edges)
    for step in runbook.steps:
        if step.number not in reached:
            problems.append(
                f"{step.label}: unreachable (no path from step {runbook.first.number} leads to it)"
            )
    unbounded = {
        n: [t for t in targets if runbook.step(t).max_visits is None] for n, targets in edges.items()
    }
    cycle = _cycle({n: t for n, t in unbounded.items() if runbook.step(n).max_visits is None})
    if cycle:
        path = " -> ".join(str(n) for n in cycle)
        problems.append(f"steps {path}: a loop with no bound (give one of its steps max_visits)")
    return problems


def _template_problems(runbook: Runbook) -> list[str]:
    """``{{step_N_output}}`` must name a step; an extracted name must not shadow a builtin."""
    problems = []
    numbers = {step.number for step in runbook.steps}
    for step in runbook.steps:
        try:
            names = placeholders(step.template)
        except TemplateError:  # reported with its field already
            names = []
        for name in names:
            names_a_step = name.startswith("step_") and name.endswith("_output") and name[5:-7].isdigit()
            if names_a_step and int(name[5:-7]) not in numbers:
                problems.append(f"{step.label}, field {_template_field(step)}: {{{{{name}}}}} names no step")
        for name in step.extract:
            if _builtin(name):
                problems.append(f"{step.label}, field extract.{name}: that name is reserved for step outputs")
    return problems


def _template_field(step: Step) -> str:
    return "command" if step.command else "prompt" if step.prompt else "condition"


def _reachable(start: int, edges: Mapping[int, list[int]]) -> set[int]:
    seen = {start}
    todo = [start]
    while todo:
        for target in edges.get(todo.pop(), []):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _cycle(edges: Mapping[int, list[int]]) -> list[int] | None:
    """A cycle of ``edges`` as a closed path (first node repeated at the end), or ``None``."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    path: list[int] = []

    def visit(node: int) -> list[int] | None:
        state[node] = 1
        path.append(node)
        for target in edges.get(node, []):
            if target not in edges:
                continue
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in edges:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _describe(error: jsonschema.ValidationError, data: Any) -> str:
    """``step 3 ("Check logs"), field on_success: ...`` from a schema error."""
    path = list(error.absolute_path)
    if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
        item = data["steps"][path[1]]
        if isinstance(item, dict) and isinstance(item.get("step"), int):
            title = item.get("title")
            label = f"step {item['step']}" + (f" ({title!r})" if isinstance(title, str) else "")
        else:
            label = f"steps[{path[1]}]"
        fields = ".".join(str(part) for part in path[2:])
        if error.validator == "required":
            return f"{label}: {error.message}"
        return f"{label}, field {fields or '(step)'}: {_message(error)}"
    where = ".".join(str(part) for part in path) or "(top level)"
    return f"field {where}: {_message(error)}"


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "oneOf" and error.schema is _TARGET:
        return f"{error.instance!r} is not a step number, 'abort' or 'continue'"
    if error.validator == "enum" and list(error.absolute_path)[-1:] == ["action_type"]:
        return f"{error.instance!r} is not an action type (use one of {', '.join(ACTION_TYPES)})"
    return error.message


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
