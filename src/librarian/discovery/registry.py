"""The registry's writes and reads: register, update, approve, deactivate and delete verbs and tools.

A tool's search text is embedded when it is saved (once: the embedding cache keys it by content),
so searches never embed manifests. Saving the same manifest again changes nothing; a changed one is
updated in place under the same ``toolId`` (its content hash tells which).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from librarian.discovery.index import writing
from librarian.discovery.manifest import ToolManifest, VerbManifest
from librarian.discovery.models import ToolRow, ToolSourceRow, ToolUse, VerbRow
from librarian.discovery.search_text import llm_questions, offline_questions, tool_search_text
from librarian.discovery.views import tool_summary
from librarian.embeddings.cache import content_hash
from librarian.errors import ForbiddenError, InvalidInputError, NotFoundError
from librarian.index.grants_sql import grants_condition
from librarian.knowledge.access import Principal, Scope, can_change, object_grants, owner_for
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

TOOL_STATUSES = ("active", "quarantined", "inactive")


@dataclass(frozen=True)
class Placement:
    """Who may read what is saved: a visibility and teams (``None``: the caller's organisation)."""

    visibility: str | None = None
    allowed_teams: tuple[int, ...] = ()


# No placement asked for: new entries go to the caller's organisation, existing ones keep theirs.
KEEP = Placement()


def ownership(principal: Principal, placement: Placement) -> dict[str, Any]:
    """The owner and read grants of a new verb or tool ``principal`` saves with ``placement``."""
    owner = owner_for(principal, placement.visibility, placement.allowed_teams)
    visibility = str(owner.visibility or "organization")
    return {
        "organization_id": owner.organization_id,
        "created_by": owner.created_by,
        "visibility": visibility,
        "allowed_teams": list(owner.allowed_teams),
        "access_grants": object_grants(
            owner.organization_id, visibility, owner.allowed_teams, owner.created_by
        ),
    }


def runs_on_host(tool_type: str, binding: dict[str, Any]) -> bool:
    """Whether calling the tool runs a program on this machine (an MCP server started by command, a
    Python function, a CLI command), rather than reaching a network service."""
    if tool_type in ("python", "cli"):
        return True
    return tool_type == "mcp" and "command" in binding


def binding_hash(tool_type: str, binding: dict[str, Any]) -> str:
    """SHA-256 of what a tool runs: its type and binding (what an operator's approval covers)."""
    return content_hash(json.dumps([tool_type, binding], sort_keys=True, default=str))


def may_run_programs(principal: Principal) -> bool:
    """Whether ``principal`` may make a tool that runs a program on this machine live: the machine's
    operator (the CLI on its data directory), never a token, since an organisation's administrator
    on a shared server must not gain the server's own rights."""
    return principal.is_operator


def manifest_hash(manifest: ToolManifest) -> str:
    """SHA-256 of the manifest's canonical JSON: what a sync compares."""
    return content_hash(json.dumps(manifest.as_dict(), sort_keys=True, default=str))


def tool_view(row: ToolRow, *, full: bool = True) -> dict[str, Any]:
    """A tool as the adapters show it: its summary, and with ``full`` everything else."""
    view = tool_summary(row)
    if full:
        view.update(
            {
                "inputSchema": row.input_schema or {},
                "examples": list(row.examples or []),
                "binding": public_binding(row.binding or {}),
                "source_id": row.source_id,
                "visibility": row.visibility,
                "allowed_teams": list(row.allowed_teams or []),
                "enrichment": list(row.enrichment or []),
                "calls": {
                    "succeeded": row.success_count,
                    "failed": row.failure_count,
                    "consecutive_failures": row.consecutive_failures,
                    "last_error": row.last_error,
                    "last_called_at": _iso(row.last_called_at),
                    "circuit_opened_at": _iso(row.circuit_opened_at),
                },
                "created_at": _iso(row.created_at),
                "updated_at": _iso(row.updated_at),
            }
        )
    return view


def verb_view(row: VerbRow) -> dict[str, Any]:
    """A verb as the adapters show it (the design's names)."""
    return {
        "id": row.id,
        "verb": row.verb,
        "description": row.description,
        "capabilities": list(row.capabilities or []),
        "category": row.category,
        "examples": list(row.examples or []),
        "inputDefinitions": list(row.input_definitions or []),
        "outputDefinitions": list(row.output_definitions or []),
        "decomposition": list(row.decomposition or []),
        "status": row.status,
        "visibility": row.visibility,
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
    }


def _iso(moment: Any) -> str | None:
    return None if moment is None else as_utc(moment).isoformat()


SECRET_KEYS = ("env", "headers")


def public_binding(binding: dict[str, Any]) -> dict[str, Any]:
    """A binding or source spec with secret values hidden: an MCP server's environment and HTTP
    headers (API keys, bearer tokens) keep their names, never their values."""
    shown: dict[str, Any] = {}
    for key, value in binding.items():
        if key in SECRET_KEYS and isinstance(value, dict):
            shown[key] = {name: "***" for name in value}
        else:
            shown[key] = value
    return shown


class ToolRegistry:
    """Verbs and tools of every organisation, read and changed on behalf of a principal."""

    def __init__(self, lib: Librarian, changed: Callable[[], None] = lambda: None) -> None:
        self._lib = lib
        self._changed = changed

    # -- tools ----------------------------------------------------------------------------------

    def save_tool(
        self,
        principal: Principal,
        manifest: ToolManifest,
        *,
        placement: Placement = KEEP,
        status: str = "active",
        source_id: int | None = None,
        session: Session | None = None,
        prepared: tuple[list[str], str] | None = None,
    ) -> tuple[ToolRow, str]:
        """Create or update the tool ``manifest.tool_key`` in the caller's organisation.

        Returns the row and ``created``, ``updated`` or ``unchanged``. An update keeps the tool's
        review status and health (a re-import does not approve anything).

        Raises:
            ForbiddenError: no ``write`` scope, or the tool is someone else's.
        """
        principal.require(Scope.WRITE, "registering tools")
        ready = prepared or self.prepare(manifest)
        if session is None:
            with writing(self._lib.sessions, self._changed) as own:
                row, change = self._save_tool_in(
                    own, principal, manifest, ready, placement, status, source_id
                )
                own.flush()
                own.expunge(row)
                return row, change
        return self._save_tool_in(session, principal, manifest, ready, placement, status, source_id)

    def prepare(self, manifest: ToolManifest) -> tuple[list[str], str]:
        """The tool's enrichment and search text, embedded now.

        Called before the transaction that saves the tool: embedding writes the embedding cache,
        which must not wait on (or hold) the registry's own write lock.
        """
        return self.prepare_many([manifest])[0]

    def prepare_many(self, manifests: list[ToolManifest]) -> list[tuple[list[str], str]]:
        """:meth:`prepare` for many tools, embedding their texts in batches."""
        llm = self._lib.llm
        prepared = []
        for manifest in manifests:
            enrichment = offline_questions(manifest)
            if llm is not None:
                enrichment = llm_questions(llm, manifest) + enrichment
            prepared.append((enrichment, tool_search_text(manifest, enrichment)))
        self._lib.cache.embed_documents([text for _, text in prepared])
        return prepared

    def _save_tool_in(
        self,
        session: Session,
        principal: Principal,
        manifest: ToolManifest,
        prepared: tuple[list[str], str],
        placement: Placement,
        status: str,
        source_id: int | None,
    ) -> tuple[ToolRow, str]:
        row = session.scalar(
            select(ToolRow).where(
                ToolRow.organization_id == principal.organization_id, ToolRow.tool_key == manifest.tool_key
            )
        )
        digest = manifest_hash(manifest)
        if row is not None and row.content_hash == digest and placement == KEEP:
            return row, "unchanged"
        if row is not None and not can_change(principal, row.organization_id, row.created_by):
            raise ForbiddenError(f"tool {manifest.tool_key!r} belongs to someone else in the organisation")
        enrichment, text = prepared
        # A tool whose calls run a program here is a way to run code on the server: only what the
        # operator approved goes live, whether the tool is new or its binding changed.
        host = runs_on_host(manifest.tool_type, manifest.binding)
        approved = binding_hash(manifest.tool_type, manifest.binding)
        if host and not may_run_programs(principal) and (row is None or row.approved_hash != approved):
            status = "quarantined"
            if row is not None:
                row.status = status
        now = utcnow()
        change = "updated"
        if row is None:
            row = ToolRow(
                **ownership(principal, placement),
                tool_key=manifest.tool_key,
                status=status,
                health="healthy",
                consecutive_failures=0,
                success_count=0,
                failure_count=0,
                created_at=now,
            )
            session.add(row)
            change = "created"
        elif placement != KEEP:
            owner = owner_for(principal, placement.visibility, placement.allowed_teams)
            row.visibility = str(owner.visibility or "organization")
            row.allowed_teams = list(owner.allowed_teams)
            row.access_grants = object_grants(
                row.organization_id, row.visibility, owner.allowed_teams, row.created_by
            )
        row.name = manifest.name
        row.tool_type = manifest.tool_type
        row.description = manifest.description
        row.action_verbs = list(manifest.action_verbs)
        row.capabilities = list(manifest.capabilities)
        row.category = manifest.category
        row.examples = list(manifest.examples)
        row.input_schema = manifest.input_schema
        row.binding = manifest.binding
        row.version = manifest.version
        row.source_id = source_id if source_id is not None else row.source_id
        row.content_hash = digest
        if host and may_run_programs(principal) and row.status == "active":
            row.approved_hash = approved
        row.enrichment = enrichment
        row.search_hash = content_hash(text)
        row.updated_at = now
        return row, change

    def tool_row(self, session: Session, principal: Principal, key: str | int) -> ToolRow:
        """The tool ``key`` (its ``toolId`` or numeric id) that ``principal`` may read.

        Raises:
            NotFoundError: no such tool, or one the caller may not see (the same answer, so the
                existence of another organisation's tool is not revealed).
        """
        condition = (
            ToolRow.id == int(key)
            if isinstance(key, int) or str(key).isdigit()
            else ToolRow.tool_key == str(key)
        )
        rows = session.scalars(
            select(ToolRow)
            .where(
                condition,
                grants_condition(session.get_bind().dialect.name, ToolRow.access_grants, principal.grants),
            )
            .order_by((ToolRow.organization_id == principal.organization_id).desc(), ToolRow.id)
        ).all()
        if not rows:
            raise NotFoundError(f"no tool {key!r}", hint="list tools with `librarian tools list`")
        return rows[0]

    def get_tool(self, principal: Principal, key: str | int) -> dict[str, Any]:
        """One tool's full view. How it is called (its binding: commands, URLs, arguments that may
        carry keys) and its last error (a server's stderr) are shown only to who may change it."""
        with self._lib.sessions() as session:
            row = self.tool_row(session, principal, key)
            view = tool_view(row)
            if not can_change(principal, row.organization_id, row.created_by):
                view["binding"] = None
                view["calls"]["last_error"] = None
            return view

    def list_tools(
        self,
        principal: Principal,
        *,
        status: str | None = None,
        tool_type: str | None = None,
        source_id: int | None = None,
        limit: int = 100,
        after_id: int = 0,
    ) -> list[dict[str, Any]]:
        """Tools the caller may read, by id, ``limit`` at a time after ``after_id`` (a cursor)."""
        with self._lib.sessions() as session:
            query = select(ToolRow).where(
                grants_condition(session.get_bind().dialect.name, ToolRow.access_grants, principal.grants),
                ToolRow.id > after_id,
            )
            if status is not None:
                query = query.where(ToolRow.status == status)
            if tool_type is not None:
                query = query.where(ToolRow.tool_type == tool_type)
            if source_id is not None:
                query = query.where(ToolRow.source_id == source_id)
            rows = session.scalars(query.order_by(ToolRow.id).limit(max(1, min(limit, 1000)))).all()
            return [tool_view(row, full=False) for row in rows]

    def set_tool_status(self, principal: Principal, key: str | int, status: str) -> dict[str, Any]:
        """Approve (``active``), quarantine or deactivate (``inactive``) a tool.

        Approving a quarantined tool needs the ``admin`` scope: review is the point of quarantine.
        Activating a tool that runs a program on this machine needs its operator, unless the
        operator approved that very binding before.

        Raises:
            InvalidInputError: an unknown status.
            ForbiddenError: the caller may not change the tool, or may not approve.
        """
        if status not in TOOL_STATUSES:
            raise InvalidInputError(f"status: {status!r} is not one of {', '.join(TOOL_STATUSES)}")
        with writing(self._lib.sessions, self._changed) as session:
            row = self.tool_row(session, principal, key)
            if not can_change(principal, row.organization_id, row.created_by) and not (
                principal.is_admin and principal.organization_id == row.organization_id
            ):
                raise ForbiddenError(f"tool {row.tool_key!r} belongs to someone else")
            if row.status == "quarantined" and status != "quarantined" and not principal.is_admin:
                # Any way out of quarantine (even through "inactive") is a review's decision.
                raise ForbiddenError(
                    f"approving the quarantined tool {row.tool_key!r} needs the 'admin' scope",
                    hint="ask an administrator to review it",
                )
            host = runs_on_host(row.tool_type, row.binding or {})
            approved = binding_hash(row.tool_type, row.binding or {})
            if status == "active" and host and row.approved_hash != approved:
                if not may_run_programs(principal):
                    raise ForbiddenError(
                        f"tool {row.tool_key!r} runs a program on the server: only its operator approves it",
                        hint=f"run `librarian tools approve {row.tool_key}` on the server's data directory",
                    )
                row.approved_hash = approved
            row.status = status
            row.updated_at = utcnow()
            session.flush()
            return tool_view(row)

    def delete_tool(self, principal: Principal, key: str | int) -> dict[str, Any]:
        """Delete a tool and its recorded uses."""
        with writing(self._lib.sessions, self._changed) as session:
            row = self.tool_row(session, principal, key)
            if not can_change(principal, row.organization_id, row.created_by):
                raise ForbiddenError(f"tool {row.tool_key!r} belongs to someone else")
            view = tool_view(row, full=False)
            session.execute(delete(ToolUse).where(ToolUse.tool_id == row.id))
            session.delete(row)
            return view

    # -- verbs ----------------------------------------------------------------------------------

    def save_verb(
        self,
        principal: Principal,
        manifest: VerbManifest,
        *,
        placement: Placement = KEEP,
        status: str = "active",
        only_new: bool = False,
    ) -> tuple[dict[str, Any], str]:
        """Create or update the verb ``manifest.verb`` in the caller's organisation.

        Raises:
            InvalidInputError: the decomposition names a verb that does not exist or makes a cycle.
            ForbiddenError: no ``write`` scope, or the verb is someone else's.
        """
        principal.require(Scope.WRITE, "registering verbs")
        text = manifest.search_text()
        self._lib.cache.embed_documents([text])
        with writing(self._lib.sessions, self._changed) as session:
            row = session.scalar(
                select(VerbRow).where(
                    VerbRow.organization_id == principal.organization_id, VerbRow.verb == manifest.verb
                )
            )
            if row is not None and only_new:  # re-read in the saving transaction
                return verb_view(row), "unchanged"
            if row is not None and not can_change(principal, row.organization_id, row.created_by):
                raise ForbiddenError(f"verb {manifest.verb!r} belongs to someone else in the organisation")
            self._check_decomposition(session, principal, manifest)
            now = utcnow()
            change = "updated"
            if row is None:
                row = VerbRow(
                    **ownership(principal, placement),
                    verb=manifest.verb,
                    created_at=now,
                )
                session.add(row)
                change = "created"
            row.description = manifest.description
            row.capabilities = list(manifest.capabilities)
            row.category = manifest.category
            row.examples = list(manifest.examples)
            row.input_definitions = list(manifest.input_definitions)
            row.output_definitions = list(manifest.output_definitions)
            row.decomposition = list(manifest.decomposition)
            row.status = status
            row.search_hash = content_hash(text)
            row.updated_at = now
            session.flush()
            return verb_view(row), change

    def _check_decomposition(self, session: Session, principal: Principal, manifest: VerbManifest) -> None:
        """Refuse a decomposition into unknown verbs or one that leads back to the verb itself."""
        if not manifest.decomposition:
            return
        known = {
            row.verb: list(row.decomposition or [])
            for row in session.scalars(
                select(VerbRow).where(VerbRow.organization_id == principal.organization_id)
            )
        }
        missing = [verb for verb in manifest.decomposition if verb not in known]
        if missing:
            raise InvalidInputError(
                f"verb {manifest.verb}: decomposition names unknown verbs: {', '.join(missing)}",
                hint="register those verbs first",
            )
        known[manifest.verb] = list(manifest.decomposition)
        path = _cycle_from(manifest.verb, known)
        if path:
            raise InvalidInputError(
                f"verb {manifest.verb}: decomposition makes a cycle: {' -> '.join(path)}",
                hint="a verb cannot be carried out by itself, directly or through other verbs",
            )

    def verb_row(self, session: Session, principal: Principal, verb: str) -> VerbRow:
        """The verb named ``verb`` that ``principal`` may read (own organisation first)."""
        rows = session.scalars(
            select(VerbRow)
            .where(
                VerbRow.verb == verb,
                grants_condition(session.get_bind().dialect.name, VerbRow.access_grants, principal.grants),
            )
            .order_by((VerbRow.organization_id == principal.organization_id).desc(), VerbRow.id)
        ).all()
        if not rows:
            raise NotFoundError(f"no verb {verb!r}", hint="list verbs with `librarian verbs list`")
        return rows[0]

    def list_verbs(
        self, principal: Principal, *, status: str | None = None, limit: int = 100, after_id: int = 0
    ) -> list[dict[str, Any]]:
        """Verbs the caller may read, by id, ``limit`` at a time after ``after_id``."""
        with self._lib.sessions() as session:
            query = select(VerbRow).where(
                grants_condition(session.get_bind().dialect.name, VerbRow.access_grants, principal.grants),
                VerbRow.id > after_id,
            )
            if status is not None:
                query = query.where(VerbRow.status == status)
            return [
                verb_view(row)
                for row in session.scalars(query.order_by(VerbRow.id).limit(max(1, min(limit, 1000))))
            ]

    def delete_verb(self, principal: Principal, verb: str) -> dict[str, Any]:
        """Delete a verb no other verb decomposes into."""
        with writing(self._lib.sessions, self._changed) as session:
            row = self.verb_row(session, principal, verb)
            if not can_change(principal, row.organization_id, row.created_by):
                raise ForbiddenError(f"verb {verb!r} belongs to someone else")
            users = [
                other.verb
                for other in session.scalars(
                    select(VerbRow).where(VerbRow.organization_id == row.organization_id)
                )
                if row.verb in (other.decomposition or [])
            ]
            if users:
                raise InvalidInputError(f"verb {verb}: still part of the decomposition of {', '.join(users)}")
            view = verb_view(row)
            session.delete(row)
            return view

    def counts(self, principal: Principal) -> dict[str, int]:
        """How many verbs and tools (by status) the caller may read."""
        with self._lib.sessions() as session:
            dialect = session.get_bind().dialect.name
            tools = session.execute(
                select(ToolRow.status, func.count())
                .where(grants_condition(dialect, ToolRow.access_grants, principal.grants))
                .group_by(ToolRow.status)
            ).all()
            verbs = session.scalar(
                select(func.count())
                .select_from(VerbRow)
                .where(grants_condition(dialect, VerbRow.access_grants, principal.grants))
            )
            sources = session.scalar(
                select(func.count())
                .select_from(ToolSourceRow)
                .where(ToolSourceRow.organization_id == principal.organization_id)
            )
        result = {f"tools_{status}": int(count) for status, count in tools}
        result["verbs"] = int(verbs or 0)
        result["sources"] = int(sources or 0)
        return result


def _cycle_from(start: str, graph: dict[str, list[str]]) -> list[str]:
    """A path from ``start`` back to itself through ``graph``, or [] when there is none."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for child in graph.get(node, []):
            if child == start:
                return [*path, child]
            if child not in seen:
                seen.add(child)
                stack.append((child, [*path, child]))
    return []
