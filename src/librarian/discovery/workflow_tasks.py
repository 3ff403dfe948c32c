"""Verbs and tools in workflows: the ``tool_call`` and ``verb`` executors and the novel-verb corrector.

A task may name a registered tool (``executor_type: tool_call``, payload ``{tool, arguments}``) or
only a verb (``executor_type: verb``, payload ``{verb, description, inputs}``). A verb task that is
not bound to a tool fails at once with ``VerbNotBound``; the :class:`NovelVerbCorrector` then
resolves it (:mod:`librarian.discovery.resolution`) and corrects the DAG by the runtime's own
surgery, so the substitution or decomposition is recorded with its rationale like any correction:

- **substituted** (or an exact match): the verb task is retried bound to the tool;
- **decomposed**: one ``tool_call`` task per sub-goal is inserted before it, and the verb task
  completes once they have;
- **created**: the verb is registered as novel and the workflow pauses with a question naming it;
  the answer (a toolId) binds it.

Tool calls act for the data directory's local user: workflows carry no caller identity yet.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from librarian.config import Settings
from librarian.errors import LibrarianError, NotFoundError
from librarian.runtime.contracts import ExecutionResult, TaskSpec, Workspace
from librarian.runtime.correctors import ClarificationRequest, CorrectionContext, CorrectionProposal
from librarian.runtime.executors.base import failure, from_error, success

if TYPE_CHECKING:
    from librarian.app import Librarian

VERB_NOT_BOUND = "VerbNotBound"
MAX_OUTPUT_CHARS = 100_000


class _SharedLibrary:
    """A facade opened on first use from the worker's settings (executors are built before it)."""

    def __init__(self, settings: Settings, library: Librarian | None = None) -> None:
        self._settings = settings
        self._library = library
        self._lock = threading.Lock()

    def get(self) -> Librarian:
        with self._lock:
            if self._library is None:
                from librarian.app import Librarian

                self._library = Librarian(self._settings)
            return self._library


def _call(library: Librarian, tool: str, arguments: dict[str, Any], request: str | None) -> ExecutionResult:
    started = time.monotonic()
    try:
        result = library.discovery.call(tool, arguments, request=request)
    except LibrarianError as exc:
        return from_error(exc, details={"tool": tool})
    text = result.text or json.dumps(result.content, default=str)
    return success(
        f"tool {tool} answered: {text[:200]}",
        stdout=text[:MAX_OUTPUT_CHARS],
        output={"tool": tool, "content": result.content, "text": text[:MAX_OUTPUT_CHARS]},
        duration_seconds=time.monotonic() - started,
    )


class ToolCallExecutor:
    """``tool_call``: call a registered tool. Payload: ``tool`` (toolId), ``arguments``, ``request``."""

    executor_type = "tool_call"

    def __init__(self, settings: Settings, library: Librarian | None = None) -> None:
        self._library = _SharedLibrary(settings, library)

    def execute(self, task: TaskSpec, workspace: Workspace) -> ExecutionResult:
        """Call the tool; a refused or failed call is a failed task naming the tool."""
        tool = task.payload.get("tool")
        arguments = task.payload.get("arguments") or {}
        if not isinstance(tool, str) or not tool:
            return failure("PayloadError", f"task {task.task_id}: payload field 'tool' must name a tool")
        if not isinstance(arguments, dict):
            return failure(
                "PayloadError", f"task {task.task_id}: payload field 'arguments' must be an object"
            )
        request = task.payload.get("request") or task.description or None
        return _call(self._library.get(), tool, arguments, request if isinstance(request, str) else None)


class VerbExecutor:
    """``verb``: carry out a verb by the tool it is bound to (see the module's docstring).

    Payload: ``verb``, ``description`` (what it should do, used to find a tool), ``inputs`` (the
    tool's arguments); after resolution also ``tool`` or ``decomposed``.
    """

    executor_type = "verb"

    def __init__(self, settings: Settings, library: Librarian | None = None) -> None:
        self._library = _SharedLibrary(settings, library)

    def execute(self, task: TaskSpec, workspace: Workspace) -> ExecutionResult:
        """Call the bound tool, confirm a decomposition ran, or fail with ``VerbNotBound``."""
        verb = task.payload.get("verb")
        if not isinstance(verb, str) or not verb.strip():
            return failure("PayloadError", f"task {task.task_id}: payload field 'verb' must name a verb")
        inputs = task.payload.get("inputs") or {}
        if not isinstance(inputs, dict):
            return failure("PayloadError", f"task {task.task_id}: payload field 'inputs' must be an object")
        tool = task.payload.get("tool")
        if isinstance(tool, str) and tool:
            description = task.payload.get("description") or task.description or verb
            return _call(self._library.get(), tool, inputs, str(description))
        if task.payload.get("decomposed"):
            parts = task.payload.get("decomposed")
            return success(
                f"verb {verb} was carried out by its decomposition: {parts}", output={"verb": verb}
            )
        return failure(
            VERB_NOT_BOUND,
            f"verb {verb} is not bound to a tool yet",
            details={"verb": verb, "description": task.payload.get("description") or task.description},
        )


