"""Knowledge documents written by hand or saved by agents: create, edit (every edit a new version),
read any version, restore, delete, with access control on every call.

A knowledge document is a row of the store's ``documents`` table like any ingested file, so search,
research and the vector index treat both alike. Hand-written documents of an organisation live in
one source per organisation (``knowledge://<organisation id>``, kind ``knowledge``); ingested
documents can be read here too but are changed by re-ingesting their source.

Concurrent edits: every change names the version it was based on (``base_version``); when another
user saved a newer one meanwhile the change is refused with a conflict, never applied over it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from librarian.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from librarian.index.grants_sql import grants_condition
from librarian.ingest.chunking import chunk_document
from librarian.ingest.parsed import ParseError
from librarian.ingest.parsers.registry import parse_document
from librarian.ingest.pipeline import new_chunks
from librarian.knowledge.access import (
    Principal,
    Scope,
    Visibility,
    can_change,
    can_read,
    owner_for,
)
from librarian.knowledge.models import KnowledgeFeedback
from librarian.storage import repository
from librarian.storage.models import Chunk, Document, DocumentVersion, Source, as_utc, utcnow
from librarian.storage.repository import KNOWLEDGE_KIND

if TYPE_CHECKING:
    from librarian.app import Librarian

DOCUMENT_TYPES = ("runbook", "incident_report", "documentation", "wiki", "solution")
SEVERITIES = ("critical", "high", "medium", "low")
SOURCE_TYPES = ("manual", "investigation", "import", "github")
MAX_CONTENT_CHARS = 2_000_000
# The fields a version records (besides its content), shown when an old version is read.
_VERSIONED = frozenset(
    {
        "title",
        "description",
        "document_type",
        "category",
        "tags",
        "visibility",
        "allowed_teams",
        "severity",
        "content_structured",
    }
)


@dataclass(frozen=True)
class DocumentDraft:
    """The fields of a knowledge document as a caller gives them (``None``: unchanged on edit)."""

    title: str | None = None
    content: str | None = None
    description: str | None = None
    document_type: str | None = None
    category: str | None = None
    tags: tuple[str, ...] | None = None
    content_structured: dict[str, Any] | None = None
    severity: str | None = None
    visibility: str | None = None
    allowed_teams: tuple[int | str, ...] | None = None
    source_type: str | None = None
    source_url: str | None = None
    source_file_path: str | None = None


def _check(draft: DocumentDraft, *, creating: bool) -> None:
    if creating and not (draft.title or "").strip():
        raise InvalidInputError("title: a knowledge document needs a title")
    if creating and not (draft.content or "").strip():
        raise InvalidInputError("content: a knowledge document needs content")
    if draft.title is not None and (not draft.title.strip() or len(draft.title) > 500):
        raise InvalidInputError("title: use 1-500 characters")
    if draft.content is not None and len(draft.content) > MAX_CONTENT_CHARS:
        raise InvalidInputError(f"content: at most {MAX_CONTENT_CHARS} characters")
    if draft.document_type is not None and draft.document_type not in DOCUMENT_TYPES:
        raise InvalidInputError(
            f"document_type: unknown type {draft.document_type!r}",
            hint=f"use one of {', '.join(DOCUMENT_TYPES)}",
        )
    if draft.severity is not None and draft.severity not in SEVERITIES:
        raise InvalidInputError(
            f"severity: unknown severity {draft.severity!r}", hint=f"use one of {', '.join(SEVERITIES)}"
        )
    if draft.source_type is not None and draft.source_type not in SOURCE_TYPES:
        raise InvalidInputError(
            f"source_type: unknown source type {draft.source_type!r}",
            hint=f"use one of {', '.join(SOURCE_TYPES)}",
        )
    if draft.tags is not None and any(not isinstance(tag, str) or not tag.strip() for tag in draft.tags):
        raise InvalidInputError("tags: every tag must be a non-empty string")
    if draft.content_structured is not None:
        if not isinstance(draft.content_structured, Mapping):
            raise InvalidInputError("content_structured: must be a JSON object")
        try:
            json.dumps(draft.content_structured)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"content_structured: not JSON: {exc}") from exc


class KnowledgeDocuments:
    """The knowledge documents of every organisation, read and changed on behalf of a principal."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib
        self._sessions = lib.sessions

    # -- writing --------------------------------------------------------------------------------

    def create(self, principal: Principal, draft: DocumentDraft) -> dict[str, Any]:
        """Add a document (version 1); it is searchable when this returns.

        Raises:
            InvalidInputError: a missing title or content, an unknown type, severity or visibility.
            ForbiddenError: no ``write`` scope, or ``public`` asked for by a non-administrator.
        """
        with self._sessions.begin() as session:
            document_id = self.create_in(session, principal, draft).id
        self._lib.vectors.apply_outbox()
        return self.get(principal, document_id, count_view=False)

    def create_in(self, session: Session, principal: Principal, draft: DocumentDraft) -> Document:
        """Add a document inside the caller's transaction (with an incident, a solution...).

        The caller must apply the vector outbox after committing (``lib.vectors.apply_outbox()``).
        """
        principal.require(Scope.WRITE, "adding knowledge")
        _check(draft, creating=True)
        labels = self.labels_for(principal, draft)
        source = self._knowledge_source(session, principal.organization_id)
        return self._write_version(session, source, uuid.uuid4().hex, draft, labels, principal, previous=None)

    def labels_for(self, principal: Principal, draft: DocumentDraft) -> repository.DocumentLabels:
        """The labels and access of something ``principal`` creates from ``draft`` (checked)."""
        teams = self._lib.identity.team_ids_of(principal.organization_id, draft.allowed_teams or ())
        owner = owner_for(principal, draft.visibility or Visibility.ORGANIZATION.value, teams)
        return repository.DocumentLabels(
            organization_id=owner.organization_id,
            created_by=principal.user_id,
            visibility=(owner.visibility or Visibility.ORGANIZATION).value,
            allowed_teams=owner.allowed_teams,
            document_type=draft.document_type or "documentation",
            category=draft.category,
            tags=tuple(draft.tags or ()),
        )

    def update(
        self, principal: Principal, document_id: int, base_version: int, draft: DocumentDraft
    ) -> dict[str, Any]:
        """Save a new version with the fields of ``draft`` that are not ``None``.

        Raises:
            NotFoundError: no such document, or one the caller may not read.
            ForbiddenError: the caller may read but not change it.
            ConflictError: the document is no longer at ``base_version`` (someone saved meanwhile),
                or it is an ingested document (re-ingest its source instead).
        """
        with self._sessions.begin() as session:
            self.update_in(session, principal, document_id, base_version, draft)
        self._lib.vectors.apply_outbox()
        return self.get(principal, document_id, count_view=False)

    def update_in(
        self,
        session: Session,
        principal: Principal,
        document_id: int,
        base_version: int | None,
        draft: DocumentDraft,
    ) -> Document:
        """:meth:`update` inside the caller's transaction (the caller applies the vector outbox)."""
        _check(draft, creating=False)
        document = self._changeable(session, principal, document_id, base_version)
        source = session.get(Source, document.source_id)
        assert source is not None
        previous = self._current(session, document)
        merged = _merge(previous, document, draft)
        teams = (
            self._lib.identity.team_ids_of(document.organization_id, draft.allowed_teams)
            if draft.allowed_teams is not None
            else tuple(document.allowed_teams or ())
        )
        visibility = draft.visibility or document.visibility
        if draft.visibility is not None or draft.allowed_teams is not None:
            owner_for(principal, visibility, teams if visibility == Visibility.TEAMS.value else ())
        labels = repository.DocumentLabels(
            organization_id=document.organization_id,
            created_by=document.created_by,
            visibility=visibility,
            allowed_teams=teams if visibility == Visibility.TEAMS.value else (),
            document_type=merged.document_type,
            category=merged.category,
            tags=tuple(merged.tags or ()),
        )
        return self._write_version(
            session, source, document.path, merged, labels, principal, previous=document
        )

    def restore(
        self, principal: Principal, document_id: int, version: int, base_version: int
    ) -> dict[str, Any]:
        """Save a new version equal to an earlier ``version`` (its content, title and labels)."""
        with self._sessions() as session:
            document = self._readable(session, principal, document_id)
            old = session.scalar(
                select(DocumentVersion).where(
                    DocumentVersion.document_id == document.id, DocumentVersion.version_no == version
                )
            )
            if old is None:
                raise NotFoundError(f"document {document_id} has no version {version}")
            fields = dict(old.fields or {})
        draft = DocumentDraft(
            title=fields.get("title") or document.title,
            content=old.text,
            description=fields.get("description"),
            document_type=fields.get("document_type"),
            category=fields.get("category"),
            tags=tuple(fields.get("tags") or ()),
            content_structured=fields.get("content_structured"),
            severity=fields.get("severity"),
            visibility=fields.get("visibility"),
            allowed_teams=tuple(fields.get("allowed_teams") or ()),
        )
        return self.update(principal, document_id, base_version, draft)

    def delete(
        self, principal: Principal, document_id: int, base_version: int | None = None
    ) -> dict[str, Any]:
        """Remove a document from search; its versions stay in the history (nothing is lost)."""
        with self._sessions.begin() as session:
            document = self._changeable(session, principal, document_id, base_version)
            repository.mark_deleted(session, document, utcnow())
            result = {"id": document.id, "deleted": True, "version": document.current_version_no}
        self._lib.vectors.apply_outbox()
        return result

    # -- reading --------------------------------------------------------------------------------

    def get(
        self, principal: Principal, document_id: int, version: int | None = None, *, count_view: bool = True
    ) -> dict[str, Any]:
        """A document with its full content (the current version, or ``version``).

        Raises:
            NotFoundError: no such document or version, or one the caller may not read (the two are
                indistinguishable on purpose, so ids do not reveal what exists).
        """
        with self._sessions.begin() as session:
            document = self._readable(session, principal, document_id)
            wanted = version or document.current_version_no
            row = session.scalar(
                select(DocumentVersion).where(
                    DocumentVersion.document_id == document.id, DocumentVersion.version_no == wanted
                )
            )
            if row is None:
                raise NotFoundError(f"document {document_id} has no version {wanted}")
            if count_view and version is None:
                document.view_count = (document.view_count or 0) + 1
                document.last_used_at = utcnow()
            view = document_view(session, document)
            if row.version_no != document.current_version_no:  # an old version: its own fields
                recorded = {key: value for key, value in (row.fields or {}).items() if key in _VERSIONED}
                view.update(recorded, is_public=recorded.get("visibility") == Visibility.PUBLIC.value)
            return {**view, **_version_view(row), "content": row.text}

    def history(self, principal: Principal, document_id: int) -> list[dict[str, Any]]:
        """Every version of a document, newest first, without content."""
        with self._sessions() as session:
            document = self._readable(session, principal, document_id)
            rows = session.scalars(
                select(DocumentVersion)
                .where(DocumentVersion.document_id == document.id)
                .order_by(DocumentVersion.version_no.desc())
            )
            return [_version_view(row) for row in rows]

    def list_documents(
        self, principal: Principal, *, document_type: str | None = None, limit: int = 50, after_id: int = 0
    ) -> list[dict[str, Any]]:
        """Documents the caller may read, by id (``after_id`` pages on), hand-written and ingested."""
        if not 1 <= limit <= 500:
            raise InvalidInputError("limit: use 1 to 500")
        with self._sessions() as session:
            query = (
                select(Document)
                .where(Document.deleted_at.is_(None), Document.id > after_id)
                .where(visible_documents(session, principal))
                .order_by(Document.id)
                .limit(limit)
            )
            if document_type is not None:
                query = query.where(Document.document_type == document_type)
            documents = list(session.scalars(query))
            flags = flags_for(session, documents)  # one query for the page, not one per document
            return [document_view(session, document, flags[document.id]) for document in documents]

    # -- internals ------------------------------------------------------------------------------

    def _knowledge_source(self, session: Session, organization_id: int) -> Source:
        spec = repository.SourceSpec(
            uri=f"knowledge://{organization_id}",
            kind=KNOWLEDGE_KIND,
            organization_id=organization_id,
            visibility=Visibility.ORGANIZATION.value,
        )
        return repository.get_or_create_source(session, spec)

    def _write_version(
        self,
        session: Session,
        source: Source,
        path: str,
        draft: DocumentDraft,
        labels: repository.DocumentLabels,
        principal: Principal,
        previous: Document | None,
    ) -> Document:
        content = draft.content or ""
        title = (draft.title or "").strip()
        chunks = self._chunks(title, content, path)
        extra = {
            "description": draft.description,
            "content_structured": draft.content_structured,
            "severity": draft.severity,
        }
        raw = json.dumps([title, content, labels.fields(), extra], sort_keys=True, default=str)
        try:
            document, _, _ = repository.store_document_version(
                session,
                source,
                path=path,
                source_url=previous.source_url if previous is not None else "",
                title=title,
                raw_hash=hashlib.sha256(raw.encode("utf-8")).hexdigest(),
                text=content,
                chunks=chunks,
                embedding_model_version=self._lib.cache.embedder.model_version,
                fetched_at=utcnow(),
                labels=labels,
                created_by=principal.user_id,
                extra_fields=extra,
            )
            session.flush()
        except IntegrityError as exc:  # two edits based on the same version: the second loses
            raise ConflictError(
                "the document was changed meanwhile", hint="read it again and redo the edit"
            ) from exc
        if previous is None:
            document.source_type = draft.source_type or "manual"
            document.source_url = draft.source_url or f"/knowledge/{document.id}"
        elif draft.source_url is not None:
            document.source_url = draft.source_url
        document.description = draft.description
        document.content_structured = draft.content_structured
        attributes = dict(document.attributes or {})
        attributes["severity"] = draft.severity
        if draft.source_file_path is not None:
            attributes["source_file_path"] = draft.source_file_path
        document.attributes = {key: value for key, value in attributes.items() if value is not None}
        # Chunks carry the document's URL, which is known only once the document has an id.
        for chunk in document_chunks(session, document.id):
            chunk.source_url = document.source_url
        return document

    def _chunks(self, title: str, content: str, path: str) -> list[repository.NewChunk]:
        text = content if content.lstrip().startswith("#") else f"# {title}\n\n{content}"
        try:
            parsed = parse_document(f"{path}.md", text.encode("utf-8"))
        except ParseError as exc:
            raise InvalidInputError(f"content: cannot be read as Markdown: {exc}") from exc
        drafts = chunk_document(parsed, max_chars=self._lib.settings.chunk_max_chars)
        return new_chunks(drafts, {})

    @staticmethod
    def _current(session: Session, document: Document) -> DocumentVersion:
        row = session.scalar(
            select(DocumentVersion).where(
                DocumentVersion.document_id == document.id,
                DocumentVersion.version_no == document.current_version_no,
            )
        )
        assert row is not None
        return row

    @staticmethod
    def _readable(session: Session, principal: Principal, document_id: int) -> Document:
        principal.require(Scope.READ, "reading knowledge")
        document = session.get(Document, document_id)
        if (
            document is None
            or document.deleted_at is not None
            or not can_read(principal, document.access_grants)
        ):
            raise NotFoundError(f"no knowledge document {document_id}")
        return document

    def _changeable(
        self, session: Session, principal: Principal, document_id: int, base_version: int | None
    ) -> Document:
        document = self._readable(session, principal, document_id)
        if not can_change(principal, document.organization_id, document.created_by):
            raise ForbiddenError(
                f"document {document_id} can be changed by its author or an administrator of its organisation"
            )
        source = session.get(Source, document.source_id)
        if source is None or source.kind != KNOWLEDGE_KIND:
            raise ConflictError(
                f"document {document_id} was ingested from a source ({document.source_url})",
                hint="change the source and refresh it",
            )
        if base_version is not None and base_version != document.current_version_no:
            raise ConflictError(
                f"document {document_id} is at version {document.current_version_no}, not {base_version}: "
                "someone changed it meanwhile",
                hint="read the current version and apply your change to it",
            )
        return document


