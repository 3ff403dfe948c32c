"""Workflow specifications: YAML or JSON files validated with a JSON schema, or built from Python.

A workflow file::

    name: build-site
    goal: Build the static site and publish it
    tasks:
      - id: fetch
        description: Fetch the sources
        executor_type: command_executor
        payload: {argv: [git, clone, https://example.org/site.git]}
      - id: build
        executor_type: command_executor
        payload: {argv: [make, -C, site]}
        depends_on: [fetch]

Errors name the file, the task and the field; unknown dependencies and cycles are refused.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

import jsonschema

from librarian.errors import InvalidInputError
from librarian.safe_yaml import check_depth, load_json, load_yaml

# A workflow file is refused past these: a few hundred bytes of YAML aliases can stand for billions of
# nodes, and every node is validated.
MAX_WORKFLOW_BYTES = 10 * 1024 * 1024
MAX_WORKFLOW_NODES = 500_000

TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"

WORKFLOW_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["tasks"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 255},
        "goal": {"type": "string"},
        "tasks": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "executor_type", "payload"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": TASK_ID_PATTERN},
                    "description": {"type": "string"},
                    "executor_type": {"type": "string", "minLength": 1, "maxLength": 64},
                    "payload": {"type": "object"},
                    "depends_on": {
                        "type": "array",
                        "items": {"type": "string"},
                        "uniqueItems": True,
                    },
                },
            },
        },
    },
}


@dataclass(frozen=True)
class TaskDefinition:
    """One task of a workflow file."""

    id: str
    executor_type: str
    payload: dict[str, Any]
    description: str = ""
    depends_on: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The task as it appears in a workflow file."""
        return {
            "id": self.id,
            "description": self.description,
            "executor_type": self.executor_type,
            "payload": self.payload,
            "depends_on": list(self.depends_on),
        }