class NovelVerbCorrector:
    """Resolves ``VerbNotBound`` failures into a substitution, a decomposition or a question."""

    name = "novel_verb"

    def __init__(self, library: Librarian) -> None:
        self._library = library

    def propose(self, context: CorrectionContext) -> CorrectionProposal | ClarificationRequest | None:
        """A plan binding the verb, or a question when nothing registered can do it."""
        failed = context.failed
        if failed.feedback_notes.get("error_type") != VERB_NOT_BOUND:
            return None
        payload = dict(failed.payload)
        verb = str(payload.get("verb") or "")
        description = str(payload.get("description") or failed.description or "")
        answered = [
            a.answer.strip() for a in context.answers if a.task_key == failed.key and a.strategy == self.name
        ]
        if answered:
            return self._bind_to_answer(failed.key, payload, verb, answered[-1])
        resolution = self._library.discovery.resolver.resolve(verb, description)
        if resolution.kind in ("exact", "substituted"):
            binding = resolution.bindings[0]
            step = {
                "description": f"carry out {resolution.verb} with {binding.tool}",
                "executor_type": "verb",
                "payload": {**payload, "tool": binding.tool, "resolution": resolution.to_dict()},
                "rationale": resolution.rationale,
                "retry_failed_task": True,
            }
            return CorrectionProposal(self.name, {"steps": [step]}, resolution.rationale)
        if resolution.kind == "decomposed":
            steps: list[dict[str, Any]] = [
                {
                    "description": binding.goal,
                    "executor_type": "tool_call",
                    "payload": {
                        "tool": binding.tool,
                        "arguments": self._arguments_for(binding.tool, payload.get("inputs")),
                        "request": binding.goal,
                    },
                    "rationale": (
                        f"part of {resolution.verb}: {binding.goal!r} (confidence {binding.confidence:.2f})"
                    ),
                }
                for binding in resolution.bindings
            ]
            steps.append(
                {
                    "description": f"{resolution.verb} done by its parts",
                    "executor_type": "verb",
                    "payload": {**payload, "decomposed": [b.tool for b in resolution.bindings]},
                    "rationale": resolution.rationale,
                    "retry_failed_task": True,
                }
            )
            return CorrectionProposal(self.name, {"steps": steps}, resolution.rationale)
        closest = ", ".join(f"{c.tool} ({c.confidence:.2f})" for c in resolution.candidates) or "none"
        return ClarificationRequest(
            self.name,
            f"No registered verb or tool can do {resolution.verb} ({description or 'no description'}). "
            f"It was registered as a novel verb awaiting implementation. Register a tool that serves it "
            f"and answer with its toolId (closest now: {closest}).",
            resolution.rationale,
        )

    def _arguments_for(self, tool: str, inputs: Any) -> dict[str, Any]:
        """The verb's inputs a part's tool declares (each part takes what its schema names)."""
        if not isinstance(inputs, dict):
            return {}
        properties = (self._library.discovery.tool(tool).get("inputSchema") or {}).get("properties") or {}
        return {name: value for name, value in inputs.items() if name in properties}

    def _bind_to_answer(
        self, key: str, payload: dict[str, Any], verb: str, answer: str
    ) -> CorrectionProposal | None:
        tool = answer.split()[0] if answer.split() else ""
        try:
            self._library.discovery.tool(tool)
        except NotFoundError:
            return None
        rationale = f"the user named {tool} for {verb}"
        step = {
            "description": f"carry out {verb} with {tool}",
            "executor_type": "verb",
            "payload": {
                **payload,
                "tool": tool,
                "resolution": {"verb": verb, "kind": "answered", "rationale": rationale},
            },
            "rationale": rationale,
            "retry_failed_task": True,
        }
        return CorrectionProposal(self.name, {"steps": [step]}, rationale)
