"""MCP tools of runbooks, with the design's names and schemas: ``get_runbook`` and
``execute_runbook_step``, plus starting, answering, approving and reading executions, and adding and
listing runbooks.

Over MCP the agent drives: executions start step by step and agent-driven by default, so each
``execute_runbook_step`` call runs one step and ``agent_prompt`` steps wait for the agent's analysis
instead of going to the server's LLM. The tools are plain functions, which the MCP SDK runs on a
worker thread, so a ``bash`` step that takes a while does not block the server.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from librarian.app import Librarian
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.runbooks.catalog import RunbookInput


def register_runbook_tools(server: MCPServer[Any], lib: Librarian) -> None:
    """Add the runbook tools to ``server``."""

    @server.tool()
    def get_runbook(
        runbook_id: int | None = None,
        topic: str | None = None,
        problem_description: str | None = None,
        limit: int = 5,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Get a runbook by id, or find the runbooks for a topic or the problem you are working on.

        Use this when you start on an operational problem: a runbook is the organisation's proven
        procedure for it. Give one of runbook_id, topic or problem_description.

        Args:
            runbook_id: a runbook's id (from `matches` or list_runbooks).
            topic: what the runbook is about, e.g. "disk usage".
            problem_description: the problem in plain words, with symptoms and error text.
            limit: how many matches (1-50, default 5).

        Returns:
            `runbook`: the best one (null when nothing matches) with id, name, description, version,
            variables (null values must be given to start it), `steps` (step_number, title,
            action_type, action: the command, prompt or condition, and where each outcome leads),
            execution_count, success_rate, avg_execution_time_ms and effectiveness_score; and
            `matches`: each with id, name, score and `reasons` (why it matched).
        """
        with tool_errors():
            return lib.runbooks.find(
                tool_caller(lib, ctx),
                runbook_id=runbook_id,
                topic=topic,
                problem_description=problem_description,
                limit=limit,
            )

    @server.tool()
    def list_runbooks(
        category: str | None = None,
        tag: str | None = None,
        include_inactive: bool = False,
        limit: int = 100,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """List the runbooks you may read, by name, with their statistics.

        Args:
            category: only this category.
            tag: only runbooks with this tag.
            include_inactive: also retired runbooks.
            limit: how many (1-1000, default 100).

        Returns:
            `runbooks`: each with id, name, description, category, tags, version, trigger_patterns,
            execution_count, success_rate and avg_execution_time_ms.
        """
        with tool_errors():
            found = lib.runbooks.catalog.list_runbooks(
                tool_caller(lib, ctx),
                category=category,
                tag=tag,
                include_inactive=include_inactive,
                limit=limit,
            )
            return {"runbooks": found}

    @server.tool()
    def add_runbook(
        text: str,
        visibility: str | None = None,
        allowed_teams: list[str] | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store a runbook written in the runbook format (YAML or JSON text).

        A runbook with the same name as one of your organisation's becomes its new version. A
        runbook that breaks the format is refused with every problem, each naming the step and the
        field: fix them and call again.

        Args:
            text: the runbook: name, description, trigger_patterns, variables and steps (each with
                step, title, action_type: bash, agent_prompt, manual, conditional or approval, and
                its command, prompt or condition; one step has final_step: true).
            visibility: private, teams, organization (default) or public (administrators only).
            allowed_teams: team names or ids, with visibility teams.

        Returns:
            The stored runbook (as get_runbook returns it) and `change`: created, new_version or
            unchanged.
        """
        with tool_errors():
            given = RunbookInput(
                text, origin="add_runbook", visibility=visibility, allowed_teams=tuple(allowed_teams or ())
            )
            return lib.runbooks.add(tool_caller(lib, ctx), given)

    @server.tool()
    def start_runbook_execution(
        runbook_id: int,
        variables: dict[str, str] | None = None,
        problem: str = "",
        step_by_step: bool = True,
        agent_driven: bool = True,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Start running a runbook; then call execute_runbook_step to run it one step at a time.

        Args:
            runbook_id: the runbook (from get_runbook).
            variables: values of its variables, e.g. {"namespace": "prod"}; every variable whose
                default is null must be given.
            problem: the problem this run addresses (saved with the run's record).
            step_by_step: true (default): nothing runs until you call execute_runbook_step; false:
                steps run now until one waits for an answer or the run ends.
            agent_driven: true (default): agent_prompt steps wait for your analysis; false: the
                server's LLM answers them when one is configured.

        Returns:
            The execution: `id` (pass it to the other runbook tools), status (running, waiting,
            completed, failed, cancelled), current_step_number, `waiting_for` (while it waits: the
            kind of answer, the step and its prompt), variables and the step runs so far.
        """
        with tool_errors():
            return lib.runbooks.start(
                tool_caller(lib, ctx),
                runbook_id,
                variables=variables,
                problem=problem,
                mode="step" if step_by_step else "auto",
                agent_driven=agent_driven,
            )

    @server.tool()
    def execute_runbook_step(
        execution_id: str, answer: str | None = None, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Run the next step of a runbook execution and see what it did.

        Call this repeatedly until the status is completed or failed. When the execution waits on
        an agent_prompt step (`waiting_for.kind` is agent_prompt), read `waiting_for.prompt`, do the
        analysis and pass it as `answer`: the step is answered and the next one runs. A manual
        step waits for a person (answer_runbook_step) and an approval step for an approver
        (approve_runbook_step).

        Args:
            execution_id: from start_runbook_execution.
            answer: your analysis for the waiting agent_prompt step (or a person's result for a
                manual one); leave it out otherwise.

        Returns:
            The execution: status, current_step_number, `waiting_for`, variables (including values
            extracted from outputs) and `steps`: each run with its rendered command or prompt,
            output, error and duration.
        """
        with tool_errors():
            return lib.runbooks.step(tool_caller(lib, ctx), execution_id, answer)

    @server.tool()
    def answer_runbook_step(execution_id: str, answer: str, ctx: Context | None = None) -> dict[str, Any]:
        """Answer the agent_prompt or manual step an execution waits on.

        Args:
            execution_id: the waiting execution.
            answer: the analysis, or what was done and found.

        Returns:
            The execution after the answer (a run that is not step by step goes on until it waits
            again or ends).
        """
        with tool_errors():
            return lib.runbooks.answer(tool_caller(lib, ctx), execution_id, answer)

    @server.tool()
    def approve_runbook_step(
        execution_id: str, approved: bool = True, comment: str = "", ctx: Context | None = None
    ) -> dict[str, Any]:
        """Approve or reject the approval step an execution waits on.

        Only the step's approvers may (when it names any). A rejection follows the step's
        on_failure (by default the run stops as failed).

        Args:
            execution_id: the waiting execution.
            approved: true approves, false rejects.
            comment: why, recorded with the verdict.

        Returns:
            The execution after the verdict.
        """
        with tool_errors():
            return lib.runbooks.approve(
                tool_caller(lib, ctx), execution_id, approved=approved, comment=comment
            )

    @server.tool()
    def get_runbook_execution(execution_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Read a runbook execution: where it is, what it waits for and every step run so far.

        Args:
            execution_id: the execution's id.

        Returns:
            The execution with status, `waiting_for`, variables, completed_steps, failed_steps,
            outcome, duration_ms and `steps` (rendered command or prompt, output, error, duration).
        """
        with tool_errors():
            return lib.runbooks.execution(tool_caller(lib, ctx), execution_id)
