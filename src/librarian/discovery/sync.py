"""Importing tools from a source and keeping them in sync with it.

A source (an MCP server, an OpenAPI document, a Python module or entry-point group, an indexed CLI)
is listed by its importer into manifests. Each manifest is compared with the stored tool of the same
``toolId`` by content hash: new ones are added (quarantined when ``tools_quarantine_imports``),
changed ones updated (keeping their review status and health), and tools the source no longer lists
are removed. A source that cannot be listed (it hangs, crashes, answers nonsense) changes nothing: the
error is recorded on the source and raised, and the registry keeps what it had. A manifest that is
invalid is skipped with an error naming the tool and field; the others are imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, or_, select

from librarian.discovery.index import writing
from librarian.discovery.manifest import ManifestInvalidError, ToolManifest, parse_tool
from librarian.discovery.models import ToolRow, ToolSourceRow, ToolUse
from librarian.discovery.registry import (
    KEEP,
    Placement,
    ToolRegistry,
    manifest_hash,
    may_run_programs,
    public_binding,
)
from librarian.errors import ForbiddenError, InvalidInputError, LibrarianError, NotFoundError
from librarian.knowledge.access import Principal, Scope, can_change
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

logger = logging.getLogger(__name__)
SOURCE_KINDS = ("mcp", "openapi", "python", "cli")


@dataclass
class Listing:
    """What an importer found: raw manifests (validated here) and per-tool problems."""

    manifests: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    version: str | None = None


Importer = Callable[[Mapping[str, Any], "Librarian", Principal], Listing]


def _importers() -> dict[str, Callable[[], Importer]]:
    def mcp() -> Importer:
        from librarian.discovery.importers.mcp import list_mcp_tools

        return list_mcp_tools

    def openapi() -> Importer:
        from librarian.discovery.importers.openapi import list_openapi_operations

        return list_openapi_operations

    def python() -> Importer:
        from librarian.discovery.importers.python import list_python_functions

        return list_python_functions

    def cli() -> Importer:
        from librarian.discovery.importers.cli import list_cli_commands

        return list_cli_commands

    return {"mcp": mcp, "openapi": openapi, "python": python, "cli": cli}


def source_view(row: ToolSourceRow) -> dict[str, Any]:
    """A tool source as the adapters show it (secret values hidden)."""
    return {
        "id": row.id,
        "name": row.name,
        "kind": row.kind,
        "spec": public_binding(row.spec or {}),
        "visibility": row.visibility,
        "last_synced_at": None if row.last_synced_at is None else as_utc(row.last_synced_at).isoformat(),
        "last_error": row.last_error,
        "last_changes": row.last_changes or {},
    }


def runs_on_server(kind: str, spec: Mapping[str, Any]) -> str | None:
    """Why importing this source acts on the server itself (None when it only reaches the network)."""
    if kind == "python":
        return "a Python source imports modules into the server"
    if kind == "mcp" and "command" in spec:
        return "an MCP server started by command runs a program on the server"
    location = str(spec.get("location") or "")
    if kind == "openapi" and not location.startswith(("http://", "https://")):
        return "an OpenAPI document named by a path reads a file of the server"
    return None


def _require_owner(principal: Principal, source: ToolSourceRow) -> None:
    """Only who imported a source (or an administrator) syncs, replaces or deletes it."""
    if not can_change(principal, source.organization_id, source.created_by):
        raise ForbiddenError(
            f"tool source {source.name} belongs to someone else",
            hint="its owner or an administrator can sync, replace or delete it",
        )


def _named(kind: str, spec: dict[str, Any], source_name: str) -> dict[str, Any]:
    """The spec an importer lists, its toolIds prefixed by the source's name unless the spec names
    one: two sources of the same server must not overwrite each other's tools."""
    field_name = {"mcp": "name", "openapi": "slug"}.get(kind)
    if field_name is None or spec.get(field_name):
        return spec
    return {**spec, field_name: source_name}


