"""MCP tools of incidents and solutions, with the design's names and schemas:
``find_similar_incidents``, ``get_solution`` and ``save_learning``, plus the feedback that teaches
them (``mark_incident_similarity``, ``record_solution_outcome``)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from librarian.app import Librarian
from librarian.incidents.learning import Learning
from librarian.incidents.signature import ProblemSignature
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors


def register_incident_tools(server: MCPServer[Any], lib: Librarian) -> None:
    """Add the incident and solution tools to ``server``."""

    @server.tool()
    def find_similar_incidents(
        description: str,
        symptoms: list[str] | None = None,
        affected_services: list[str] | None = None,
        error_messages: list[str] | None = None,
        limit: int = 5,
        incident_id: int | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Find past incidents similar to the problem you are investigating, and how they were fixed.

        Use this early in an investigation: a similar incident's root cause and solution are often
        the fastest way out. Exact error text helps most (ids, paths and numbers are ignored).

        Args:
            description: the current problem in plain words.
            symptoms: what you observe, e.g. ["pod crash", "OOMKilled"].
            affected_services: e.g. ["checkout"].
            error_messages: error lines as printed.
            limit: how many incidents (1-50, default 5).
            incident_id: the incident you are working on, if recorded (it and incidents marked not
                similar to it are left out).

        Returns:
            `similar_incidents`: each with id, title, similarity_score, severity, root_cause, solution,
            resolution_time_minutes, occurred_at, matching_symptoms, was_successful, recurred and
            `matched` (which fields matched).
        """
        with tool_errors():
            signature = ProblemSignature.from_mapping(
                {
                    "symptoms": symptoms,
                    "affected_services": affected_services,
                    "error_messages": error_messages,
                }
            )
            found = lib.incidents.find_similar(
                tool_caller(lib, ctx), description, signature=signature, limit=limit, incident_id=incident_id
            )
            return {"similar_incidents": found}

    @server.tool()
    def get_solution(
        problem_signature: dict[str, Any], limit: int = 5, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Solutions that fixed this problem (or one like it) before, the best-proven first.

        Args:
            problem_signature: any of symptoms (list), error_messages (list), affected_services
                (list), infrastructure (string).
            limit: how many (1-50, default 5).

        Returns:
            `solutions`: each with title, solution, successes, failures, success_rate,
            confidence_lower_bound (what the ranking uses: 1 of 1 does not beat 40 of 45), uses,
            last_used_at, match (exact or similar signature) and kind (solution, or verified_fix
            from the self-correcting loop). Report how it went with record_solution_outcome.
        """
        with tool_errors():
            signature = ProblemSignature.from_mapping(problem_signature)
            return {"solutions": lib.solutions.get_solution(tool_caller(lib, ctx), signature, limit)}

    @server.tool()
    def save_learning(
        title: str,
        content: str,
        document_type: str = "incident_report",
        problem_signature: dict[str, Any] | None = None,
        solution: str | None = None,
        tags: list[str] | None = None,
        related_incident_ids: list[int] | None = None,
        worked: bool | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Save what you found as knowledge, so the next agent with this problem finds it.

        Call this when an investigation ends: it stores the write-up as a document, records an
        incident with its problem signature, and links the solution to that signature.

        Args:
            title: a short title.
            content: the write-up (Markdown): what happened, why, what fixed it.
            document_type: incident_report (default), solution or runbook.
            problem_signature: symptoms, error_messages, affected_services (lists), infrastructure.
            solution: what fixed it.
            tags: labels.
            related_incident_ids: incidents from find_similar_incidents that were the same problem.
            worked: whether the solution fixed the problem (counts towards its ranking).

        Returns:
            `document_id`, the `incident` and the `solution` (with its record).
        """
        with tool_errors():
            learning = Learning(
                title=title,
                content=content,
                document_type=document_type,
                problem_signature=ProblemSignature.from_mapping(problem_signature),
                solution=solution,
                tags=tuple(tags or ()),
                related_incident_ids=tuple(related_incident_ids or ()),
                worked=worked,
            )
            return lib.learning.save(tool_caller(lib, ctx), learning)

    @server.tool()
    def mark_incident_similarity(
        incident_id: int, other_id: int, similar: bool, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Say whether a returned incident really was similar to yours.

        Args:
            incident_id: your incident.
            other_id: the incident find_similar_incidents returned.
            similar: true links them as related; false hides it for your incident and ranks pairs
                like it lower.
        """
        with tool_errors():
            return lib.incidents.mark(tool_caller(lib, ctx), incident_id, other_id, similar=similar)

    @server.tool()
    def record_solution_outcome(
        solution_id: int, worked: bool, incident_id: int | None = None, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Record whether a solution from get_solution worked; it moves that solution's ranking.

        Args:
            solution_id: the solution's id.
            worked: whether it fixed the problem.
            incident_id: the incident it was applied to, if recorded.
        """
        with tool_errors():
            return lib.solutions.record_outcome(
                tool_caller(lib, ctx), solution_id, worked=worked, incident_id=incident_id
            )
