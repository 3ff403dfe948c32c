"""A workflow's DAG laid out for drawing: columns by dependency depth, one row per task in a column.

Each task sits one column right of the deepest task it depends on, so every edge points right. A
corrective task that surgery inserted is drawn beside the task it was inserted for, one column right
of it, with a dashed edge and border (the template marks it and shows its rationale).

:func:`as_submitted` gives the DAG before any surgery, drawn beside the corrected one: surgery only
adds tasks (with a ``parent_id``) and makes the failed task wait for them, so the submitted tasks and
their dependencies among themselves are what was submitted.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["Edge", "Layout", "Node", "as_submitted", "layout"]

NODE_WIDTH = 190
NODE_HEIGHT = 46
COLUMN_GAP = 60
ROW_GAP = 18
MARGIN = 10


@dataclass(frozen=True)
class Node:
    """One task's box."""

    task_id: str
    key: str
    status: str
    inserted: bool
    corrected: bool
    rationale: str | None
    x: int
    y: int


@dataclass(frozen=True)
class Edge:
    """An arrow from a task to one that depends on it (or to a corrective task, ``inserted``)."""

    x1: int
    y1: int
    x2: int
    y2: int
    inserted: bool


@dataclass(frozen=True)
class Layout:
    """The boxes, arrows and the drawing's size."""

    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int


def layout(tasks: list[dict[str, Any]], *, corrected: Collection[str] = ()) -> Layout:
    """Lay out ``tasks`` (a workflow view's tasks, in workflow order); ``corrected`` names the tasks
    whose command the loop rewrote in place (drawn as such: surgery that inserted no task)."""
    by_id = {task["task_id"]: task for task in tasks}
    column: dict[str, int] = {}

    def depth(task_id: str, seen: frozenset[str] = frozenset()) -> int:
        if task_id in column:
            return column[task_id]
        task = by_id[task_id]
        parents = [d for d in task.get("depends_on", []) if d in by_id and d not in seen]
        if task.get("parent_id") in by_id and task["parent_id"] not in seen:
            parents.append(task["parent_id"])
        value = 1 + max((depth(p, seen | {task_id}) for p in parents), default=-1)
        column[task_id] = value
        return value

    rows: dict[int, int] = {}
    nodes: dict[str, Node] = {}
    for task in tasks:
        col = depth(task["task_id"])
        row = rows.get(col, 0)
        rows[col] = row + 1
        nodes[task["task_id"]] = Node(
            task_id=task["task_id"],
            key=task["key"],
            status=task["status"],
            inserted=bool(task.get("parent_id")),
            corrected=task["key"] in corrected,
            rationale=task.get("rationale"),
            x=MARGIN + col * (NODE_WIDTH + COLUMN_GAP),
            y=MARGIN + row * (NODE_HEIGHT + ROW_GAP),
        )
    edges = []
    for task in tasks:
        target = nodes[task["task_id"]]
        sources = [(d, False) for d in task.get("depends_on", []) if d in nodes]
        if task.get("parent_id") in nodes:
            sources.append((task["parent_id"], True))
        for source_id, inserted in sources:
            source = nodes[source_id]
            edges.append(
                Edge(
                    x1=source.x + NODE_WIDTH,
                    y1=source.y + NODE_HEIGHT // 2,
                    x2=target.x,
                    y2=target.y + NODE_HEIGHT // 2,
                    inserted=inserted,
                )
            )
    columns = 1 + max(column.values(), default=0)
    most_rows = max(rows.values(), default=1)
    return Layout(
        nodes=list(nodes.values()),
        edges=edges,
        width=2 * MARGIN + columns * NODE_WIDTH + (columns - 1) * COLUMN_GAP,
        height=2 * MARGIN + most_rows * NODE_HEIGHT + (most_rows - 1) * ROW_GAP,
    )


def as_submitted(tasks: list[dict[str, Any]], corrected: Collection[str] = ()) -> list[dict[str, Any]] | None:
    """The tasks as they were submitted (status ``submitted``), or None when no surgery happened.

    ``corrected`` names the tasks the loop rewrote in place: surgery that inserted no task still
    changed the workflow, so the submitted DAG is worth drawing then too.

    Example:
        >>> tasks = [
        ...     {"task_id": "a", "key": "fetch", "status": "success", "depends_on": []},
        ...     {"task_id": "b", "key": "tag", "status": "success", "depends_on": ["a", "c"]},
        ...     {"task_id": "c", "key": "fix", "status": "success", "depends_on": ["a"], "parent_id": "b"},
        ... ]
        >>> [(t["key"], t["depends_on"], t["status"]) for t in as_submitted(tasks)]
        [('fetch', [], 'submitted'), ('tag', ['a'], 'submitted')]
        >>> as_submitted(tasks[:1]) is None, len(as_submitted(tasks[:1], corrected={"fetch"}))
        (True, 1)
    """
    if not corrected and not any(task.get("parent_id") for task in tasks):
        return None
    submitted = {task["task_id"] for task in tasks if not task.get("parent_id")}
    return [
        {
            "task_id": task["task_id"],
            "key": task["key"],
            "status": "submitted",
            "depends_on": [d for d in task.get("depends_on", []) if d in submitted],
        }
        for task in tasks
        if task["task_id"] in submitted
    ]