def _merge(previous: DocumentVersion, document: Document, draft: DocumentDraft) -> DocumentDraft:
    fields = dict(previous.fields or {})

    def pick(name: str, current: Any) -> Any:
        value = getattr(draft, name)
        return current if value is None else value

    return DocumentDraft(
        title=pick("title", document.title),
        content=pick("content", previous.text),
        description=pick("description", document.description),
        document_type=pick("document_type", document.document_type),
        category=pick("category", document.category),
        tags=pick("tags", tuple(document.tags or ())),
        content_structured=pick("content_structured", document.content_structured),
        severity=pick("severity", fields.get("severity")),
        source_url=draft.source_url,
        source_file_path=draft.source_file_path,
    )


def document_chunks(session: Session, document_id: int) -> Sequence[Chunk]:
    """The chunks of a document's current version."""
    return list(session.scalars(select(Chunk).where(Chunk.document_id == document_id)))


def visible_documents(session: Session, principal: Principal) -> Any:
    """The SQL condition keeping the documents ``principal`` may read."""
    return grants_condition(session.get_bind().dialect.name, Document.access_grants, principal.grants)


def flags_of(session: Session, document: Document) -> dict[str, int]:
    """How many readers called the current version outdated or incorrect."""
    return flags_for(session, [document])[document.id]


