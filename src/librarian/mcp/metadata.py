"""What an MCP client shows of each tool: a title, annotations, a clean description and a description
of every argument, all derived from the tool's own docstring so they never drift from the code.

The SDK takes a tool's raw docstring as its description (indentation included) and gives arguments
no description. :func:`describe_tools` rewrites each registered tool once, after registration: the
description becomes the docstring's prose and ``Returns:`` section, dedented; each ``Args:`` entry
becomes its argument's ``description`` in the input schema. Tools that declare no annotations get
them from :data:`ANNOTATIONS` (or, for names that only read, :data:`READ_ONLY`); a tool in neither is
an error at start-up, so a new tool cannot ship without saying whether it changes anything.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
WRITES_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DELETES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# A runbook step may run a command or call a tool: it can do anything, anywhere.
RUNS_STEPS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)

_READ_PREFIXES = ("get_", "list_", "search_", "find_", "discover_", "research_", "resolve_", "read_")
ANNOTATIONS: dict[str, ToolAnnotations] = {
    "record_feedback": WRITES,
    "record_knowledge_feedback": WRITES,
    "add_document": WRITES,
    "update_document": WRITES,
    "delete_document": DELETES,
    "save_learning": WRITES,
    "mark_incident_similarity": WRITES_IDEMPOTENT,
    "record_solution_outcome": WRITES,
    "add_runbook": WRITES,
    "start_runbook_execution": RUNS_STEPS,
    "execute_runbook_step": RUNS_STEPS,
    "answer_runbook_step": RUNS_STEPS,
    "approve_runbook_step": RUNS_STEPS,
}
_SECTION = re.compile(r"^(Args|Arguments|Returns|Raises|Example|Examples):\s*$")
_ARGUMENT = re.compile(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def describe_tools(server: MCPServer[Any]) -> None:
    """Give every tool of ``server`` a title, annotations, a clean description and argument descriptions.

    Raises:
        RuntimeError: a tool has no annotations and its name is neither known nor read-only.
    """
    for tool in server._tool_manager.list_tools():  # the SDK offers no public way to edit a tool
        prose, arguments, returns = parse_docstring(tool.fn.__doc__ or "")
        tool.description = prose + (f"\n\nReturns:\n{returns}" if returns else "")
        for name, schema in tool.parameters.get("properties", {}).items():
            if name in arguments and "description" not in schema:
                schema["description"] = arguments[name]
        if tool.title is None:
            tool.title = title_of(tool.name)
        if tool.annotations is None:
            tool.annotations = annotations_of(tool.name)


def annotations_of(name: str) -> ToolAnnotations:
    """The annotations of a tool that declared none."""
    if name in ANNOTATIONS:
        return ANNOTATIONS[name]
    if name.startswith(_READ_PREFIXES):
        return READ_ONLY
    raise RuntimeError(f"MCP tool {name!r} declares no annotations: add it to mcp/metadata.py ANNOTATIONS")


def title_of(name: str) -> str:
    """``record_solution_outcome`` -> ``Record solution outcome`` (API, MCP and SDK in capitals)."""
    words = [word.upper() if word in ("api", "mcp", "sdk", "sdks") else word for word in name.split("_")]
    text = " ".join(words)
    return text[0].upper() + text[1:]


def parse_docstring(docstring: str) -> tuple[str, dict[str, str], str]:
    """A Google-style docstring as (prose, argument descriptions, the Returns section), dedented."""
    lines = inspect.cleandoc(docstring).splitlines()
    prose: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        heading = _SECTION.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if heading:
            current = sections.setdefault(heading.group(1), [])
            continue
        (prose if current is None else current).append(line)
    arguments: dict[str, str] = {}
    last: str | None = None
    for line in sections.get("Args", sections.get("Arguments", [])):
        text = line.strip()
        found = _ARGUMENT.match(text)
        indent = len(line) - len(line.lstrip())
        if found and indent <= 4:
            last = found.group(1)
            arguments[last] = found.group(2).strip()
        elif last is not None and text:
            arguments[last] = f"{arguments[last]} {text}".strip()
    returns = " ".join(part.strip() for part in sections.get("Returns", []) if part.strip())
    return _paragraphs(prose), arguments, returns


def _paragraphs(lines: list[str]) -> str:
    """Lines joined into paragraphs (a blank line separates them), without the docstring's wrapping."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in lines:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)
