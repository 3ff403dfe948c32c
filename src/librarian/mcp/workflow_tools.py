"""MCP tools with which an agent runs workflows and drives the self-correcting loop (``lib.workflows``):
``run_workflow``, ``plan_workflow``, ``workflow_status``, ``answer_workflow``, ``cancel_workflow``,
``resume_workflow``, ``list_workflows``, and the loop's knowledge: ``list_verified_fixes``,
``get_verified_fix``, ``retire_verified_fix`` and ``get_strategy_stats``.

Answers are agent-sized (:func:`~librarian.workflows.views.brief_view`): each task's status, outcome
and correction, the loop's timeline and the newest events, not every log line.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from librarian.app import Librarian
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.mcp.metadata import DELETES, READ_ONLY, WRITES
from librarian.workflows.views import brief_view

# Running a workflow runs its commands (sandboxed); running it twice runs them twice unless a key is given.
RUNS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)
# MCP clients time a call out (often after 60-120 s): longer waits are a poll with workflow_status.
MAX_WAIT_SECONDS = 120.0


def register_workflow_tools(server: MCPServer[Any], lib: Librarian) -> None:
    """Add the workflow tools to ``server``."""
    workflows = lib.workflows

    @server.tool(title="Run a workflow", annotations=RUNS)
    def run_workflow(
        workflow: dict[str, Any] | str,
        idempotency_key: str | None = None,
        wait_seconds: float = 30,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Run a workflow of tasks; a failing command is corrected by the self-correcting loop.

        When a task fails, the loop classifies the error, detects the tool's installed version,
        researches that version's documentation, reuses fixes that worked before, corrects the task
        and retries it. When it cannot decide, the workflow pauses with a question: answer it with
        answer_workflow.

        Args:
            workflow: the workflow, as an object or as YAML/JSON text: {"name": "...", "goal": "...",
                "tasks": [{"id": "lint", "executor_type": "command_executor", "payload": {"argv":
                ["ruff", "check", "."]}, "depends_on": []}]}. Executor types: command_executor (argv
                or script), code_executor (code), file_writer (path, content), api_caller.
            idempotency_key: a key of your choosing; submitting again with it returns the first run.
            wait_seconds: wait up to this long (0-120) for the workflow to end or ask a question.

        Returns:
            The workflow: workflow_id, status (running, paused, success, failed, cancelled), each
            task's status, outcome and correction, the loop's timeline, and the question if paused.
        """
        with tool_errors():
            view = workflows.submit(
                tool_caller(lib, ctx),
                workflow,
                idempotency_key=idempotency_key,
                wait_seconds=_clamped(wait_seconds),
            )
            return brief_view(view)

    @server.tool(title="Workflow status", annotations=READ_ONLY)
    def workflow_status(
        workflow_id: str, wait_seconds: float = 0, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Read a workflow's status, tasks, corrections and timeline, optionally waiting for it to end.

        Args:
            workflow_id: the id run_workflow returned.
            wait_seconds: wait up to this long (0-120) for the workflow to end or ask a question.

        Returns:
            The workflow as run_workflow returns it.
        """
        with tool_errors():
            view = workflows.get(tool_caller(lib, ctx), workflow_id, wait_seconds=_clamped(wait_seconds))
            return brief_view(view)

    @server.tool(title="Answer a workflow's question", annotations=WRITES)
    def answer_workflow(workflow_id: str, answer: str, ctx: Context | None = None) -> dict[str, Any]:
        """Answer the question a paused workflow asked; the loop uses the answer and goes on.

        Args:
            workflow_id: the paused workflow.
            answer: your answer, e.g. the command to use or the value that was missing.

        Returns:
            The workflow, running again.
        """
        with tool_errors():
            return brief_view(workflows.answer(tool_caller(lib, ctx), workflow_id, answer))

    @server.tool(title="Cancel a workflow", annotations=DELETES)
    def cancel_workflow(workflow_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Cancel a running or paused workflow: running tasks finish, nothing new starts.

        Args:
            workflow_id: the workflow to cancel.

        Returns:
            The workflow, cancelled (a finished workflow is returned unchanged).
        """
        with tool_errors():
            return brief_view(workflows.cancel(tool_caller(lib, ctx), workflow_id))

    @server.tool(title="Resume a workflow", annotations=RUNS)
    def resume_workflow(workflow_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Go on with a running workflow whose process died: its tasks left in flight run again here.

        Args:
            workflow_id: the running workflow, e.g. one an embedded `librarian workflow run` left
                when it was killed.

        Returns:
            The workflow, running again (an error if it is not running).
        """
        with tool_errors():
            return brief_view(workflows.resume(tool_caller(lib, ctx), workflow_id))

    @server.tool(title="List workflows", annotations=READ_ONLY)
    def list_workflows(
        status: str | None = None, cursor: str | None = None, limit: int = 20, ctx: Context | None = None
    ) -> dict[str, Any]:
        """List the workflows you may see, newest first.

        Args:
            status: only workflows in this status (running, paused, success, failed, cancelled).
            cursor: the next_cursor of the previous page.
            limit: how many (1-100).

        Returns:
            {"workflows": [{workflow_id, name, status, total_reward, created_at, finished_at}],
            "next_cursor": ...}.
        """
        with tool_errors():
            return workflows.list(tool_caller(lib, ctx), status=status, cursor=cursor, limit=limit)

    @server.tool(title="List verified fixes", annotations=READ_ONLY)
    def list_verified_fixes(
        tool: str | None = None,
        before: int | None = None,
        limit: int = 20,
        include_retired: bool = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """List the fixes the self-correcting loop verified: what failed, what fixed it, how often it worked.

        Args:
            tool: only fixes of this tool or library, e.g. "ruff".
            before: the next_before of the previous page.
            limit: how many (1-100).
            include_retired: also list the fixes taken out of reuse (with who retired them and why).

        Returns:
            {"fixes": [{id, tool, tool_version, normalized_error, failed_template, fixed_template,
            strategy, successes, failures, confidence_lower_bound, retired}], "next_before": ...}.
        """
        with tool_errors():
            return workflows.fixes.list(
                tool_caller(lib, ctx), tool=tool, before=before, limit=limit, include_retired=include_retired
            )

    @server.tool(title="Read a verified fix", annotations=READ_ONLY)
    def get_verified_fix(fix_id: int, ctx: Context | None = None) -> dict[str, Any]:
        """Read one verified fix with the research snippets it came from.

        Args:
            fix_id: the fix's id, as list_verified_fixes gives it.

        Returns:
            The fix (as list_verified_fixes gives it) with its snippets, and who retired it and why
            when it was retired.
        """
        with tool_errors():
            return workflows.fixes.get(tool_caller(lib, ctx), fix_id)

    @server.tool(title="Retire a verified fix", annotations=DELETES)
    def retire_verified_fix(fix_id: int, reason: str, ctx: Context | None = None) -> dict[str, Any]:
        """Take a verified fix that turned out wrong out of reuse; it stays on record with the reason.

        Needs an administrator of the runtime's own organisation.

        Args:
            fix_id: the fix to retire.
            reason: why it is wrong (kept with the fix).

        Returns:
            The fix, retired.
        """
        with tool_errors():
            return workflows.fixes.retire(tool_caller(lib, ctx), fix_id, reason)

    @server.tool(title="Strategy statistics", annotations=READ_ONLY)
    def get_strategy_stats(category: str | None = None, ctx: Context | None = None) -> dict[str, Any]:
        """The correction policy's record: per error category and strategy, trials and mean reward.

        The loop tries first the strategy with the best record for the failure's category.

        Args:
            category: only this error category, e.g. "api_drift".

        Returns:
            {"strategies": [{error_category, strategy, trials, total_reward, mean_reward, last_update}]}.
        """
        with tool_errors():
            return workflows.fixes.strategy_stats(tool_caller(lib, ctx), category=category)

    @server.tool(title="Plan a workflow", annotations=READ_ONLY)
    def plan_workflow(goal: str, context: str | None = None, ctx: Context | None = None) -> dict[str, Any]:
        """Ask the server's LLM to plan a workflow for a goal; it is validated, not run.

        Run the plan with run_workflow. Fails with a readable error when the server has no LLM.

        Args:
            goal: what the workflow should achieve, e.g. "lint and test the repository".
            context: facts the planner should know: tools, versions, hosts.

        Returns:
            The planned workflow, in the form run_workflow takes.
        """
        with tool_errors():
            return workflows.plan(tool_caller(lib, ctx), goal, context=context)


def _clamped(wait_seconds: float) -> float:
    return max(0.0, min(float(wait_seconds), MAX_WAIT_SECONDS))
