"""``save_learning``: an investigation's findings become a document, an incident and a solution link,
in one transaction, so the next agent with the same problem finds them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from librarian.errors import InvalidInputError
from librarian.incidents.service import IncidentDraft, incident_view
from librarian.incidents.signature import ProblemSignature
from librarian.incidents.solutions import solution_view
from librarian.knowledge.access import Principal, Scope
from librarian.knowledge.documents import DocumentDraft

if TYPE_CHECKING:
    from librarian.app import Librarian

LEARNING_TYPES = ("incident_report", "solution", "runbook")


@dataclass(frozen=True)
class Learning:
    """The design's ``save_learning`` inputs, plus what an investigation knows about its outcome."""

    title: str
    content: str
    document_type: str = "incident_report"
    problem_signature: ProblemSignature = field(default_factory=ProblemSignature)
    solution: str | None = None
    tags: tuple[str, ...] = ()
    related_incident_ids: tuple[int, ...] = ()
    severity: str | None = None
    root_cause: str | None = None
    worked: bool | None = None
    visibility: str | None = None
    workflow_id: str | None = None
    resolution_steps: Sequence[str] = ()
    origin: dict[str, Any] | None = None


class LearningService:
    """Saves investigations as knowledge (``lib.learning``)."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib

    def save(self, principal: Principal, learning: Learning) -> dict[str, Any]:
        """Create the document, the incident (when there is a problem to match) and the solution link
        in one transaction; returns all three.

        Raises:
            InvalidInputError: an unknown document type, a missing title or content, a related
                incident the caller cannot read.
            ForbiddenError: a token without the ``write`` scope.
        """
        principal.require(Scope.WRITE, "saving a learning")
        if learning.document_type not in LEARNING_TYPES:
            raise InvalidInputError(
                f"document_type: {learning.document_type!r} cannot be saved as a learning",
                hint=f"use {', '.join(LEARNING_TYPES)}",
            )
        content = learning.content
        if learning.solution and learning.solution.strip() not in content:
            content = f"{content.rstrip()}\n\n## Solution\n\n{learning.solution.strip()}\n"
        lib = self._lib
        draft = IncidentDraft(
            title=learning.title,
            description=_first_paragraph(learning.content),
            severity=learning.severity,
            signature=learning.problem_signature,
            root_cause=learning.root_cause,
            solution_applied=learning.solution,
            resolution_steps=tuple(learning.resolution_steps),
            tags=learning.tags,
            related_incidents=learning.related_incident_ids,
            was_successful=learning.worked,
            visibility=learning.visibility,
            workflow_id=learning.workflow_id,
            origin=dict(learning.origin or {"saved_by": "save_learning"}),
        )
        records_incident = (
            not learning.problem_signature.is_empty() or learning.document_type == "incident_report"
        )
        if records_incident:
            lib.incidents.embed_problem(draft)
        with lib.sessions.begin() as session:
            document = lib.knowledge.documents.create_in(
                session,
                principal,
                DocumentDraft(
                    title=learning.title,
                    content=content,
                    document_type=learning.document_type,
                    tags=learning.tags,
                    severity=learning.severity,
                    visibility=learning.visibility,
                    source_type="investigation",
                ),
            )
            incident = None
            if records_incident:
                incident = lib.incidents.create_in(session, principal, draft, document=document)
            solution = None
            if learning.solution and not learning.problem_signature.is_empty():
                solution = lib.solutions.link_in(
                    session,
                    principal,
                    learning.problem_signature,
                    title=learning.title,
                    solution=learning.solution,
                    grants=list(document.access_grants),
                    visibility=document.visibility,
                    document_id=document.id,
                )
                if learning.worked is not None:
                    lib.solutions.outcome_in(
                        session,
                        solution,
                        worked=learning.worked,
                        incident_id=None if incident is None else incident.id,
                        user_id=principal.user_id,
                    )
            result = {
                "document_id": document.id,
                "incident": None if incident is None else incident_view(incident),
                "solution": None if solution is None else solution_view(solution),
            }
        lib.vectors.apply_outbox()
        return result


def _first_paragraph(text: str) -> str:
    for block in text.split("\n\n"):
        stripped = block.strip()
        if stripped and not stripped.startswith("#"):
            return stripped[:2000]
    return ""
