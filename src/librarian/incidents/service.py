"""Incidents: record them (each with its incident-report document), read them, find similar ones,
and learn from users' similar / not similar verdicts. Composed on the facade as ``lib.incidents``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from librarian.embeddings.cache import content_hash
from librarian.errors import InvalidInputError, NotFoundError
from librarian.incidents.index import IncidentIndex, posting_terms
from librarian.incidents.models import Incident, SimilarityVerdict
from librarian.incidents.signature import ProblemSignature
from librarian.incidents.similarity import combine, error_terms, structured_parts, verdict_factor
from librarian.index.grants_sql import grants_condition
from librarian.knowledge.access import Principal, Scope, can_read
from librarian.knowledge.documents import SEVERITIES, DocumentDraft
from librarian.storage.models import Document, as_utc

if TYPE_CHECKING:
    from librarian.app import Librarian

INCIDENT_TYPES = ("outage", "degradation", "error", "anomaly", "security", "other")
# Candidates scored on their structured signature: the best by text, plus those sharing the most
# terms with the query (terms shared by more incidents than MAX_POSTING say little and are skipped).
TEXT_CANDIDATES = 60
TERM_CANDIDATES = 60
MAX_POSTING = 2000


@dataclass(frozen=True)
class IncidentDraft:
    """An incident as a caller records it (the design's fields)."""

    title: str
    description: str = ""
    incident_type: str | None = None
    severity: str | None = None
    signature: ProblemSignature = field(default_factory=ProblemSignature)
    root_cause: str | None = None
    solution_applied: str | None = None
    resolution_steps: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    related_incidents: tuple[int, ...] = ()
    resolution_time_minutes: int | None = None
    was_successful: bool | None = None
    recurred: bool = False
    occurred_at: datetime | None = None
    visibility: str | None = None
    allowed_teams: tuple[int | str, ...] = ()
    category: str | None = None
    workflow_id: str | None = None
    origin: dict[str, Any] = field(default_factory=dict)

    def check(self, where: str = "incident") -> None:
        """Refuse values no incident can have, naming the field."""
        if not self.title.strip() or len(self.title) > 500:
            raise InvalidInputError(f"{where}.title: use 1-500 characters")
        if self.severity is not None and self.severity not in SEVERITIES:
            raise InvalidInputError(
                f"{where}.severity: unknown severity {self.severity!r}", hint=f"use {', '.join(SEVERITIES)}"
            )
        if self.incident_type is not None and self.incident_type not in INCIDENT_TYPES:
            raise InvalidInputError(
                f"{where}.incident_type: unknown type {self.incident_type!r}",
                hint=f"use {', '.join(INCIDENT_TYPES)}",
            )
        if self.resolution_time_minutes is not None and not 0 <= self.resolution_time_minutes <= 10_000_000:
            raise InvalidInputError(f"{where}.resolution_time_minutes: expected minutes from 0")

    def markdown(self) -> str:
        """The incident report document: problem, root cause, resolution."""
        sig = self.signature
        lines = [f"# {self.title.strip()}", "", self.description.strip(), "", "## Problem", ""]
        for label, values in (
            ("Symptoms", sig.symptoms),
            ("Error messages", sig.error_messages),
            ("Affected services", sig.affected_services),
        ):
            if values:
                lines.append(f"- {label}: " + "; ".join(values))
        if sig.infrastructure:
            lines.append(f"- Infrastructure: {sig.infrastructure}")
        if self.root_cause:
            lines += ["", "## Root cause", "", self.root_cause.strip()]
        if self.solution_applied or self.resolution_steps:
            lines += ["", "## Resolution", "", (self.solution_applied or "").strip()]
            lines += [f"{number}. {step}" for number, step in enumerate(self.resolution_steps, start=1)]
        return "\n".join(lines).strip() + "\n"


class IncidentService:
    """Record, read and match incidents on behalf of a principal."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib
        self._index: IncidentIndex | None = None

    @property
    def index(self) -> IncidentIndex:
        """The in-memory incident matrix (built on first use)."""
        if self._index is None:
            self._index = IncidentIndex(self._lib.sessions, self._lib.cache)
        return self._index

    # -- writing --------------------------------------------------------------------------------

    def create(self, principal: Principal, draft: IncidentDraft) -> dict[str, Any]:
        """Record an incident and its incident-report document; both are searchable on return."""
        self.embed_problem(draft)
        with self._lib.sessions.begin() as session:
            incident = self.create_in(session, principal, draft)
            incident_id = incident.id
        self._lib.vectors.apply_outbox()
        return self.get(principal, incident_id)

    def embed_problem(self, *drafts: IncidentDraft) -> None:
        """Put the problem texts' vectors in the embedding cache; call before :meth:`create_in`'s
        transaction (the cache writes in its own, which SQLite would make wait for the caller's)."""
        self._lib.cache.embed_documents(
            [d.signature.text(title=d.title, description=d.description) for d in drafts]
        )

    def create_in(
        self, session: Session, principal: Principal, draft: IncidentDraft, document: Document | None = None
    ) -> Incident:
        """Record an incident inside the caller's transaction (the caller applies the vector outbox).

        ``document`` is the knowledge document it belongs to; by default an incident report is
        written from the incident's fields. Call :meth:`embed_problem` first.
        """
        principal.require(Scope.WRITE, "recording an incident")
        draft.check()
        document = document or self._lib.knowledge.documents.create_in(
            session,
            principal,
            DocumentDraft(
                title=draft.title,
                content=draft.markdown(),
                document_type="incident_report",
                category=draft.category,
                tags=draft.tags,
                severity=draft.severity,
                visibility=draft.visibility,
                allowed_teams=draft.allowed_teams or None,
                source_type="investigation" if draft.workflow_id else "manual",
            ),
        )
        problem_text = draft.signature.text(title=draft.title, description=draft.description)
        related = self._readable_ids(session, principal, draft.related_incidents, "related_incidents")
        incident = Incident(
            organization_id=document.organization_id,
            created_by=principal.user_id,
            visibility=document.visibility,
            allowed_teams=list(document.allowed_teams or []),
            access_grants=list(document.access_grants),
            knowledge_document_id=document.id,
            workflow_id=draft.workflow_id,
            title=draft.title.strip(),
            description=draft.description,
            incident_type=draft.incident_type,
            severity=draft.severity,
            problem_signature=draft.signature.to_dict(),
            normalized=draft.signature.normalized(),
            problem_hash=content_hash(problem_text),
            root_cause=draft.root_cause,
            solution_applied=draft.solution_applied,
            resolution_steps=list(draft.resolution_steps),
            tags=sorted(set(draft.tags)),
            related_incidents=related,
            resolution_time_minutes=draft.resolution_time_minutes,
            was_successful=draft.was_successful,
            recurred=draft.recurred,
            occurred_at=as_utc(draft.occurred_at),
            origin=dict(draft.origin),
        )
        session.add(incident)
        session.flush()
        return incident

    def mark(self, principal: Principal, incident_id: int, other_id: int, *, similar: bool) -> dict[str, Any]:
        """Record that ``other_id`` is (or is not) similar to ``incident_id``.

        Not similar: the pair is never returned for that incident again, and its shared features
        count against pairs like it. Similar: each becomes a related incident of the other.
        """
        principal.require(Scope.WRITE, "giving similarity feedback")
        if incident_id == other_id:
            raise InvalidInputError("other_id: an incident is always similar to itself")
        with self._lib.sessions.begin() as session:
            incident = self._readable(session, principal, incident_id)
            other = self._readable(session, principal, other_id)
            match = structured_parts(
                incident.normalized or {}, other.normalized or {}, other.problem_signature or {}
            )
            row = session.scalar(
                select(SimilarityVerdict).where(
                    SimilarityVerdict.incident_id == incident.id,
                    SimilarityVerdict.other_id == other.id,
                    SimilarityVerdict.user_id == principal.user_id,
                )
            )
            if row is None:
                row = SimilarityVerdict(
                    incident_id=incident.id,
                    other_id=other.id,
                    organization_id=principal.organization_id,
                    user_id=principal.user_id,
                    similar=similar,
                    features=sorted(set(match.features)),
                )
                session.add(row)
            row.similar = similar
            if similar:
                for first, second in ((incident, other), (other, incident)):
                    if second.id not in (first.related_incidents or []):
                        first.related_incidents = [*(first.related_incidents or []), second.id]
            return {
                "incident_id": incident.id,
                "other_id": other.id,
                "similar": similar,
                "features": row.features,
            }

    def import_path(self, principal: Principal, path: Path) -> dict[str, Any]:
        """Import post-mortems (Markdown), JSON, JSON Lines and CSV files from a file or folder."""
        from librarian.incidents.importer import import_incidents

        return import_incidents(self._lib, principal, path).to_dict()

    def import_texts(self, principal: Principal, texts: list[tuple[str, str]]) -> dict[str, Any]:
        """Import incidents from ``(file name, text)`` pairs (uploads); the suffix names the format."""
        from librarian.incidents.importer import import_texts

        return import_texts(self._lib, principal, texts).to_dict()

    # -- reading --------------------------------------------------------------------------------

    def get(self, principal: Principal, incident_id: int) -> dict[str, Any]:
        """One incident with every field (404 for one the caller may not read)."""
        with self._lib.sessions() as session:
            return incident_view(self._readable(session, principal, incident_id))

    def list_incidents(
        self, principal: Principal, *, limit: int = 50, after_id: int = 0, severity: str | None = None
    ) -> list[dict[str, Any]]:
        """Incidents the caller may read, by id (``after_id`` pages on)."""
        if not 1 <= limit <= 500:
            raise InvalidInputError("limit: use 1 to 500")
        with self._lib.sessions() as session:
            query = (
                select(Incident)
                .where(Incident.id > after_id, self._visible(session, principal))
                .order_by(Incident.id)
                .limit(limit)
            )
            if severity is not None:
                query = query.where(Incident.severity == severity)
            return [incident_view(row) for row in session.scalars(query)]

    def find_similar(
        self,
        principal: Principal,
        description: str = "",
        *,
        signature: ProblemSignature | None = None,
        limit: int = 5,
        incident_id: int | None = None,
    ) -> list[dict[str, Any]]:
        """``find_similar_incidents``: past incidents like this problem, best first.

        ``incident_id`` names the incident being investigated: it is left out of the answer, and so
        is every incident marked not similar to it.

        Raises:
            InvalidInputError: no description and an empty signature, or a limit outside 1-50.
        """
        principal.require(Scope.READ, "finding similar incidents")
        signature = signature or ProblemSignature()
        if not 1 <= limit <= 50:
            raise InvalidInputError(f"limit: use 1 to 50, not {limit}")
        if not description.strip() and signature.is_empty():
            raise InvalidInputError("description: describe the problem, or give symptoms, errors or services")
        query = signature.normalized()
        text = signature.text(description=description)
        vector = self._lib.cache.embed_query(text).reshape(-1).astype(np.float32)
        matrix = self.index.matrix()
        if len(matrix.ids) == 0:
            return []
        visible = matrix.mask(principal.grants)
        excluded = self._excluded(principal, incident_id)
        scores = matrix.vectors @ vector
        scores = np.where(visible, scores, -np.inf)
        count = int(visible.sum())
        if count == 0:
            return []
        best = np.argpartition(-scores, min(TEXT_CANDIDATES, count) - 1)[: min(TEXT_CANDIDATES, count)]
        candidates = {int(row) for row in best if visible[row]}
        # Incidents sharing the most discriminating terms with the query (a service, an error word)
        # join the pool even when their text is far: the structured parts may still rank them first.
        shared: Counter[int] = Counter()
        for term in posting_terms(query):
            rows = matrix.postings.get(term, [])
            if len(rows) <= MAX_POSTING:
                shared.update(rows)
        if shared:
            ranked = sorted(
                (row for row in shared if visible[row]), key=lambda row: (-shared[row], -float(scores[row]))
            )
            candidates.update(ranked[:TERM_CANDIDATES])
        verdicts = self._verdicts(principal)
        query_errors = error_terms(query["errors"])
        scored = []
        with self._lib.sessions() as session:
            ids = [int(matrix.ids[row]) for row in candidates]
            outcomes = {
                row.id: (row.was_successful, row.recurred)
                for row in session.execute(
                    select(Incident.id, Incident.was_successful, Incident.recurred).where(
                        Incident.id.in_(ids)
                    )
                )
            }
            for row in candidates:
                identifier = int(matrix.ids[row])
                if identifier == incident_id or identifier in excluded or identifier not in outcomes:
                    continue
                was_successful, recurred = outcomes[identifier]
                match = structured_parts(
                    query,
                    matrix.normalized[row],
                    {},
                    query_errors=query_errors,
                    incident_errors=matrix.errors[row],
                )
                score = combine(
                    match, float(scores[row]), was_successful=was_successful, recurred=bool(recurred)
                )
                score *= verdict_factor(match.features, verdicts)
                scored.append((score, identifier, match))
            scored.sort(key=lambda item: (-item[0], item[1]))
            top = scored[:limit]
            rows_by_id = {
                row.id: row
                for row in session.scalars(select(Incident).where(Incident.id.in_([i for _, i, _ in top])))
            }
            results = []
            for score, identifier, match in top:
                found = rows_by_id[identifier]
                if not can_read(principal, found.access_grants):  # defence in depth; the mask already held
                    continue
                given = found.problem_signature or {}
                match.matching_symptoms = structured_parts(
                    query, found.normalized or {}, given, query_errors=query_errors
                ).matching_symptoms
                results.append(
                    {
                        **_summary(found),
                        "similarity_score": round(score, 4),
                        "matching_symptoms": match.matching_symptoms,
                        "matched": {
                            "text": round(match.parts.get("text", 0.0), 4),
                            "error_messages": match.matching_errors,
                            "affected_services": match.matching_services,
                            "symptoms": match.matching_symptoms,
                            "infrastructure": match.infrastructure,
                        },
                    }
                )
        return results

    # -- internals ------------------------------------------------------------------------------

    def _excluded(self, principal: Principal, incident_id: int | None) -> set[int]:
        if incident_id is None:
            return set()
        with self._lib.sessions() as session:
            return set(
                session.scalars(
                    select(SimilarityVerdict.other_id).where(
                        SimilarityVerdict.incident_id == incident_id,
                        SimilarityVerdict.organization_id == principal.organization_id,
                        SimilarityVerdict.similar.is_(False),
                    )
                )
            )

    def _verdicts(self, principal: Principal) -> dict[str, tuple[int, int]]:
        """Per feature: how many pairs sharing it were marked similar and not similar (this org)."""
        similar: Counter[str] = Counter()
        not_similar: Counter[str] = Counter()
        with self._lib.sessions() as session:
            for features, verdict in session.execute(
                select(SimilarityVerdict.features, SimilarityVerdict.similar).where(
                    SimilarityVerdict.organization_id == principal.organization_id
                )
            ):
                (similar if verdict else not_similar).update(features or [])
        return {
            feature: (similar[feature], not_similar[feature])
            for feature in similar.keys() | not_similar.keys()
        }

    def _visible(self, session: Session, principal: Principal) -> Any:
        return grants_condition(session.get_bind().dialect.name, Incident.access_grants, principal.grants)

    def _readable(self, session: Session, principal: Principal, incident_id: int) -> Incident:
        principal.require(Scope.READ, "reading incidents")
        row = session.get(Incident, incident_id)
        if row is None or not can_read(principal, row.access_grants):
            raise NotFoundError(f"no incident {incident_id}")
        return row

    def _readable_ids(
        self, session: Session, principal: Principal, ids: tuple[int, ...], field_name: str
    ) -> list[int]:
        for identifier in ids:
            row = session.get(Incident, identifier)
            if row is None or not can_read(principal, row.access_grants):
                raise InvalidInputError(f"{field_name}: no incident {identifier}")
        return sorted(set(ids))


def _summary(row: Incident) -> dict[str, Any]:
    return {
        "id": row.id,
        "title": row.title,
        "severity": row.severity,
        "incident_type": row.incident_type,
        "root_cause": row.root_cause,
        "solution": row.solution_applied,
        "resolution_time_minutes": row.resolution_time_minutes,
        "occurred_at": None if row.occurred_at is None else as_utc(row.occurred_at).isoformat(),
        "was_successful": row.was_successful,
        "recurred": row.recurred,
        "knowledge_document_id": row.knowledge_document_id,
        "url": f"/incidents/{row.id}",
    }


def incident_view(row: Incident) -> dict[str, Any]:
    """Every field of an incident, as the interfaces return it."""
    return {
        **_summary(row),
        "description": row.description,
        "problem_signature": row.problem_signature,
        "resolution_steps": list(row.resolution_steps or []),
        "tags": list(row.tags or []),
        "related_incidents": list(row.related_incidents or []),
        "visibility": row.visibility,
        "organization_id": row.organization_id,
        "created_by": row.created_by,
        "workflow_id": row.workflow_id,
        "origin": dict(row.origin or {}),
        "created_at": as_utc(row.created_at).isoformat(),
    }
