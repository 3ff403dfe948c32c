"""MCP tools of incidents and solutions, with the design's names and schemas:
``find_similar_incidents``, ``get_solution`` and ``save_learning``, plus the feedback that teaches
them (``mark_incident_similarity``, ``record_solution_outcome``) and the incident records the CLI and
REST API keep (``record_incident``, ``import_incidents``, ``list_incidents``, ``get_incident``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, ConfigDict, Field

from librarian.app import Librarian
from librarian.incidents.learning import Learning
from librarian.incidents.service import IncidentDraft
from librarian.incidents.signature import ProblemSignature
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.mcp.metadata import READ_ONLY, WRITES

# What list_incidents shows of each incident: enough to pick one, get_incident reads the rest.
LISTED_FIELDS = (
    "id",
    "title",
    "severity",
    "incident_type",
    "occurred_at",
    "resolution_time_minutes",
    "was_successful",
    "recurred",
    "root_cause",
    "solution",
)


class IncidentFile(BaseModel):
    """One file to import: its name (the suffix says the format) and its text."""

    model_config = ConfigDict(extra="forbid")

    filename: str = Field(
        min_length=1,
        max_length=255,
        description="e.g. 2025-10-15-checkout.md or history.csv: .md, .markdown, .json, .jsonl or .csv",
    )
    content: str = Field(max_length=20_000_000, description="The file's text.")


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
        infrastructure: str | None = None,
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
            infrastructure: where it runs, e.g. "kubernetes", "postgres 15" (matched like a symptom).

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
                    "infrastructure": infrastructure,
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

    @server.tool(title="Record an incident", annotations=WRITES)
    def record_incident(
        title: str,
        description: str = "",
        severity: str | None = None,
        incident_type: str | None = None,
        problem_signature: dict[str, Any] | None = None,
        root_cause: str | None = None,
        solution_applied: str | None = None,
        resolution_steps: list[str] | None = None,
        tags: list[str] | None = None,
        related_incidents: list[int] | None = None,
        resolution_time_minutes: int | None = None,
        was_successful: bool | None = None,
        recurred: bool = False,
        occurred_at: datetime | None = None,
        category: str | None = None,
        visibility: str | None = None,
        allowed_teams: list[str] | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Record an incident, with its incident-report document; find_similar_incidents finds it at once.

        Use save_learning instead when you also want to link a solution to the problem. Needs the
        write scope.

        Args:
            title: a short title (1-500 characters).
            description: what happened, in plain words.
            severity: critical, high, medium or low.
            incident_type: outage, degradation, error, anomaly, security or other.
            problem_signature: any of symptoms (list), error_messages (list), affected_services
                (list), infrastructure (string).
            root_cause: why it happened.
            solution_applied: what fixed it.
            resolution_steps: the steps taken, in order.
            tags: labels.
            related_incidents: ids of incidents that were the same problem.
            resolution_time_minutes: how long it took to resolve.
            was_successful: whether the solution held.
            recurred: whether it happened again after the fix.
            occurred_at: when it happened (ISO 8601, e.g. 2025-10-15T14:03:00Z).
            category: a category for its document.
            visibility: private, teams, organization (default) or public (administrators only).
            allowed_teams: team names or ids, with visibility teams.

        Returns:
            The incident with every field, its `id` and its knowledge_document_id.
        """
        with tool_errors():
            draft = IncidentDraft(
                title=title,
                description=description,
                incident_type=incident_type,
                severity=severity,
                signature=ProblemSignature.from_mapping(problem_signature),
                root_cause=root_cause,
                solution_applied=solution_applied,
                resolution_steps=tuple(resolution_steps or ()),
                tags=tuple(tags or ()),
                related_incidents=tuple(related_incidents or ()),
                resolution_time_minutes=resolution_time_minutes,
                was_successful=was_successful,
                recurred=recurred,
                occurred_at=occurred_at,
                visibility=visibility,
                allowed_teams=tuple(allowed_teams or ()),
                category=category,
                origin={"via": "mcp"},
            )
            return lib.incidents.create(tool_caller(lib, ctx), draft)

    @server.tool(title="Import incidents", annotations=WRITES)
    def import_incidents(
        files: Annotated[list[IncidentFile], Field(min_length=1, max_length=1000)], ctx: Context | None = None
    ) -> dict[str, Any]:
        """Import a team's incident history: Markdown post-mortems, JSON, JSON Lines or CSV.

        A Markdown post-mortem has YAML front matter (title, severity, occurred_at,
        affected_services, symptoms, error_messages, ...) and sections found by their `##`
        headings: Summary, Impact, Root cause, Resolution (its list items become the steps),
        Timeline. JSON is a list of incidents (or {"incidents": [...]}) with record_incident's
        fields; JSON Lines one incident per line; CSV a header with at least `title` (list columns
        separate items with `;`). A malformed entry is reported with its file and line and skipped;
        the rest are imported. Needs the write scope.

        Args:
            files: 1-1000 files, each {"filename": "...", "content": "..."}; the file name's suffix
                (.md, .markdown, .json, .jsonl, .csv) says the format.

        Returns:
            `imported` (how many), `incident_ids` and `problems` (each with its file, line or entry,
            and the reason).
        """
        with tool_errors():
            texts = [(file.filename, file.content) for file in files]
            return lib.incidents.import_texts(tool_caller(lib, ctx), texts)

    @server.tool(title="List incidents", annotations=READ_ONLY)
    def list_incidents(
        severity: str | None = None, after: int = 0, limit: int = 20, ctx: Context | None = None
    ) -> dict[str, Any]:
        """List the incidents you may read, oldest first, a page at a time.

        Use find_similar_incidents to find the ones like a problem; this lists them all.

        Args:
            severity: only incidents of this severity: critical, high, medium or low.
            after: the cursor: the previous page's next_after (0, the default, starts at the first).
            limit: how many (1-500, default 20).

        Returns:
            `incidents`: each with id, title, severity, incident_type, occurred_at,
            resolution_time_minutes, was_successful, recurred, root_cause and solution (read the rest
            with get_incident); and `next_after` (null on the last page).
        """
        with tool_errors():
            found = lib.incidents.list_incidents(
                tool_caller(lib, ctx), limit=limit, after_id=after, severity=severity
            )
            listed = [{field: incident[field] for field in LISTED_FIELDS} for incident in found]
            return {"incidents": listed, "next_after": found[-1]["id"] if len(found) == limit else None}

    @server.tool(title="Read an incident", annotations=READ_ONLY)
    def get_incident(incident_id: int, ctx: Context | None = None) -> dict[str, Any]:
        """Read one incident with every field: its problem signature, root cause, resolution steps
        and related incidents.

        Args:
            incident_id: the incident's id (from list_incidents or find_similar_incidents).

        Returns:
            The incident: id, title, description, severity, incident_type, problem_signature,
            root_cause, solution, resolution_steps, resolution_time_minutes, was_successful,
            recurred, occurred_at, tags, related_incidents, visibility, knowledge_document_id and
            created_at.
        """
        with tool_errors():
            return lib.incidents.get(tool_caller(lib, ctx), incident_id)