@dataclass(frozen=True)
class WorkflowSpec:
    """A validated workflow: a name, the overall goal, and tasks in a dependency-consistent order."""

    name: str
    goal: str
    tasks: tuple[TaskDefinition, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The workflow as a JSON-ready document that :func:`parse_spec` accepts back."""
        return {"name": self.name, "goal": self.goal, "tasks": [task.to_dict() for task in self.tasks]}


def load_spec(path: Path, known_executor_types: Collection[str] | None = None) -> WorkflowSpec:
    """Read and validate a workflow file (``.yaml``/``.yml`` or ``.json``).

    Args:
        path: the workflow file.
        known_executor_types: when given, tasks naming another executor type are refused.

    Raises:
        InvalidInputError: the file is missing, unparsable or invalid; the message names the file,
            the task and the field.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read workflow file {path}: {exc.strerror}") from exc
    return parse_workflow_text(
        raw,
        origin=str(path),
        as_json=path.suffix.lower() == ".json",
        default_name=path.stem,
        known_executor_types=known_executor_types,
    )


def parse_workflow_text(
    text: str | bytes,
    *,
    origin: str = "workflow",
    as_json: bool = False,
    default_name: str = "workflow",
    known_executor_types: Collection[str] | None = None,
) -> WorkflowSpec:
    """Validate a workflow written as YAML (or JSON, with ``as_json``), under the same size limits as a file.

    The text is untrusted (a REST or MCP caller's): it is parsed with the bounded loaders of
    :mod:`librarian.safe_yaml`, so an alias bomb or a deeply nested document is refused, not expanded.

    Raises:
        InvalidInputError: the text is unparsable or the workflow invalid; the message names ``origin``,
            the line, the task and the field.
    """
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if as_json:
        data = load_json(raw, origin, max_bytes=MAX_WORKFLOW_BYTES)
    else:
        data = load_yaml(raw, origin, max_bytes=MAX_WORKFLOW_BYTES, max_nodes=MAX_WORKFLOW_NODES)
        check_depth(data, origin)
    return parse_spec(
        data, origin=origin, default_name=default_name, known_executor_types=known_executor_types
    )


def parse_spec(
    data: Any,
    *,
    origin: str = "workflow",
    default_name: str = "workflow",
    known_executor_types: Collection[str] | None = None,
) -> WorkflowSpec:
    """Validate a decoded workflow document and return the spec.

    Raises:
        InvalidInputError: the document breaks the schema, names an unknown dependency or executor
            type, repeats a task id or has a dependency cycle.
    """
    validator = jsonschema.Draft202012Validator(WORKFLOW_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda error: list(error.absolute_path))
    if errors:
        raise InvalidInputError(f"{origin}: {_describe(errors[0], data)}", hint="see docs/runtime.md")
    tasks = tuple(
        TaskDefinition(
            id=item["id"],
            executor_type=item["executor_type"],
            payload=item["payload"],
            description=item.get("description", ""),
            depends_on=tuple(item.get("depends_on", ())),
        )
        for item in data["tasks"]
    )
    name = data.get("name") or default_name
    goal = data.get("goal") or name
    spec = WorkflowSpec(name=name, goal=goal, tasks=tasks)
    return _checked(spec, origin, known_executor_types)


def _describe(error: jsonschema.ValidationError, data: Any) -> str:
    """``task 'build' (tasks[1]), field executor_type: ...`` from a schema error."""
    path = list(error.absolute_path)
    if len(path) >= 2 and path[0] == "tasks" and isinstance(path[1], int):
        item = data["tasks"][path[1]]
        label = (
            f"task {item['id']!r} (tasks[{path[1]}])"
            if isinstance(item, dict) and "id" in item
            else (f"tasks[{path[1]}]")
        )
        fields = ".".join(str(part) for part in path[2:])
        if error.validator == "required":
            return f"{label}: {error.message}"
        return f"{label}, field {fields or '(task)'}: {error.message}"
    where = ".".join(str(part) for part in path) or "(top level)"
    return f"field {where}: {error.message}"


def _checked(spec: WorkflowSpec, origin: str, known_executor_types: Collection[str] | None) -> WorkflowSpec:
    ids: set[str] = set()
    for index, task in enumerate(spec.tasks):
        if task.id in ids:
            raise InvalidInputError(
                f"{origin}: task {task.id!r} (tasks[{index}]), field id: repeated task id"
            )
        ids.add(task.id)
        if known_executor_types is not None and task.executor_type not in known_executor_types:
            raise InvalidInputError(
                f"{origin}: task {task.id!r} (tasks[{index}]), field executor_type: unknown executor type "
                f"{task.executor_type!r}",
                hint=f"known executor types: {', '.join(sorted(known_executor_types))}",
            )
    for index, task in enumerate(spec.tasks):
        for dependency in task.depends_on:
            if dependency not in ids:
                raise InvalidInputError(
                    f"{origin}: task {task.id!r} (tasks[{index}]), field depends_on: "
                    f"unknown task {dependency!r}"
                )
            if dependency == task.id:
                raise InvalidInputError(
                    f"{origin}: task {task.id!r} (tasks[{index}]), field depends_on: "
                    "a task cannot depend on itself"
                )
    order = topological_order({task.id: task.depends_on for task in spec.tasks}, origin)
    by_id = {task.id: task for task in spec.tasks}
    return WorkflowSpec(name=spec.name, goal=spec.goal, tasks=tuple(by_id[key] for key in order))


def topological_order(graph: dict[str, Iterable[str]], origin: str) -> list[str]:
    """Node ids with every dependency before its dependents, stable on the given order.

    Raises:
        InvalidInputError: the graph has a cycle (the message lists it).
    """
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for node, dependencies in graph.items():
        sorter.add(node, *dependencies)
    try:
        sorter.prepare()
    except CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise InvalidInputError(f"{origin}: dependency cycle {cycle}") from exc
    position = {node: index for index, node in enumerate(graph)}
    ordered: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=lambda node: position.get(node, len(position)))
        ordered.extend(ready)
        sorter.done(*ready)
    return ordered


class WorkflowBuilder:
    """Build a workflow from Python.

    Example:
        >>> spec = (
        ...     WorkflowBuilder("hello", goal="say hello")
        ...     .task("greet", "command_executor", {"argv": ["echo", "hello"]})
        ...     .task("again", "command_executor", {"argv": ["echo", "again"]}, depends_on=["greet"])
        ...     .build()
        ... )
        >>> [task.id for task in spec.tasks]
        ['greet', 'again']
    """

    def __init__(self, name: str, goal: str | None = None) -> None:
        self._name = name
        self._goal = goal or name
        self._tasks: list[dict[str, Any]] = []

    def task(
        self,
        task_id: str,
        executor_type: str,
        payload: dict[str, Any],
        *,
        description: str = "",
        depends_on: Iterable[str] = (),
    ) -> WorkflowBuilder:
        """Add a task; returns the builder so calls chain."""
        self._tasks.append(
            {
                "id": task_id,
                "description": description,
                "executor_type": executor_type,
                "payload": payload,
                "depends_on": list(depends_on),
            }
        )
        return self

    def build(self, known_executor_types: Collection[str] | None = None) -> WorkflowSpec:
        """Validate and return the spec (same checks as a workflow file).

        Raises:
            InvalidInputError: as :func:`parse_spec`.
        """
        document = {"name": self._name, "goal": self._goal, "tasks": self._tasks}
        return parse_spec(
            document, origin=f"workflow {self._name!r}", known_executor_types=known_executor_types
        )
