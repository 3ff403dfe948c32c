"""``lib.discovery``: the verb and tool registry for every interface (CLI, REST, MCP, workflows).

Composes the registry (stored verbs and tools), the sync of imported sources, the index and ranking
(search by meaning, learned from use), and tool calls with their health.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from librarian.discovery.calling import CallResult, ToolCalls
from librarian.discovery.index import DiscoveryIndex, writing
from librarian.discovery.manifest import ManifestInvalidError, parse_tool, parse_verb, verb_name
from librarian.discovery.models import VerbRow
from librarian.discovery.ranking import ToolFilters, rank_tools, rank_verbs
from librarian.discovery.registry import Placement, ToolRegistry, tool_view, verb_view
from librarian.discovery.resolution import Resolution, VerbResolver
from librarian.discovery.sync import ToolSync
from librarian.errors import InvalidInputError, LibrarianError
from librarian.knowledge.access import Principal, Scope

if TYPE_CHECKING:
    from librarian.app import Librarian

MAX_TOP_K = 50


def _top_k(top_k: int) -> int:
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidInputError(f"top_k: {top_k} is outside 1-{MAX_TOP_K}")
    return top_k


class DiscoveryService:
    """Register, import, search and call verbs and tools on behalf of a principal."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib
        self.registry = ToolRegistry(lib, changed=self.changed)
        self.sync = ToolSync(lib, self.registry, changed=self.changed)
        self.calls = ToolCalls(lib, changed=self.changed)
        self.resolver = VerbResolver(lib)
        self._index: DiscoveryIndex | None = None
        self._lock = threading.Lock()

    @property
    def index(self) -> DiscoveryIndex:
        """The in-memory search index (created on first use: it loads the embedding model)."""
        with self._lock:
            if self._index is None:
                self._index = DiscoveryIndex(self._lib.sessions, self._lib.cache)
            return self._index

    def changed(self, *, tools: bool = True) -> None:
        """The registry changed in this process: the next search reloads what changed (``tools``:
        tools and verbs; otherwise only new uses)."""
        if self._index is not None:
            self._index.invalidate(tools=tools)

    def _principal(self, principal: Principal | None) -> Principal:
        return principal or self._lib.default_principal

    # -- registering ----------------------------------------------------------------------------

    def register_tool(
        self,
        manifest: Mapping[str, Any],
        *,
        principal: Principal | None = None,
        visibility: str | None = None,
        allowed_teams: tuple[int, ...] = (),
    ) -> dict[str, Any]:
        """Register or update a tool from its manifest (the design's fields); returns it with ``change``.

        A tool that reaches a network service, registered by hand, is active at once: its author
        reviewed it. One that runs a program on the server (Python, CLI, an MCP server started by
        command) waits quarantined for the server's operator unless the operator registers it.
        Imported tools go through :meth:`import_source` and start quarantined.

        Raises:
            ManifestInvalidError: every field at fault, by name.
        """
        who = self._principal(principal)
        parsed = parse_tool(manifest)
        row, change = self.registry.save_tool(
            who, parsed, placement=Placement(visibility, tuple(allowed_teams))
        )
        return {**tool_view(row), "change": change}

    def register_tools(
        self, manifests: Sequence[Mapping[str, Any]], *, principal: Principal | None = None
    ) -> dict[str, Any]:
        """Register many tools at once (their texts embedded in batches, saved in one transaction).

        Invalid manifests are skipped, each with an error naming its position, tool and field; the
        others are saved. Returns the ``created``/``updated``/``unchanged`` toolIds and ``errors``.
        """
        who = self._principal(principal)
        who.require(Scope.WRITE, "registering tools")
        parsed = []
        errors: list[str] = []
        for position, raw in enumerate(manifests):
            try:
                parsed.append(parse_tool(raw, origin=f"manifest {position}"))
            except ManifestInvalidError as exc:
                errors.append(exc.message)
        ready = self.registry.prepare_many(parsed)
        outcome: dict[str, Any] = {"created": [], "updated": [], "unchanged": [], "errors": errors}
        with writing(self._lib.sessions, self.changed) as session:
            for manifest, prepared in zip(parsed, ready, strict=True):
                try:
                    with session.begin_nested():  # one refused tool must not undo the others
                        _, change = self.registry.save_tool(who, manifest, session=session, prepared=prepared)
                except LibrarianError as exc:
                    errors.append(f"tool {manifest.tool_key}: {exc.message}")
                    continue
                outcome[change].append(manifest.tool_key)
        return outcome

    def register_verb(
        self,
        manifest: Mapping[str, Any],
        *,
        principal: Principal | None = None,
        visibility: str | None = None,
        allowed_teams: tuple[int, ...] = (),
    ) -> dict[str, Any]:
        """Register or update a verb (the design's ``/verbs/register``); returns it with ``change``."""
        who = self._principal(principal)
        view, change = self.registry.save_verb(
            who, parse_verb(manifest), placement=Placement(visibility, tuple(allowed_teams))
        )
        return {**view, "change": change}

    def import_source(
        self,
        kind: str,
        name: str,
        spec: Mapping[str, Any],
        *,
        principal: Principal | None = None,
        approve: bool = False,
        visibility: str | None = None,
        allowed_teams: tuple[int, ...] = (),
    ) -> dict[str, Any]:
        """Import the tools of an MCP server, OpenAPI document, Python module or indexed CLI.

        Returns what changed: ``added``, ``changed``, ``removed``, ``unchanged`` and ``errors``.
        """
        return self.sync.import_source(
            self._principal(principal),
            kind,
            name,
            spec,
            placement=Placement(visibility, tuple(allowed_teams)),
            approve=approve,
        )

    def sync_source(self, name: str, *, principal: Principal | None = None) -> dict[str, Any]:
        """List an imported source again and apply its additions, changes and removals."""
        return self.sync.sync(self._principal(principal), name)

    def sources(self, *, principal: Principal | None = None) -> list[dict[str, Any]]:
        """The tool sources of the caller's organisation."""
        return self.sync.sources(self._principal(principal))

    def delete_source(self, name: str, *, principal: Principal | None = None) -> dict[str, Any]:
        """Delete a tool source and the tools imported from it."""
        return self.sync.delete_source(self._principal(principal), name)

    # -- reading and changing -------------------------------------------------------------------

    def tool(self, key: str | int, *, principal: Principal | None = None) -> dict[str, Any]:
        """One tool by ``toolId`` or id, with its schema, binding, review status and health."""
        return self.registry.get_tool(self._principal(principal), key)

    def tools(self, *, principal: Principal | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Tools the caller may read (filters: status, tool_type, source_id, limit, after_id)."""
        return self.registry.list_tools(self._principal(principal), **filters)

    def set_status(
        self, key: str | int, status: str, *, principal: Principal | None = None
    ) -> dict[str, Any]:
        """Approve (``active``), deactivate (``inactive``) or quarantine a tool."""
        return self.registry.set_tool_status(self._principal(principal), key, status)

    def delete_tool(self, key: str | int, *, principal: Principal | None = None) -> dict[str, Any]:
        """Delete a tool and its recorded uses."""
        return self.registry.delete_tool(self._principal(principal), key)

    def verb(self, name: str, *, principal: Principal | None = None) -> dict[str, Any]:
        """One verb by name."""
        with self._lib.sessions() as session:
            return verb_view(self.registry.verb_row(session, self._principal(principal), verb_name(name)))

    def verbs(self, *, principal: Principal | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Verbs the caller may read (filters: status, limit, after_id)."""
        return self.registry.list_verbs(self._principal(principal), **filters)

    def delete_verb(self, name: str, *, principal: Principal | None = None) -> dict[str, Any]:
        """Delete a verb that no other verb decomposes into."""
        return self.registry.delete_verb(self._principal(principal), verb_name(name))

    def stats(self, *, principal: Principal | None = None) -> dict[str, int]:
        """How many verbs, tools (per review status) and sources the caller sees."""
        return self.registry.counts(self._principal(principal))

    # -- searching ------------------------------------------------------------------------------

    def search_tools(
        self,
        query: str,
        *,
        principal: Principal | None = None,
        top_k: int = 5,
        filters: ToolFilters | None = None,
    ) -> dict[str, Any]:
        """The tools that best answer ``query`` (the design's ``/tools/search``).

        Each result carries its ``score``, a ``confidence`` (0-1) and ``why`` it matched. Only
        active tools whose circuit is closed are returned unless ``filters`` asks otherwise.

        Raises:
            InvalidInputError: an empty query or ``top_k`` outside 1-50.
        """
        who = self._principal(principal)
        filters = filters or ToolFilters()
        if filters.statuses != ("active",) and not who.is_admin:
            raise InvalidInputError("status: only an administrator reviews tools that are not active")
        text = query.strip()
        if not text:
            raise InvalidInputError("query: is empty", hint="describe what the tool should do")
        started = time.perf_counter()
        index = self.index
        matrix = index.tools()
        learned = index.learned(matrix)
        vector = self._lib.cache.embed_query(text)
        ranked = rank_tools(
            matrix,
            learned,
            vector,
            text,
            grants=who.grants,
            organization_id=who.organization_id,
            filters=filters,
            top_k=_top_k(top_k),
        )
        results = [
            {
                **matrix.views[matrix.row_of[item.entry_id]],
                "score": item.score,
                "confidence": item.confidence,
                "why": list(item.reasons),
            }
            for item in ranked
        ]
        return {
            "query": text,
            "results": results,
            "took_ms": round((time.perf_counter() - started) * 1000, 2),
        }

    def discover_verbs(
        self, description: str, *, principal: Principal | None = None, top_k: int = 5
    ) -> dict[str, Any]:
        """Verbs and tools for a capability (the design's ``/verbs/discover``).

        Returns ``verbs`` (existing verbs close in meaning) and ``tools`` (tools that can carry the
        capability out), each with score, confidence and why, and ``best``: the single best match.
        """
        who = self._principal(principal)
        text = description.strip()
        if not text:
            raise InvalidInputError("description: is empty", hint="describe the capability")
        started = time.perf_counter()
        vector = self._lib.cache.embed_query(text)
        exact = verb_name(text)
        ranked = rank_verbs(self.index.verbs(), vector, grants=who.grants, top_k=_top_k(top_k))
        with self._lib.sessions() as session:
            rows = {
                row.id: row
                for row in session.scalars(
                    select(VerbRow).where(VerbRow.id.in_([r.entry_id for r in ranked]))
                )
            }
        verbs = []
        for item in ranked:
            row = rows.get(item.entry_id)
            if row is None:
                continue
            named = row.verb == exact
            verbs.append(
                {
                    **verb_view(row),
                    "score": 1.0 if named else item.score,
                    "confidence": 1.0 if named else item.confidence,
                    "why": ["the verb is named exactly"] if named else list(item.reasons),
                }
            )
        verbs.sort(key=lambda view: -float(view["score"]))
        tools = self.search_tools(text, principal=who, top_k=top_k)["results"]
        candidates = [("verb", view) for view in verbs[:1]] + [("tool", view) for view in tools[:1]]
        best = max(candidates, key=lambda pair: float(pair[1]["confidence"]), default=None)
        return {
            "description": text,
            "verbs": verbs,
            "tools": tools,
            "best": None if best is None else {"kind": best[0], **best[1]},
            "took_ms": round((time.perf_counter() - started) * 1000, 2),
        }

    def resolve_verb(
        self, verb: str, description: str = "", *, principal: Principal | None = None
    ) -> Resolution:
        """Resolve a verb to tools: exact, substituted, decomposed, or created as novel."""
        return self.resolver.resolve(verb, description, principal=self._principal(principal))

    # -- using ----------------------------------------------------------------------------------

    def call(
        self,
        key: str | int,
        arguments: Mapping[str, Any] | None = None,
        *,
        principal: Principal | None = None,
        request: str | None = None,
    ) -> CallResult:
        """Call a registered tool (the ``call_tool`` proxy) and record the outcome.

        ``request`` is what the caller wanted the tool for; a successful call teaches discovery to
        rank this tool higher for similar requests in the caller's organisation.

        Raises:
            NotFoundError: no such tool visible to the caller.
            ConflictError: the tool is quarantined, inactive, or out of use (its circuit is open).
            InvalidInputError: the arguments break its input schema.
            ToolCallError: the call failed.
        """
        who = self._principal(principal)
        who.require(Scope.WRITE, "calling tools")
        with self._lib.sessions() as session:
            row = self.registry.tool_row(session, who, key)
            session.expunge(row)
        return self.calls.call(who, row, dict(arguments or {}), request=request)

    def record_use(
        self,
        key: str | int,
        request: str,
        *,
        succeeded: bool = True,
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        """Record that a tool was chosen for ``request`` (and whether it served it), without a call.

        Agents that call tools themselves report their choice here so discovery learns from it.
        """
        who = self._principal(principal)
        who.require(Scope.WRITE, "recording tool use")
        if not request.strip():
            raise InvalidInputError("request: is empty")
        with self._lib.sessions() as session:
            row = self.registry.tool_row(session, who, key)
            tool_id, tool_key = row.id, row.tool_key
        self.calls.record(who, tool_id, succeeded=succeeded, request=request.strip(), kind="selection")
        return {"tool": tool_key, "request": request.strip(), "succeeded": succeeded}
