"""MCP tools of runbooks, with the design's names and schemas: ``get_runbook`` and
``execute_runbook_step``, plus starting, answering, approving and reading executions, and adding and
listing runbooks; and the administration the CLI and REST API have: new versions and their history,
activating and retiring, validating, dry runs, per-step statistics, the loop's proposals, and
cancelling, closing, resuming and listing executions.

Over MCP the agent drives: executions start step by step and agent-driven by default, so each
``execute_runbook_step`` call runs one step and ``agent_prompt`` steps wait for the agent's analysis
instead of going to the server's LLM. The tools are plain functions, which the MCP SDK runs on a
worker thread, so a ``bash`` step that takes a while does not block the server.
"""

from __future__ import annotations

from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer

from librarian.app import Librarian
from librarian.errors import InvalidInputError
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.mcp.metadata import DELETES, READ_ONLY, RUNS_STEPS, WRITES_IDEMPOTENT
from librarian.runbooks.catalog import RunbookInput

Scalar = str | int | float | bool


def register_runbook_tools(server: MCPServer[Any], lib: Librarian) -> None:
    """Add the runbook tools (the design's and the administration's) to ``server``."""

    @server.tool()
    def get_runbook(
        runbook_id: int | None = None,
        topic: str | None = None,
        problem_description: str | None = None,
        limit: int = 5,
        version: int | None = None,
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
            version: with runbook_id, an earlier version (list_runbook_versions lists them).

        Returns:
            `runbook`: the best one (null when nothing matches) with id, name, description, version,
            variables (null values must be given to start it), `steps` (step_number, title,
            action_type, action: the command, prompt or condition, and where each outcome leads),
            execution_count, success_rate, avg_execution_time_ms and effectiveness_score; and
            `matches`: each with id, name, score and `reasons` (why it matched).
        """
        with tool_errors():
            if version is not None:
                if runbook_id is None:
                    raise InvalidInputError("version: give runbook_id with it")
                return {
                    "runbook": lib.runbooks.catalog.get(tool_caller(lib, ctx), runbook_id, version),
                    "matches": [],
                }
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

    _register_runbook_administration(server, lib)


def _register_runbook_administration(server: MCPServer[Any], lib: Librarian) -> None:
    """The tools of the CLI's and REST API's runbook administration, over the same service calls."""
    runbooks = lib.runbooks
    catalog = runbooks.catalog

    # Saving with the base_version read: a repeat finds the runbook moved on and changes nothing.
    @server.tool(title="Save a new version of a runbook", annotations=WRITES_IDEMPOTENT)
    def update_runbook(
        runbook_id: int, text: str, base_version: int, note: str = "", ctx: Context | None = None
    ) -> dict[str, Any]:
        """Save a new version of a runbook from its full new text (its name may change).

        Only its author or an administrator of its organisation may. Read the runbook first
        (get_runbook) and pass the `version` you read as base_version: when someone saved a newer
        one meanwhile the call is refused, so no change is lost. A text that breaks the format is
        refused with every problem, each naming the step and the field.

        Args:
            runbook_id: the runbook to change.
            text: the whole runbook in the runbook format (YAML or JSON text), as add_runbook takes it.
            base_version: the version your change starts from (get_runbook's `version`).
            note: what this version changes, kept with it in list_runbook_versions.

        Returns:
            The runbook as get_runbook returns it, with its new `version`, and `change`: new_version
            or unchanged (the same text as the current version).
        """
        with tool_errors():
            given = RunbookInput(text, origin="update_runbook", note=note)
            return catalog.update(tool_caller(lib, ctx), runbook_id, given, base_version=base_version)

    @server.tool(title="List a runbook's versions", annotations=READ_ONLY)
    def list_runbook_versions(runbook_id: int, ctx: Context | None = None) -> dict[str, Any]:
        """List every saved version of a runbook, newest first: who saved it, when and why.

        Args:
            runbook_id: the runbook.

        Returns:
            `versions`: each with version, version_label, note, created_by and created_at.
        """
        with tool_errors():
            return {"versions": catalog.versions(tool_caller(lib, ctx), runbook_id)}

    @server.tool(title="Activate or retire a runbook", annotations=WRITES_IDEMPOTENT)
    def set_runbook_active(runbook_id: int, active: bool, ctx: Context | None = None) -> dict[str, Any]:
        """Retire a runbook (no longer recommended, no new runs; its history stays) or bring it back.

        Only its author or an administrator of its organisation may.

        Args:
            runbook_id: the runbook.
            active: false retires it, true brings it back into recommendations and runs.

        Returns:
            The runbook as get_runbook returns it, with `is_active`.
        """
        with tool_errors():
            return catalog.set_active(tool_caller(lib, ctx), runbook_id, active)

    @server.tool(title="Validate a runbook", annotations=READ_ONLY)
    def validate_runbook(text: str) -> dict[str, Any]:
        """Check a runbook's text against the runbook format without storing it.

        Use this while writing a runbook, before add_runbook or update_runbook.

        Args:
            text: the runbook in the runbook format (YAML or JSON text).

        Returns:
            `valid`; `problems` (each naming the step and the field; empty when valid); and, when
            valid, its `name`, the number of `steps` and `required_variables` (those a run must be
            given).
        """
        with tool_errors():
            return runbooks.validate(text, origin="validate_runbook")

    @server.tool(title="Dry-run a runbook", annotations=READ_ONLY)
    def dry_run_runbook(
        runbook_id: int,
        variables: dict[str, Scalar] | None = None,
        assume: dict[str, Scalar] | None = None,
        version: int | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """See what a run would do: every step rendered with these variables and the path it would
        take. Nothing runs.

        Args:
            runbook_id: the runbook.
            variables: values of the runbook's variables, e.g. {"namespace": "prod"}.
            assume: values earlier steps would extract, to decide the conditions on, e.g.
                {"verdict": "slow"}; an undecided condition follows its if_true branch.
            version: the version to render (default: the current one).

        Returns:
            `steps` (each with its rendered command or prompt and where each outcome leads),
            `path` (the steps a run would take, with the branch of each condition) and
            `missing_variables` (those a real run would still need).
        """
        with tool_errors():
            return runbooks.dry_run(
                tool_caller(lib, ctx), runbook_id, variables=variables, assume=assume, version=version
            )

    @server.tool(title="Runbook statistics", annotations=READ_ONLY)
    def get_runbook_stats(runbook_id: int, ctx: Context | None = None) -> dict[str, Any]:
        """How a runbook performs: its runs, success rate, average duration and effectiveness, and per
        step how often it ran, failed, timed out and had its command corrected.

        Args:
            runbook_id: the runbook.

        Returns:
            The runbook's summary with execution_count, success_rate, avg_execution_time_ms and
            effectiveness_score; `steps` (step, title, runs, succeeded, failed, timed_out, corrected,
            failure_rate, avg_duration_ms); and `pending_proposals`.
        """
        with tool_errors():
            return runbooks.stats(tool_caller(lib, ctx), runbook_id)

    @server.tool(title="List a runbook's proposals", annotations=READ_ONLY)
    def list_runbook_proposals(
        runbook_id: int,
        status: Literal["pending", "accepted", "rejected", "all"] = "pending",
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """List the corrected commands the self-correcting loop proposes as new versions of a runbook.

        When a run's command failed and the loop fixed it, the fix is proposed here; accept or reject
        it with decide_runbook_proposal.

        Args:
            runbook_id: the runbook.
            status: pending (default), accepted, rejected or all.

        Returns:
            `proposals`: each with id, step, old_command, new_command, base_version, execution_id,
            status, decided_by and decided_at.
        """
        with tool_errors():
            chosen = None if status == "all" else status
            return {"proposals": runbooks.proposals(tool_caller(lib, ctx), runbook_id, status=chosen)}

    # Deciding twice is refused (already decided): a repeat changes nothing.
    @server.tool(title="Accept or reject a runbook proposal", annotations=WRITES_IDEMPOTENT)
    def decide_runbook_proposal(proposal_id: int, accept: bool, ctx: Context | None = None) -> dict[str, Any]:
        """Accept a proposal (the runbook gets a new version with that step's corrected command) or
        reject it (the runbook stays as it is).

        Only the runbook's author or an administrator of its organisation may decide.

        Args:
            proposal_id: the proposal's id (from list_runbook_proposals).
            accept: true accepts it, false rejects it.

        Returns:
            The proposal with its new status, decided_by and decided_at.
        """
        with tool_errors():
            return runbooks.decide_proposal(tool_caller(lib, ctx), proposal_id, accept=accept)

    @server.tool(title="Cancel a runbook execution", annotations=DELETES)
    def cancel_runbook_execution(
        execution_id: str, reason: str = "cancelled by request", ctx: Context | None = None
    ) -> dict[str, Any]:
        """Stop a runbook execution for good; what it did stays recorded.

        Only the user who started it or an administrator of its organisation may.

        Args:
            execution_id: the execution to stop.
            reason: why, recorded with it.

        Returns:
            The execution as get_runbook_execution returns it, cancelled (a finished one unchanged).
        """
        with tool_errors():
            return runbooks.cancel(tool_caller(lib, ctx), execution_id, reason)

    # Recording the same outcome and rating again replaces the first: no further effect.
    @server.tool(title="Close a runbook execution", annotations=WRITES_IDEMPOTENT)
    def close_runbook_execution(
        execution_id: str,
        outcome: Literal["resolved", "partially_resolved", "escalated", "failed"] | None = None,
        notes: str | None = None,
        rating: int | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Record how a finished execution went for the problem: its outcome, notes and a rating.

        The rating counts towards the runbook's effectiveness score. Only the user who started it
        or an administrator of its organisation may; the execution must have ended (completed,
        failed or cancelled).

        Args:
            execution_id: the finished execution.
            outcome: resolved, partially_resolved, escalated or failed.
            notes: resolution notes: what was found and done.
            rating: how effective the runbook was, 1 to 5 stars.

        Returns:
            The execution with its outcome, resolution notes and rating.
        """
        with tool_errors():
            return runbooks.close_execution(
                tool_caller(lib, ctx), execution_id, outcome=outcome, notes=notes, rating=rating
            )

    @server.tool(title="Resume a runbook execution", annotations=RUNS_STEPS)
    def resume_runbook_execution(execution_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Go on with an execution whose server process died, or time out its overdue waiting step.

        A step-by-step execution runs one step, one that is not runs until it waits or ends. Only
        the user who started it or an administrator of its organisation may.

        Args:
            execution_id: the execution to resume.

        Returns:
            The execution as get_runbook_execution returns it.
        """
        with tool_errors():
            return runbooks.resume(tool_caller(lib, ctx), execution_id)

    @server.tool(title="List runbook executions", annotations=READ_ONLY)
    def list_runbook_executions(
        runbook_id: int | None = None,
        status: Literal["running", "waiting", "completed", "failed", "cancelled"] | None = None,
        limit: int = 20,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """List the runbook executions you may read, newest first (without their step runs).

        Args:
            runbook_id: only executions of this runbook.
            status: only executions in this status: running, waiting, completed, failed or cancelled.
            limit: how many (1-500, default 20).

        Returns:
            `executions`: each with id, runbook_id, runbook_name, status, mode, current_step_number,
            `waiting_for`, problem, outcome, started_at and duration_ms; read one with its step runs
            with get_runbook_execution.
        """
        with tool_errors():
            found = runbooks.executions(
                tool_caller(lib, ctx), runbook_id=runbook_id, status=status, limit=limit
            )
            return {"executions": found}