def flags_for(session: Session, documents: Sequence[Document]) -> dict[int, dict[str, int]]:
    """Per document: how many readers called its current version outdated or incorrect (one query)."""
    if not documents:
        return {}
    current = {document.id: document.current_version_no for document in documents}
    rows = session.execute(
        select(
            KnowledgeFeedback.document_id,
            KnowledgeFeedback.document_version_no,
            KnowledgeFeedback.feedback_type,
            func.count(),
        )
        .where(
            KnowledgeFeedback.document_id.in_(list(current)),
            KnowledgeFeedback.feedback_type.in_(("outdated", "incorrect")),
        )
        .group_by(
            KnowledgeFeedback.document_id,
            KnowledgeFeedback.document_version_no,
            KnowledgeFeedback.feedback_type,
        )
    ).all()
    flags: dict[int, dict[str, int]] = {document_id: {} for document_id in current}
    for document_id, version, kind, count in rows:
        if version == current[document_id]:
            flags[document_id][kind] = int(count)
    return flags


def document_view(
    session: Session, document: Document, flags: dict[str, int] | None = None
) -> dict[str, Any]:
    """The design's fields of a knowledge document (no content); ``flags`` when already read."""

    def stamp(moment: datetime | None) -> str | None:
        return None if moment is None else as_utc(moment).isoformat()

    attributes = dict(document.attributes or {})
    return {
        "id": document.id,
        "title": document.title,
        "description": document.description,
        "document_type": document.document_type,
        "category": document.category,
        "tags": list(document.tags or []),
        "severity": attributes.get("severity"),
        "content_structured": document.content_structured,
        "source_type": document.source_type,
        "source_url": document.source_url,
        "source_file_path": attributes.get("source_file_path"),
        "version": document.current_version_no,
        "organization_id": document.organization_id,
        "created_by": document.created_by,
        "updated_by": document.updated_by,
        "visibility": document.visibility,
        "is_public": document.visibility == Visibility.PUBLIC.value,
        "allowed_teams": list(document.allowed_teams or []),
        "view_count": document.view_count or 0,
        "usefulness_score": round(float(document.usefulness_score), 3),
        "feedback_count": document.feedback_count or 0,
        "last_used_at": stamp(document.last_used_at),
        "created_at": stamp(document.created_at),
        "updated_at": stamp(document.updated_at),
        "flags": flags_of(session, document) if flags is None else flags,
        "url": f"/knowledge/{document.id}",
    }


def _version_view(row: DocumentVersion) -> dict[str, Any]:
    fields = dict(row.fields or {})
    return {
        "version": row.version_no,
        "version_created_by": row.created_by,
        "version_created_at": as_utc(row.fetched_at).isoformat(),
        "version_title": fields.get("title"),
        "content_hash": row.content_hash,
    }
