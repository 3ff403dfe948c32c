"""REST routes of incidents (``/incidents``), solutions (``/solutions``) and ``POST /knowledge/save``
(save_learning). Every route acts for the caller the authentication middleware resolved."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field

from librarian.api.knowledge_routes import MAX_ID, caller
from librarian.app import Librarian
from librarian.incidents.learning import Learning
from librarian.incidents.service import IncidentDraft
from librarian.incidents.signature import ProblemSignature

IncidentId = Annotated[int, Path(ge=1, le=MAX_ID, description="The incident's id.")]
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": dict[str, Any]} for code in (401, 403, 404, 409, 422)
}
Strings = list[Annotated[str, Field(max_length=4000)]]


class Signature(BaseModel):
    """The design's problem_signature."""

    model_config = ConfigDict(extra="forbid")

    symptoms: Strings = Field(default_factory=list, max_length=50)
    error_messages: Strings = Field(default_factory=list, max_length=50)
    affected_services: Strings = Field(default_factory=list, max_length=50)
    infrastructure: str | None = Field(default=None, max_length=255)

    def parsed(self) -> ProblemSignature:
        """As the incident service takes it."""
        return ProblemSignature.from_mapping(self.model_dump())


class NewIncident(BaseModel):
    """An incident to record (the design's incident_knowledge fields)."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=500)
    description: str = Field(default="", max_length=100_000)
    incident_type: str | None = Field(
        default=None, description="outage, degradation, error, anomaly, security, other."
    )
    severity: str | None = Field(default=None, description="critical, high, medium or low.")
    problem_signature: Signature = Field(default_factory=Signature)
    root_cause: str | None = Field(default=None, max_length=100_000)
    solution_applied: str | None = Field(default=None, max_length=100_000)
    resolution_steps: Strings = Field(default_factory=list, max_length=200)
    tags: Strings = Field(default_factory=list, max_length=100)
    related_incidents: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        default_factory=list, max_length=100
    )
    resolution_time_minutes: int | None = Field(default=None, ge=0, le=10_000_000)
    was_successful: bool | None = None
    recurred: bool = False
    occurred_at: datetime | None = None
    visibility: str | None = None
    allowed_teams: list[Annotated[int, Field(ge=1, le=MAX_ID)] | str] = Field(default_factory=list)
    category: str | None = Field(default=None, max_length=255)

    def draft(self) -> IncidentDraft:
        """As the incident service takes it."""
        return IncidentDraft(
            title=self.title,
            description=self.description,
            incident_type=self.incident_type,
            severity=self.severity,
            signature=self.problem_signature.parsed(),
            root_cause=self.root_cause,
            solution_applied=self.solution_applied,
            resolution_steps=tuple(self.resolution_steps),
            tags=tuple(self.tags),
            related_incidents=tuple(self.related_incidents),
            resolution_time_minutes=self.resolution_time_minutes,
            was_successful=self.was_successful,
            recurred=self.recurred,
            occurred_at=self.occurred_at,
            visibility=self.visibility,
            allowed_teams=tuple(self.allowed_teams),
            category=self.category,
            origin={"via": "rest"},
        )


class SimilarRequest(BaseModel):
    """find_similar_incidents: the problem at hand."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(default="", max_length=20_000)
    symptoms: Strings = Field(default_factory=list, max_length=50)
    affected_services: Strings = Field(default_factory=list, max_length=50)
    error_messages: Strings = Field(default_factory=list, max_length=50)
    infrastructure: str | None = Field(default=None, max_length=255)
    limit: int = Field(default=5, ge=1, le=50)
    incident_id: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ID,
        description="The incident being investigated (left out, as are its non-matches).",
    )


class ImportFile(BaseModel):
    """One file of an import: its name (the suffix says the format) and its text."""

    model_config = ConfigDict(extra="forbid")

    filename: str = Field(
        min_length=1, max_length=255, description="e.g. 2025-10-15-checkout.md, history.csv"
    )
    content: str = Field(max_length=20_000_000)


class ImportRequest(BaseModel):
    """Post-mortems (Markdown), JSON, JSON Lines or CSV to import."""

    model_config = ConfigDict(extra="forbid")

    files: list[ImportFile] = Field(min_length=1, max_length=1000)


class Verdict(BaseModel):
    """Whether another incident is similar to this one."""

    model_config = ConfigDict(extra="forbid")

    other_id: int = Field(ge=1, le=MAX_ID)
    similar: bool


class SolutionQuery(BaseModel):
    """get_solution: the problem signature to find proven solutions for."""

    model_config = ConfigDict(extra="forbid")

    problem_signature: Signature
    limit: int = Field(default=5, ge=1, le=50)


class Outcome(BaseModel):
    """One use of a solution."""

    model_config = ConfigDict(extra="forbid")

    worked: bool
    incident_id: int | None = Field(default=None, ge=1, le=MAX_ID)
    note: str | None = Field(default=None, max_length=10_000)