class ToolSync:
    """Imports and re-syncs tool sources on behalf of principals."""

    def __init__(
        self,
        lib: Librarian,
        registry: ToolRegistry,
        importers: Mapping[str, Callable[[], Importer]] | None = None,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        self._lib = lib
        self._changed = changed
        self._registry = registry
        self._importers = dict(importers or _importers())

    def import_source(
        self,
        principal: Principal,
        kind: str,
        name: str,
        spec: Mapping[str, Any],
        *,
        placement: Placement | None = None,
        approve: bool = False,
    ) -> dict[str, Any]:
        """Register (or update) the source ``name`` and sync its tools now.

        ``approve`` (administrators only) imports the tools active instead of quarantined.

        Raises:
            InvalidInputError: an unknown kind or a bad name.
            LibrarianError: the source could not be listed (recorded on the source; nothing changed).
        """
        principal.require(Scope.WRITE, "importing tools")
        if kind not in SOURCE_KINDS:
            raise InvalidInputError(f"kind: {kind!r} is not one of {', '.join(SOURCE_KINDS)}")
        if (
            not name
            or len(name) > 128
            or not name.replace("-", "").replace("_", "").replace(".", "").isalnum()
        ):
            raise InvalidInputError(f"name: {name!r} must be 1-128 letters, digits, '-', '_' or '.'")
        if approve and not principal.is_admin:
            raise InvalidInputError("approve: only an administrator can import tools already approved")
        reason = runs_on_server(kind, spec)
        if reason and not may_run_programs(principal):
            raise ForbiddenError(
                f"importing tool source {name}: {reason}, which only the server's operator may do",
                hint="import it with `librarian tools import` on the server's data directory",
            )
        with writing(self._lib.sessions, self._changed) as session:
            row = session.scalar(
                select(ToolSourceRow).where(
                    ToolSourceRow.organization_id == principal.organization_id, ToolSourceRow.name == name
                )
            )
            if row is None:
                row = ToolSourceRow(
                    organization_id=principal.organization_id,
                    created_by=principal.user_id,
                    name=name,
                    kind=kind,
                    spec=dict(spec),
                    visibility=(placement.visibility if placement else None) or "organization",
                    allowed_teams=list(placement.allowed_teams if placement else ()),
                    last_changes={},
                    created_at=utcnow(),
                )
                session.add(row)
            session.flush()
            source_id = row.id
        # An existing source keeps its old spec unless the new one lists (a later sync must not
        # re-run a command that failed).
        # A new source that fails to list stays, with its error, for `tools sources` to show and a
        # later sync to retry once its server works.
        return self.sync(principal, source_id, approve=approve, replacement=(kind, dict(spec)))

    def source_row(self, principal: Principal, key: str | int) -> ToolSourceRow:
        """The caller's organisation's source ``key`` (name or id)."""
        with self._lib.sessions() as session:
            condition = ToolSourceRow.id == int(key) if str(key).isdigit() else ToolSourceRow.name == str(key)
            row = session.scalar(
                select(ToolSourceRow).where(
                    condition, ToolSourceRow.organization_id == principal.organization_id
                )
            )
            if row is None:
                raise NotFoundError(
                    f"no tool source {key!r}", hint="list them with `librarian tools sources`"
                )
            session.expunge(row)
            return row

    def sources(self, principal: Principal) -> list[dict[str, Any]]:
        """The caller's organisation's tool sources (their spec and last error only to who may
        change them: commands and URLs may carry keys, errors a server's output)."""
        with self._lib.sessions() as session:
            rows = session.scalars(
                select(ToolSourceRow)
                .where(ToolSourceRow.organization_id == principal.organization_id)
                .order_by(ToolSourceRow.id)
            ).all()
            views = []
            for row in rows:
                view = source_view(row)
                if not can_change(principal, row.organization_id, row.created_by):
                    view["spec"] = None
                    view["last_error"] = None
                views.append(view)
            return views

    def sync(
        self,
        principal: Principal,
        key: str | int,
        *,
        approve: bool = False,
        replacement: tuple[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """List the source again and apply what changed: added, changed, removed, unchanged, errors.

        ``replacement`` (a kind and spec) is listed instead of the stored one and stored only when
        the listing succeeds.
        """
        principal.require(Scope.WRITE, "syncing tools")
        source = self.source_row(principal, key)
        _require_owner(principal, source)
        kind, spec = replacement or (source.kind, dict(source.spec or {}))
        factory = self._importers.get(kind)
        if factory is None:
            raise InvalidInputError(f"tool source {source.name}: no importer for {kind!r}")
        try:
            listing = factory()(_named(kind, spec, source.name), self._lib, principal)
        except LibrarianError as exc:
            self._note(source.id, error=f"{exc.message}", changes=None)
            raise
        except Exception as exc:
            logger.exception("listing tool source %s failed", source.name)
            self._note(source.id, error=f"listing failed: {exc}", changes=None)
            raise InvalidInputError(f"tool source {source.name}: listing failed: {exc}") from exc
        if not listing.manifests and listing.errors:
            # A source that listed nothing but errors failed: removing all its tools would lose them.
            message = f"tool source {source.name}: listed no tools: " + "; ".join(listing.errors[:5])
            self._note(source.id, error=message, changes=None)
            raise InvalidInputError(message, hint="the tools imported before are kept")
        manifests: dict[str, ToolManifest] = {}
        errors = list(listing.errors)
        for position, raw in enumerate(listing.manifests):
            label = (
                str(raw.get("name") or raw.get("toolId") or f"#{position}")
                if isinstance(raw, Mapping)
                else f"#{position}"
            )
            try:
                manifest = parse_tool(raw, origin=f"{source.name}: tool {label}")
            except ManifestInvalidError as exc:
                errors.append(exc.message)
                continue
            if manifest.tool_key in manifests:
                errors.append(f"{source.name}: tool {manifest.tool_key} listed twice; the first kept")
                continue
            manifests[manifest.tool_key] = manifest
        with self._lib.sessions() as session:
            hashes = {
                row.tool_key: row.content_hash
                for row in session.execute(
                    select(ToolRow.tool_key, ToolRow.content_hash).where(ToolRow.source_id == source.id)
                )
            }
        if not manifests and hashes:
            # Nothing valid listed while tools are stored: a broken server, not a decision to remove
            # them all (delete the source for that).
            message = f"tool source {source.name}: listed no valid tools; the {len(hashes)} stored are kept"
            self._note(source.id, error="; ".join([message, *errors[:4]]), changes=None)
            raise InvalidInputError(
                message, hint="; ".join(errors[:3]) or "check the server, then sync again"
            )
        status = "active" if approve or not self._lib.settings.tools_quarantine_imports else "quarantined"
        placement = Placement(
            source.visibility if source.visibility != "organization" else None,
            tuple(source.allowed_teams or ()),
        )
        changes: dict[str, list[str]] = {"added": [], "changed": [], "removed": [], "unchanged": []}
        # Embedded before the write transaction (the embedding cache is written on its own).
        changed = [key for key, manifest in manifests.items() if hashes.get(key) != manifest_hash(manifest)]
        ready = self._registry.prepare_many([manifests[key] for key in changed])
        prepared = dict(zip(changed, ready, strict=True))
        with writing(self._lib.sessions, self._changed) as session:
            if replacement is not None:
                stored_source = session.get(ToolSourceRow, source.id)
                if stored_source is not None:
                    stored_source.kind, stored_source.spec = kind, spec
            stored = {
                row.tool_key: row
                for row in session.scalars(select(ToolRow).where(ToolRow.source_id == source.id))
            }
            # A toolId held by a tool registered by hand or by another source stays that tool's.
            taken = set(
                session.scalars(
                    select(ToolRow.tool_key).where(
                        ToolRow.organization_id == principal.organization_id,
                        ToolRow.tool_key.in_(list(manifests)),
                        or_(ToolRow.source_id.is_(None), ToolRow.source_id != source.id),
                    )
                )
            )
            for tool_key, manifest in manifests.items():
                existing = stored.get(tool_key)
                if existing is not None and existing.content_hash == manifest_hash(manifest):
                    changes["unchanged"].append(tool_key)
                    continue
                if tool_key in taken:
                    errors.append(
                        f"{source.name}: tool {tool_key} is already registered apart from this source"
                    )
                    continue
                if tool_key not in prepared:  # it changed again while this sync ran
                    errors.append(f"{source.name}: tool {tool_key} changed during the sync; sync again")
                    continue
                _, change = self._registry.save_tool(
                    principal,
                    manifest,
                    placement=placement if existing is None else KEEP,
                    status=status,
                    source_id=source.id,
                    session=session,
                    prepared=prepared[tool_key],
                )
                changes["added" if change == "created" else "changed"].append(tool_key)
            for tool_key, row in stored.items():
                if tool_key not in manifests:
                    session.execute(delete(ToolUse).where(ToolUse.tool_id == row.id))
                    session.delete(row)
                    changes["removed"].append(tool_key)
        summary: dict[str, Any] = {key: sorted(value) for key, value in changes.items()}
        summary["errors"] = errors
        self._note(source.id, error="; ".join(errors[:5]) or None, changes=summary)
        return {"source": source.name, "kind": kind, "status": status, **summary}

    def _note(self, source_id: int, *, error: str | None, changes: dict[str, Any] | None) -> None:
        with writing(self._lib.sessions, self._changed) as session:
            row = session.get(ToolSourceRow, source_id)
            if row is None:
                return
            row.last_error = error
            if changes is not None:
                row.last_synced_at = utcnow()
                row.last_changes = {
                    key: len(value) if isinstance(value, list) else value for key, value in changes.items()
                }

    def delete_source(self, principal: Principal, key: str | int) -> dict[str, Any]:
        """Delete a source and every tool imported from it."""
        principal.require(Scope.WRITE, "deleting tool sources")
        source = self.source_row(principal, key)
        _require_owner(principal, source)
        with writing(self._lib.sessions, self._changed) as session:
            rows = session.scalars(select(ToolRow).where(ToolRow.source_id == source.id)).all()
            for row in rows:
                session.execute(delete(ToolUse).where(ToolUse.tool_id == row.id))
                session.delete(row)
            session.execute(delete(ToolSourceRow).where(ToolSourceRow.id == source.id))
        return {"source": source.name, "removed_tools": len(rows)}
