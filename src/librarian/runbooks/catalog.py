"""Stored runbooks: add, edit (every edit a new version), read any version, list, import a folder.

A runbook is saved with its knowledge document (``document_type: runbook``: the steps as Markdown,
the validated document as ``content_structured``) in one transaction, so search and
``search_knowledge`` find it, and both carry the same organisation and grants. Names are unique in
an organisation: adding a runbook whose name exists makes a new version of it (unchanged text makes
none), which is what re-importing a folder of YAML files should do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from librarian.embeddings.cache import content_hash
from librarian.errors import ConflictError, ForbiddenError, InvalidInputError, LibrarianError, NotFoundError
from librarian.index.grants_sql import grants_condition
from librarian.knowledge.access import Principal, Scope, can_change, can_read
from librarian.knowledge.documents import DocumentDraft
from librarian.runbooks.format import Runbook, parse_runbook, parse_runbook_text
from librarian.runbooks.models import RunbookRow, RunbookVersion
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

RUNBOOK_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class RunbookInput:
    """A runbook as a caller gives it: its text and where it came from."""

    text: str
    origin: str = "runbook"
    json_format: bool = False
    visibility: str | None = None
    allowed_teams: tuple[int | str, ...] = ()
    note: str = ""

    def parsed(self) -> Runbook:
        """The validated runbook (raises RunbookInvalidError naming ``origin``, step and field)."""
        return parse_runbook_text(self.text, origin=self.origin, json_format=self.json_format)


class RunbookCatalog:
    """The runbooks of every organisation, read and changed on behalf of a principal."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib
        # A version never changes once saved: its validated runbook is kept, not parsed per step.
        self._definitions: dict[tuple[int, int], Runbook] = {}

    # -- writing --------------------------------------------------------------------------------

    def add(self, principal: Principal, given: RunbookInput) -> dict[str, Any]:
        """Store a runbook, or a new version of the one with the same name in the caller's organisation.

        Returns the runbook's view with ``change``: ``created``, ``new_version`` or ``unchanged``.

        Raises:
            RunbookInvalidError: the runbook breaks the format.
            ForbiddenError: no ``write`` scope, or the same-named runbook is someone else's.
        """
        principal.require(Scope.WRITE, "adding runbooks")
        runbook = given.parsed()
        self._lib.cache.embed_documents([runbook.search_text()])
        with self._lib.sessions.begin() as session:
            row = session.scalar(
                select(RunbookRow).where(
                    RunbookRow.organization_id == principal.organization_id, RunbookRow.name == runbook.name
                )
            )
            if row is None:
                row, change = self._create_in(session, principal, runbook, given), "created"
            else:
                change = self._revise_in(session, principal, row, runbook, given, base_version=None)
            runbook_id = row.id
        self._lib.vectors.apply_outbox()
        return {**self.get(principal, runbook_id), "change": change}

    def update(
        self, principal: Principal, runbook_id: int, given: RunbookInput, *, base_version: int | None = None
    ) -> dict[str, Any]:
        """Save a new version of a runbook from new text (its name may change).

        Raises:
            NotFoundError: no runbook the caller may read. ForbiddenError: it may not change it.
            ConflictError: it is no longer at ``base_version``.
        """
        runbook = given.parsed()
        self._lib.cache.embed_documents([runbook.search_text()])
        with self._lib.sessions.begin() as session:
            row = self.changeable(session, principal, runbook_id)
            change = self._revise_in(session, principal, row, runbook, given, base_version=base_version)
        self._lib.vectors.apply_outbox()
        return {**self.get(principal, runbook_id), "change": change}

    def set_active(self, principal: Principal, runbook_id: int, active: bool) -> dict[str, Any]:
        """Retire a runbook from recommendations (``active=False``) or bring it back; runs keep working."""
        with self._lib.sessions.begin() as session:
            row = self.changeable(session, principal, runbook_id)
            row.is_active = active
            row.updated_at = utcnow()
        return self.get(principal, runbook_id)

    def import_path(
        self, principal: Principal, path: Path, *, visibility: str | None = None
    ) -> dict[str, Any]:
        """Add every runbook file of a folder (or one file); a bad file is reported, the rest go on.

        Returns the runbooks by ``created``, ``new_version`` and ``unchanged``, and ``errors``: one
        ``{file, problems}`` per file that was refused.
        """
        if not path.exists():
            raise NotFoundError(f"no such file or folder: {path}")
        files = (
            [path]
            if path.is_file()
            else sorted(p for p in path.rglob("*") if p.suffix.lower() in RUNBOOK_SUFFIXES)
        )
        result: dict[str, Any] = {"created": [], "new_version": [], "unchanged": [], "errors": []}
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                result["errors"].append({"file": str(file), "problems": [f"cannot read it: {exc}"]})
                continue
            given = RunbookInput(
                text, origin=str(file), json_format=file.suffix.lower() == ".json", visibility=visibility
            )
            try:
                view = self.add(principal, given)
            except LibrarianError as exc:
                problems = getattr(exc, "problems", None) or [exc.message]
                result["errors"].append({"file": str(file), "problems": list(problems)})
                continue
            result[view["change"]].append(
                {"id": view["id"], "name": view["name"], "version": view["version"]}
            )
        return result

    # -- reading --------------------------------------------------------------------------------

    def get(self, principal: Principal, runbook_id: int, version: int | None = None) -> dict[str, Any]:
        """A runbook (its current version, or ``version``) with its steps and statistics."""
        with self._lib.sessions() as session:
            row = self.readable(session, principal, runbook_id)
            definition, label = row.definition, row.version_label
            if version is not None and version != row.version:
                saved = self._version(session, row.id, version)
                definition, label = saved.definition, saved.version_label
            return runbook_view(row, definition, version or row.version, label)

    def definition(self, session: Session, row: RunbookRow, version: int | None = None) -> Runbook:
        """The validated runbook of ``row`` at ``version`` (default: current)."""
        key = (row.id, version or row.version)
        cached = self._definitions.get(key)
        if cached is not None:
            return cached
        document = (
            row.definition
            if version in (None, row.version)
            else self._version(session, row.id, version).definition
        )
        runbook = parse_runbook(document, origin=f"runbook {row.id}")
        if len(self._definitions) > 1024:
            self._definitions.clear()
        self._definitions[key] = runbook
        return runbook

    def versions(self, principal: Principal, runbook_id: int) -> list[dict[str, Any]]:
        """Every version of a runbook, newest first."""
        with self._lib.sessions() as session:
            row = self.readable(session, principal, runbook_id)
            rows = session.scalars(
                select(RunbookVersion)
                .where(RunbookVersion.runbook_id == row.id)
                .order_by(RunbookVersion.version.desc())
            )
            return [
                {
                    "version": saved.version,
                    "version_label": saved.version_label,
                    "note": saved.note,
                    "created_by": saved.created_by,
                    "created_at": as_utc(saved.created_at).isoformat(),
                }
                for saved in rows
            ]

    def source_text(self, principal: Principal, runbook_id: int, version: int | None = None) -> str:
        """The text a version was saved from (YAML or JSON), to edit it."""
        with self._lib.sessions() as session:
            row = self.readable(session, principal, runbook_id)
            return self._version(session, row.id, version or row.version).source_text

    def list_runbooks(
        self,
        principal: Principal,
        *,
        category: str | None = None,
        tag: str | None = None,
        include_inactive: bool = False,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Runbooks the caller may read, by name."""
        principal.require(Scope.READ, "reading runbooks")
        if not 1 <= limit <= 1000:
            raise InvalidInputError("limit: use 1 to 1000")
        with self._lib.sessions() as session:
            query = (
                select(RunbookRow)
                .where(self.visible(session, principal))
                .order_by(RunbookRow.name)
                .limit(limit)
            )
            if category is not None:
                query = query.where(RunbookRow.category == category)
            if not include_inactive:
                query = query.where(RunbookRow.is_active.is_(True))
            rows = list(session.scalars(query))
        if tag is not None:
            rows = [row for row in rows if tag in (row.tags or [])]
        return [runbook_summary(row) for row in rows]

    # -- access ---------------------------------------------------------------------------------

    def visible(self, session: Session, principal: Principal) -> Any:
        """The SQL condition: runbooks ``principal`` may read."""
        return grants_condition(session.get_bind().dialect.name, RunbookRow.access_grants, principal.grants)

    def readable(self, session: Session, principal: Principal, runbook_id: int) -> RunbookRow:
        """The runbook, if ``principal`` may read it (else NotFoundError, as if it did not exist)."""
        principal.require(Scope.READ, "reading runbooks")
        row = session.get(RunbookRow, runbook_id)
        if row is None or not can_read(principal, row.access_grants):
            raise NotFoundError(f"no runbook {runbook_id}", hint="list them with: librarian runbook list")
        return row

    def changeable(self, session: Session, principal: Principal, runbook_id: int) -> RunbookRow:
        principal.require(Scope.WRITE, "changing runbooks")
        row = self.readable(session, principal, runbook_id)
        if not can_change(principal, row.organization_id, row.created_by):
            raise ForbiddenError(
                f"runbook {runbook_id} can be changed by its author or an administrator of its organisation"
            )
        return row

    # -- internals ------------------------------------------------------------------------------

    def _create_in(
        self, session: Session, principal: Principal, runbook: Runbook, given: RunbookInput
    ) -> RunbookRow:
        document = self._lib.knowledge.documents.create_in(
            session, principal, _document_draft(runbook, given)
        )
        row = RunbookRow(
            organization_id=document.organization_id,
            created_by=principal.user_id,
            visibility=document.visibility,
            allowed_teams=list(document.allowed_teams or []),
            access_grants=list(document.access_grants),
            knowledge_document_id=document.id,
            version=1,
        )
        _apply(row, runbook)
        session.add(row)
        session.flush()
        session.add(_version_row(row, runbook, given, principal))
        return row

    def _revise_in(
        self,
        session: Session,
        principal: Principal,
        row: RunbookRow,
        runbook: Runbook,
        given: RunbookInput,
        *,
        base_version: int | None,
    ) -> str:
        if not can_change(principal, row.organization_id, row.created_by):
            raise ForbiddenError(
                f"runbook {row.name!r} belongs to someone else: its author or an administrator can change it"
            )
        if base_version is not None and base_version != row.version:
            raise ConflictError(
                f"runbook {row.id} is at version {row.version}, not {base_version}: it changed meanwhile",
                hint="read the current version and apply your change to it",
            )
        if json.dumps(row.definition, sort_keys=True) == json.dumps(dict(runbook.document), sort_keys=True):
            return "unchanged"
        if runbook.name != row.name:
            taken = session.scalar(
                select(RunbookRow.id).where(
                    RunbookRow.organization_id == row.organization_id, RunbookRow.name == runbook.name
                )
            )
            if taken is not None:
                raise ConflictError(f"name: another runbook ({taken}) is already called {runbook.name!r}")
        row.version += 1
        _apply(row, runbook)
        row.updated_at = utcnow()
        session.add(_version_row(row, runbook, given, principal))
        if row.knowledge_document_id is not None:
            self._lib.knowledge.documents.update_in(
                session,
                principal,
                row.knowledge_document_id,
                None,
                _document_draft(runbook, given, creating=False),
            )
        return "new_version"

    @staticmethod
    def _version(session: Session, runbook_id: int, version: int) -> RunbookVersion:
        saved = session.scalar(
            select(RunbookVersion).where(
                RunbookVersion.runbook_id == runbook_id, RunbookVersion.version == version
            )
        )
        if saved is None:
            raise NotFoundError(f"runbook {runbook_id} has no version {version}")
        return saved


def _apply(row: RunbookRow, runbook: Runbook) -> None:
    row.name = runbook.name
    row.description = runbook.description
    row.category = runbook.category
    row.tags = sorted(set(runbook.tags))
    row.trigger_patterns = {
        "symptoms": list(runbook.symptoms),
        "services": list(runbook.services),
        "error_patterns": list(runbook.error_patterns),
    }
    row.version_label = runbook.version_label[:64]
    row.definition = dict(runbook.document)
    row.search_hash = content_hash(runbook.search_text())


def _version_row(
    row: RunbookRow, runbook: Runbook, given: RunbookInput, principal: Principal
) -> RunbookVersion:
    return RunbookVersion(
        runbook_id=row.id,
        version=row.version,
        version_label=runbook.version_label[:64],
        definition=dict(runbook.document),
        source_text=given.text,
        note=given.note,
        created_by=principal.user_id,
    )


def _document_draft(runbook: Runbook, given: RunbookInput, *, creating: bool = True) -> DocumentDraft:
    return DocumentDraft(
        title=runbook.name,
        content=runbook_markdown(runbook),
        description=runbook.description or None,
        document_type="runbook",
        category=runbook.category,
        tags=tuple(runbook.tags),
        content_structured=dict(runbook.document),
        visibility=given.visibility if creating else None,
        allowed_teams=tuple(given.allowed_teams) or None if creating else None,
        source_type="import" if given.origin != "runbook" else "manual",
    )


def runbook_markdown(runbook: Runbook) -> str:
    """The runbook as a readable page: what it is for, then each step."""
    lines = [f"# {runbook.name}", ""]
    if runbook.description:
        lines += [runbook.description, ""]
    if runbook.symptoms or runbook.error_patterns or runbook.services:
        lines.append("## When to use it")
        lines += [f"- symptom: {symptom}" for symptom in runbook.symptoms]
        lines += [f"- error: `{pattern}`" for pattern in runbook.error_patterns]
        lines += [f"- service: {service}" for service in runbook.services]
        lines.append("")
    lines.append("## Steps")
    for step in runbook.steps:
        lines += ["", f"### Step {step.number}: {step.title} ({step.action_type})"]
        if step.description:
            lines.append(step.description)
        body = step.command or step.prompt or step.condition
        if body:
            lines += ["", "```" + ("bash" if step.command else ""), body.strip(), "```"]
    return "\n".join(lines) + "\n"


def runbook_summary(row: RunbookRow) -> dict[str, Any]:
    """A runbook's list entry: identity, triggers and statistics."""
    runs = row.execution_count or 0
    return {
        "id": row.id,
        "name": row.name,
        "description": row.description,
        "category": row.category,
        "tags": list(row.tags or []),
        "version": row.version,
        "version_label": row.version_label,
        "is_active": row.is_active,
        "visibility": row.visibility,
        "trigger_patterns": dict(row.trigger_patterns or {}),
        "execution_count": runs,
        "success_count": row.success_count or 0,
        "success_rate": round((row.success_count or 0) / runs, 3) if runs else None,
        "avg_execution_time_ms": round((row.total_duration_ms or 0) / runs) if runs else None,
        "average_rating": round(row.rating_sum / row.rating_count, 2) if row.rating_count else None,
        "effectiveness_score": row.effectiveness_score,
        "last_executed_at": None
        if row.last_executed_at is None
        else as_utc(row.last_executed_at).isoformat(),
        "knowledge_document_id": row.knowledge_document_id,
        "url": f"/runbooks/{row.id}",
    }


def runbook_view(row: RunbookRow, definition: dict[str, Any], version: int, label: str) -> dict[str, Any]:
    """A runbook with its steps (as the design's ``get_runbook`` answers) and statistics.

    The name, description, category, tags and triggers are the version's own (an old version shows
    what it said then); statistics are the runbook's.
    """
    triggers = definition.get("trigger_patterns") or {}
    own = {
        "name": definition.get("name", row.name),
        "description": definition.get("description", ""),
        "category": definition.get("category"),
        "tags": list(definition.get("tags") or []),
        "trigger_patterns": {
            "symptoms": list(triggers.get("symptoms") or []),
            "services": list(triggers.get("services") or []),
            "error_patterns": list(triggers.get("error_patterns") or []),
        },
    }
    steps = [
        {
            "step_number": step["step"],
            **{key: value for key, value in step.items() if key != "step"},
            "action": step.get("command") or step.get("prompt") or step.get("condition"),
        }
        for step in definition.get("steps", [])
    ]
    return {
        **runbook_summary(row),
        **own,
        "version": version,
        "version_label": label,
        "current_version": row.version,
        "variables": dict(definition.get("variables") or {}),
        "steps": steps,
        "organization_id": row.organization_id,
        "created_by": row.created_by,
        "created_at": as_utc(row.created_at).isoformat(),
        "updated_at": as_utc(row.updated_at).isoformat(),
    }