class LearningRequest(BaseModel):
    """save_learning, with the design's inputs."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=500)
    document_type: str = Field(default="incident_report", description="incident_report, solution or runbook.")
    content: str = Field(min_length=1, max_length=2_000_000)
    problem_signature: Signature = Field(default_factory=Signature)
    solution: str | None = Field(default=None, max_length=100_000)
    tags: Strings = Field(default_factory=list, max_length=100)
    related_incident_ids: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        default_factory=list, max_length=100
    )
    severity: str | None = None
    root_cause: str | None = Field(default=None, max_length=100_000)
    worked: bool | None = Field(default=None, description="Whether the solution fixed the problem.")
    visibility: str | None = None


def incident_router(lib: Librarian) -> APIRouter:
    """Routes under ``/incidents`` and ``/solutions``, and ``POST /knowledge/save``."""
    router = APIRouter(responses=_ERRORS)

    @router.post("/incidents", status_code=status.HTTP_201_CREATED, tags=["incidents"])
    def create(body: NewIncident, request: Request) -> dict[str, Any]:
        """Record an incident with its incident-report document; needs the ``write`` scope."""
        return lib.incidents.create(caller(request), body.draft())

    @router.get("/incidents", tags=["incidents"])
    def list_incidents(
        request: Request,
        severity: str | None = None,
        limit: int = Query(default=50, ge=1, le=500),
        after: int = Query(
            default=0, ge=0, le=MAX_ID, description="Cursor: the last id of the previous page."
        ),
    ) -> dict[str, Any]:
        """Incidents the caller may read, by id; ``next_after`` is the cursor of the next page."""
        found = lib.incidents.list_incidents(caller(request), limit=limit, after_id=after, severity=severity)
        return {"incidents": found, "next_after": found[-1]["id"] if len(found) == limit else None}

    @router.get("/incidents/{incident_id}", tags=["incidents"])
    def read(incident_id: IncidentId, request: Request) -> dict[str, Any]:
        """One incident with every field."""
        return lib.incidents.get(caller(request), incident_id)

    @router.post("/incidents/import", tags=["incidents"])
    def import_files(body: ImportRequest, request: Request) -> dict[str, Any]:
        """Import post-mortems and exports; each malformed entry is reported with its file and line,
        the rest are imported."""
        return lib.incidents.import_texts(caller(request), [(f.filename, f.content) for f in body.files])

    @router.post("/incidents/similar", tags=["incidents"])
    def similar(body: SimilarRequest, request: Request) -> dict[str, Any]:
        """find_similar_incidents: each with similarity_score, severity, root_cause, solution,
        resolution_time_minutes, occurred_at, matching_symptoms and ``matched`` (which fields)."""
        signature = ProblemSignature.from_mapping(
            body.model_dump(include={"symptoms", "affected_services", "error_messages", "infrastructure"})
        )
        found = lib.incidents.find_similar(
            caller(request),
            body.description,
            signature=signature,
            limit=body.limit,
            incident_id=body.incident_id,
        )
        return {"similar_incidents": found}

    @router.post("/incidents/{incident_id}/feedback", status_code=status.HTTP_201_CREATED, tags=["incidents"])
    def feedback(incident_id: IncidentId, body: Verdict, request: Request) -> dict[str, Any]:
        """Mark another incident similar (it becomes related) or not similar (never shown for this one
        again, and pairs like it rank lower)."""
        return lib.incidents.mark(caller(request), incident_id, body.other_id, similar=body.similar)

    @router.post("/solutions/query", tags=["solutions"])
    def get_solution(body: SolutionQuery, request: Request) -> dict[str, Any]:
        """get_solution: solutions of this problem or a similar one, best-proven first (Wilson lower
        bound of the success rate, scaled by how well the signature matches)."""
        found = lib.solutions.get_solution(caller(request), body.problem_signature.parsed(), body.limit)
        return {"solutions": found}

    @router.post("/solutions/{solution_id}/outcomes", status_code=status.HTTP_201_CREATED, tags=["solutions"])
    def outcome(
        solution_id: Annotated[int, Path(ge=1, le=MAX_ID)], body: Outcome, request: Request
    ) -> dict[str, Any]:
        """Record that a solution worked (or did not); returns its new record."""
        return lib.solutions.record_outcome(
            caller(request), solution_id, worked=body.worked, incident_id=body.incident_id, note=body.note
        )

    @router.post("/knowledge/save", status_code=status.HTTP_201_CREATED, tags=["knowledge"])
    def save_learning(body: LearningRequest, request: Request) -> dict[str, Any]:
        """save_learning: the document, the incident and the solution link, in one transaction."""
        learning = Learning(
            title=body.title,
            content=body.content,
            document_type=body.document_type,
            problem_signature=body.problem_signature.parsed(),
            solution=body.solution,
            tags=tuple(body.tags),
            related_incident_ids=tuple(body.related_incident_ids),
            severity=body.severity,
            root_cause=body.root_cause,
            worked=body.worked,
            visibility=body.visibility,
        )
        return lib.learning.save(caller(request), learning)

    return router
