"""The planner: a goal in words becomes a workflow, written by the configured LLM and checked like a file.

Offline, a workflow is written as a file (YAML or JSON) and that stays the default. With an LLM
configured (``llm_provider``), ``librarian workflow plan GOAL`` asks the model for the workflow
document itself: the schema of workflow files (:data:`~librarian.runtime.spec.WORKFLOW_SCHEMA`), the
executor types this runtime has, and what their payloads hold. Answers that are not JSON or break
the schema are repaired by :func:`librarian.llm.complete_json`; a document the checks of a workflow
file refuse (an unknown executor type or dependency, a duplicate id, a cycle) is sent back with the
checker's own reason. The model never runs anything here: the plan is returned for a person (or the
caller) to read, save and run.

Example:
    >>> spec = plan_workflow(create_llm(settings), "upload report.csv to my-bucket",
    ...                      known_executor_types=["command_executor"])  # doctest: +SKIP
    >>> [task.id for task in spec.tasks]  # doctest: +SKIP
    ['check-tool', 'upload', 'verify']
"""

from __future__ import annotations

import json
from collections.abc import Collection

from librarian.errors import InvalidInputError
from librarian.llm import ChatMessage, LLMClient, LLMOutputError, complete_json, endpoint_of
from librarian.runtime.spec import WORKFLOW_SCHEMA, WorkflowSpec, parse_spec

__all__ = ["SYSTEM_PROMPT", "plan_workflow"]

SYSTEM_PROMPT = """\
You plan automated workflows. Turn the user's goal into a workflow: a list of tasks, each run by \
one executor, ordered by "depends_on". Include what a careful engineer would: setting up what the \
goal needs, the steps themselves, a verification step that checks the result, and a teardown when \
something temporary was created. Give every task a short "description" saying what it does.

Executors and their payloads:
- command_executor: {"argv": [program, arg, ...]}: one program run without a shell, so no pipes, \
redirections or variables; add "expect": {"exit_code": 0, "stdout_contains": "..."} to check output.
- code_executor: {"code": "python source"}: a Python program; print what should be checked.
- file_writer: {"path": "relative/path", "content": "text"}: writes a file inside the workspace; \
never an absolute path or "..".
- api_caller: {"url": "https://...", "method": "GET", "json": {...}}: one HTTP request; add \
"expect": {"status": 200} to check it.

Use only the executor types listed by the user. Never put passwords, tokens or keys in a payload: \
the commands read them from their usual configuration."""

_GOAL_LIMIT = 4000
_CONTEXT_LIMIT = 8000


def plan_workflow(
    llm: LLMClient,
    goal: str,
    *,
    known_executor_types: Collection[str],
    context: str | None = None,
    name: str | None = None,
    max_attempts: int = 3,
) -> WorkflowSpec:
    """Ask ``llm`` for a workflow reaching ``goal``; it is validated like a workflow file.

    Args:
        llm: the configured chat model (``create_llm(settings)``).
        goal: what the workflow must achieve, in words.
        known_executor_types: executor types a task may use (``ExecutorRegistry.executor_types()``).
        context: facts the model should know (installed tools and versions, file names, hosts).
        name: the workflow's name (default: the model's, else ``planned``).
        max_attempts: workflows the model may propose in all, each with its own JSON repair turns.

    Returns:
        The validated workflow; its ``goal`` is ``goal`` whatever the model wrote.

    Raises:
        InvalidInputError: an empty goal, no executor types, or ``max_attempts`` below 1.
        LLMOutputError: no valid workflow after ``max_attempts`` proposals; the message names the last
            reason the workflow was refused.
        LLMError: the endpoint failed.
    """
    goal = goal.strip()
    if not goal:
        raise InvalidInputError("the goal is empty", hint="say what the workflow must achieve")
    if not known_executor_types:
        raise InvalidInputError("no executor types to plan with")
    if max_attempts < 1:
        raise InvalidInputError(f"max_attempts must be at least 1, got {max_attempts}")
    types = sorted(known_executor_types)
    request = f"Goal: {goal[:_GOAL_LIMIT]}\n\nExecutor types you may use: {', '.join(types)}."
    if context and context.strip():
        request += f"\n\nWhat is known about the environment:\n{context.strip()[:_CONTEXT_LIMIT]}"
    messages = [ChatMessage("user", request)]
    reason = answer = ""
    for _ in range(max_attempts):
        document = complete_json(llm, messages, WORKFLOW_SCHEMA, system=SYSTEM_PROMPT)
        document["goal"] = goal
        if name:
            document["name"] = name
        try:
            return parse_spec(
                document, origin="the planned workflow", default_name="planned", known_executor_types=types
            )
        except InvalidInputError as exc:
            reason = exc.message
        answer = json.dumps(document)
        messages += [
            ChatMessage("assistant", answer),
            ChatMessage(
                "user",
                f"That workflow cannot be used: {reason}\nReply with the whole corrected workflow.",
            ),
        ]
    raise LLMOutputError(
        f"the LLM ({llm.model_name}) proposed no usable workflow in {max_attempts} attempt"
        f"{'s' if max_attempts > 1 else ''}; last reason: {reason}",
        endpoint=endpoint_of(llm),
        last_problem=reason,
        last_answer=answer,
    )
