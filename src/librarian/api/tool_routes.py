"""REST routes of the verb and tool registry (``lib.discovery``): the design's ``/verbs/discover``,
``/verbs/register`` and ``/tools/search``, registering, reviewing and calling tools (``/tools``), and
importing whole tool sources (``/tool-sources``). Every route acts for the caller the authentication
middleware resolved; the logic is all in :class:`~librarian.discovery.service.DiscoveryService`.

A ``toolId`` may hold dots, colons, slashes and ``@`` (``github:repos/list``), so the tool routes take
it as a path (``{tool_id:path}``) and the fixed paths (``/tools/search``, ``/tools/stats``) come first,
where a tool id never shadows them; a tool's numeric ``id`` works too. Routes are plain ``def``
functions, run in FastAPI's thread pool: a tool call or a source import waits on other processes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field

from librarian.api.knowledge_routes import MAX_ID, caller
from librarian.app import Librarian
from librarian.discovery.ranking import ToolFilters
from librarian.errors import InvalidInputError
from librarian.knowledge.access import Principal

ToolKey = Annotated[
    str,
    Path(
        min_length=1,
        max_length=255,
        description="The tool's toolId (it may hold `.`, `:`, `/` and `@`) or its numeric id.",
    ),
]
VerbName = Annotated[
    str, Path(min_length=1, max_length=128, description="The verb, e.g. GET_WEATHER (`get weather` works).")
]
SourceName = Annotated[
    str, Path(min_length=1, max_length=128, description="The tool source's name (or its numeric id).")
]
REMOTE = ("http://", "https://")
ToolType = Literal["mcp", "openapi", "python", "cli"]
ToolStatus = Literal["active", "quarantined", "inactive"]
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": dict[str, Any]} for code in (401, 403, 404, 409, 422)
}
# Routes that reach a tool or a source: it failed or answered nonsense (502), or was unreachable (503).
_UPSTREAM: dict[int | str, dict[str, Any]] = {code: {"model": dict[str, Any]} for code in (502, 503)}
Strings = list[Annotated[str, Field(max_length=20_000)]]
Visibility = Annotated[
    str | None,
    Field(description="private, teams, organization (default) or public (administrators only)."),
]
Teams = Annotated[
    list[Annotated[int, Field(ge=1, le=MAX_ID)] | str],
    Field(max_length=100, description="Team ids or names (visibility teams)."),
]


# -- bodies ---------------------------------------------------------------------------------------


class ToolManifestBody(BaseModel):
    """A tool manifest (the design's fields; snake_case names are accepted as well).

    Every field is checked by the registry, which answers 422 with ``problems`` naming each field at
    fault. ``visibility`` and ``allowed_teams`` place a new tool; the rest is the manifest.
    """

    model_config = ConfigDict(extra="allow")

    toolId: str | None = Field(
        default=None,
        description="A stable id, unique in your organisation (default: the name), e.g. weather:get.",
    )
    name: str | None = Field(default=None, description="The tool's name (required).")
    type: str | None = Field(default=None, description="mcp, openapi, python or cli (required).")
    description: str | None = Field(default=None, description="What the tool does, in plain words.")
    actionVerbs: Strings | str | None = Field(
        default=None, description="Verbs the tool carries out, e.g. [GET_WEATHER]."
    )
    capabilities: Strings | str | None = Field(default=None, description="Capability labels.")
    category: str | None = Field(default=None, description="A category label.")
    examples: Strings | str | None = Field(default=None, description="Requests the tool serves.")
    inputSchema: dict[str, Any] | None = Field(
        default=None, description="A JSON Schema of the call's arguments (checked on every call)."
    )
    binding: dict[str, Any] | None = Field(
        default=None,
        description="How to call it, by type: python {module, function}; mcp {command or url, tool}; "
        "openapi {base_url, method, path, parameters}; cli {argv, options}.",
    )
    version: str | None = Field(default=None, description="The tool's version.")
    visibility: Visibility = None
    allowed_teams: Teams = Field(default_factory=list)

    def manifest(self) -> dict[str, Any]:
        """The manifest as the registry takes it (the placement fields left out)."""
        return self.model_dump(exclude_none=True, exclude={"visibility", "allowed_teams"})


class VerbManifestBody(BaseModel):
    """A verb manifest (the design's fields; snake_case names are accepted as well).

    Every field is checked by the registry, which answers 422 with ``problems`` naming each field at
    fault. ``visibility`` and ``allowed_teams`` place a new verb; the rest is the manifest.
    """

    model_config = ConfigDict(extra="allow")

    verb: str | None = Field(
        default=None, description="The verb (required); `get weather` is stored as GET_WEATHER."
    )
    description: str | None = Field(default=None, description="What the verb does (required).")
    capabilities: Strings | str | None = Field(default=None, description="Capability labels.")
    category: str | None = Field(default=None, description="A category label.")
    examples: Strings | str | None = Field(default=None, description="Requests the verb stands for.")
    inputDefinitions: list[dict[str, Any]] | None = Field(
        default=None, description="Its inputs, each an object with a `name`."
    )
    outputDefinitions: list[dict[str, Any]] | None = Field(
        default=None, description="Its outputs, each an object with a `name`."
    )
    decomposition: Strings | str | None = Field(
        default=None, description="Existing verbs that carry it out, in order."
    )
    visibility: Visibility = None
    allowed_teams: Teams = Field(default_factory=list)

    def manifest(self) -> dict[str, Any]:
        """The manifest as the registry takes it (the placement fields left out)."""
        return self.model_dump(exclude_none=True, exclude={"visibility", "allowed_teams"})


class ToolSearchRequest(BaseModel):
    """The design's tool search: the tools that best answer a request, with filters."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=20_000, description="What the tool should do.")
    top_k: int = Field(default=5, ge=1, le=50, description="How many tools.")
    type: ToolType | None = Field(default=None, description="Only tools of this type.")
    category: str | None = Field(default=None, max_length=100, description="Only this category.")
    capability: str | None = Field(default=None, max_length=255, description="Only tools with it.")
    health: Literal["healthy", "failing", "open"] | None = Field(
        default=None,
        description="Only tools in this health; `open` lists the tools out of use (left out otherwise).",
    )
    status: ToolStatus = Field(
        default="active",
        description="Review status: active (default); administrators also review quarantined or "
        "inactive tools.",
    )

    def filters(self) -> ToolFilters:
        """As the ranking takes them."""
        return ToolFilters(
            tool_type=self.type,
            category=self.category,
            capability=self.capability,
            health=self.health,
            statuses=(self.status,),
        )


class DiscoverVerbsRequest(BaseModel):
    """The design's verb discovery: existing verbs and tools for a capability."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1, max_length=20_000, description="The capability needed.")
    top_k: int = Field(default=5, ge=1, le=50, description="How many verbs and how many tools.")


class CallRequest(BaseModel):
    """A call of a registered tool."""

    model_config = ConfigDict(extra="forbid")

    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The arguments, as the tool's inputSchema describes them."
    )
    request: str | None = Field(
        default=None,
        max_length=20_000,
        description="What you wanted the tool for: a successful call ranks it higher for similar ones.",
    )


class UseRequest(BaseModel):
    """A tool chosen for a request, and whether it served it (without a call through Librarian)."""

    model_config = ConfigDict(extra="forbid")

    request: str = Field(min_length=1, max_length=20_000, description="What the tool was chosen for.")
    succeeded: bool = Field(default=True, description="false: the tool did not serve the request.")


class ToolSourceRequest(BaseModel):
    """A source of tools to import and keep in sync."""

    model_config = ConfigDict(extra="forbid")

    kind: ToolType = Field(description="mcp, openapi, python or cli.")
    name: str = Field(
        pattern=r"^[A-Za-z0-9._-]{1,128}$", description="Your name for the source (letters, digits, - _ .)."
    )
    spec: dict[str, Any] = Field(
        default_factory=dict,
        description="Where the tools are, by kind: mcp {url, headers} or {command, env, cwd} "
        "(administrators); openapi {location: the document's http(s) URL, base_url, headers, slug}; "
        "python {module, functions} or {entry_point_group} (administrators); cli {sdk_name, "
        "sdk_version, commands}: a CLI indexed with ingest-cli.",
    )
    approve: bool = Field(
        default=False,
        description="Import the tools active instead of quarantined (administrators only).",
    )
    visibility: Visibility = None
    allowed_teams: Teams = Field(default_factory=list)


# -- helpers --------------------------------------------------------------------------------------


def _teams(lib: Librarian, principal: Principal, teams: list[int | str]) -> tuple[int, ...]:
    return lib.identity.team_ids_of(principal.organization_id, teams) if teams else ()


def _page(key: str, rows: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    """A page of ``rows`` with ``next``: the cursor of the next page, null on the last one."""
    return {key: rows, "next": rows[-1]["id"] if len(rows) == limit else None}


def tool_router(lib: Librarian) -> APIRouter:
    """Routes under ``/verbs``, ``/tools`` and ``/tool-sources``."""
    router = APIRouter(responses=_ERRORS)
    discovery = lib.discovery

    # -- verbs ----------------------------------------------------------------------------------

    @router.post("/verbs/discover", tags=["verbs"])
    def discover_verbs(body: DiscoverVerbsRequest, request: Request) -> dict[str, Any]:
        """Existing verbs and tools for a capability: ``verbs`` and ``tools`` (each with ``score``,
        ``confidence`` 0-1 and ``why``) and ``best``, the single best match with its ``kind``."""
        return discovery.discover_verbs(body.description, principal=caller(request), top_k=body.top_k)

    @router.post("/verbs/register", status_code=status.HTTP_201_CREATED, tags=["verbs"])
    def register_verb(body: VerbManifestBody, request: Request) -> dict[str, Any]:
        """Register or update a verb, with ``change``: created or updated.

        A manifest that breaks the format is a 422 whose ``problems`` name every field at fault; a
        decomposition into unknown verbs, or one that leads back to the verb, is a 422 too.
        """
        principal = caller(request)
        return discovery.register_verb(
            body.manifest(),
            principal=principal,
            visibility=body.visibility,
            allowed_teams=_teams(lib, principal, body.allowed_teams),
        )

    @router.get("/verbs", tags=["verbs"])
    def list_verbs(
        request: Request,
        state: Annotated[
            str | None,
            Query(
                alias="status",
                max_length=32,
                description="Only this status: active, or novel (named by a plan, matched by no verb).",
            ),
        ] = None,
        limit: int = Query(default=100, ge=1, le=1000, description="At most this many."),
        after: int = Query(default=0, ge=0, le=MAX_ID, description="The `next` of the previous page."),
    ) -> dict[str, Any]:
        """Verbs the caller may read, by id, a page at a time: ``next`` is the cursor of the next page
        (pass it as ``after``), null on the last one."""
        rows = discovery.verbs(principal=caller(request), status=state, limit=limit, after_id=after)
        return _page("verbs", rows, limit)

    @router.get("/verbs/{verb}", tags=["verbs"])
    def read_verb(verb: VerbName, request: Request) -> dict[str, Any]:
        """One verb: description, capabilities, examples, inputs, outputs and decomposition."""
        return discovery.verb(verb, principal=caller(request))

    @router.delete("/verbs/{verb}", tags=["verbs"])
    def delete_verb(verb: VerbName, request: Request) -> dict[str, Any]:
        """Delete a verb; 422 while another verb's decomposition still names it."""
        return discovery.delete_verb(verb, principal=caller(request))

    # -- tools: fixed paths first, so that no toolId shadows them -----------------------------------

    @router.get("/tools/stats", tags=["tools"])
    def stats(request: Request) -> dict[str, int]:
        """How many verbs, tools (``tools_active``, ``tools_quarantined``, ``tools_inactive``) and
        sources the caller sees."""
        return discovery.stats(principal=caller(request))

    @router.post("/tools/search", tags=["tools"])
    def search_tools(body: ToolSearchRequest, request: Request) -> dict[str, Any]:
        """The tools that best answer a request, best first.

        Each result has its ``toolId``, name, type, description, ``score``, ``confidence`` (0-1) and
        ``why`` it matched. Only active tools whose circuit is closed are searched unless the filters
        ask otherwise; quarantined tools never show up for non-administrators.
        """
        return discovery.search_tools(
            body.query, principal=caller(request), top_k=body.top_k, filters=body.filters()
        )

    @router.post("/tools", status_code=status.HTTP_201_CREATED, tags=["tools"])
    def register_tool(body: ToolManifestBody, request: Request) -> dict[str, Any]:
        """Register or update a tool from its manifest, with ``change``: created, updated or unchanged.

        A tool that reaches a network service is active at once; one that runs a program on the
        server waits quarantined for the server's operator. A manifest that breaks the format is a
        422 whose ``problems`` name every field at fault.
        """
        principal = caller(request)
        return discovery.register_tool(
            body.manifest(),
            principal=principal,
            visibility=body.visibility,
            allowed_teams=_teams(lib, principal, body.allowed_teams),
        )

    @router.get("/tools", tags=["tools"])
    def list_tools(
        request: Request,
        state: Annotated[ToolStatus | None, Query(alias="status", description="Only this status.")] = None,
        tool_type: Annotated[ToolType | None, Query(alias="type", description="Only this type.")] = None,
        source_id: int | None = Query(default=None, ge=1, le=MAX_ID, description="Only this source's."),
        limit: int = Query(default=100, ge=1, le=1000, description="At most this many."),
        after: int = Query(default=0, ge=0, le=MAX_ID, description="The `next` of the previous page."),
    ) -> dict[str, Any]:
        """Tools the caller may read, by id, a page at a time: ``next`` is the cursor of the next page
        (pass it as ``after``), null on the last one."""
        rows = discovery.tools(
            principal=caller(request),
            status=state,
            tool_type=tool_type,
            source_id=source_id,
            limit=limit,
            after_id=after,
        )
        return _page("tools", rows, limit)

    @router.post("/tools/{tool_id:path}/approve", tags=["tools"])
    def approve(tool_id: ToolKey, request: Request) -> dict[str, Any]:
        """Approve a tool: it becomes active, in search and callable. A quarantined (imported) tool
        needs the ``admin`` scope: reviewing it is the point of quarantine."""
        return discovery.set_status(tool_id, "active", principal=caller(request))

    @router.post("/tools/{tool_id:path}/deactivate", tags=["tools"])
    def deactivate(tool_id: ToolKey, request: Request) -> dict[str, Any]:
        """Take a tool out of search and refuse its calls; its record and history stay."""
        return discovery.set_status(tool_id, "inactive", principal=caller(request))

    @router.post("/tools/{tool_id:path}/activate", tags=["tools"])
    def activate(tool_id: ToolKey, request: Request) -> dict[str, Any]:
        """Bring a deactivated tool back into search and calls."""
        return discovery.set_status(tool_id, "active", principal=caller(request))

    @router.post("/tools/{tool_id:path}/call", tags=["tools"], responses=_UPSTREAM)
    def call(tool_id: ToolKey, request: Request, body: CallRequest | None = None) -> dict[str, Any]:
        """call_tool: call a registered tool with arguments checked against its inputSchema.

        Answers the tool's ``content`` (structured when the tool gives some) and ``text``. 409: the
        tool is quarantined, inactive or out of use after failed calls; 422: the arguments break its
        schema (the message names the argument); 502: the tool was reached but its call failed.
        """
        body = body or CallRequest()
        result = discovery.call(tool_id, body.arguments, principal=caller(request), request=body.request)
        return {"tool": tool_id, "content": result.content, "is_error": result.is_error, "text": result.text}

    @router.post("/tools/{tool_id:path}/uses", status_code=status.HTTP_201_CREATED, tags=["tools"])
    def record_use(tool_id: ToolKey, body: UseRequest, request: Request) -> dict[str, Any]:
        """Record that a tool was chosen for a request (and whether it served it) when you called it
        yourself: searches for similar requests in your organisation learn from it."""
        return discovery.record_use(
            tool_id, body.request, succeeded=body.succeeded, principal=caller(request)
        )

    @router.get("/tools/{tool_id:path}", tags=["tools"])
    def read_tool(tool_id: ToolKey, request: Request) -> dict[str, Any]:
        """One tool with its inputSchema, binding, examples, review status, health and call counts."""
        return discovery.tool(tool_id, principal=caller(request))

    @router.delete("/tools/{tool_id:path}", tags=["tools"])
    def delete_tool(tool_id: ToolKey, request: Request) -> dict[str, Any]:
        """Delete a tool and its recorded uses (an imported one comes back on the next sync)."""
        return discovery.delete_tool(tool_id, principal=caller(request))

    # -- sources --------------------------------------------------------------------------------

    @router.post(
        "/tool-sources", status_code=status.HTTP_201_CREATED, tags=["tool sources"], responses=_UPSTREAM
    )
    def import_source(body: ToolSourceRequest, request: Request) -> dict[str, Any]:
        """Import the tools of an MCP server, OpenAPI document, Python module or indexed CLI.

        Imported tools start quarantined (out of search and calls) until an administrator approves
        them, unless an administrator imports with ``approve``. Answers what changed: ``added``,
        ``changed``, ``removed``, ``unchanged``, and ``errors`` naming each tool skipped and why.
        """
        principal = caller(request)
        location = body.spec.get("location")
        if body.kind == "openapi" and not (isinstance(location, str) and location.startswith(REMOTE)):
            # The server's own files are not its callers' to read (as with POST /sources).
            raise InvalidInputError(
                f"spec.location: {location!r} is not an http(s) URL; over the API an OpenAPI document "
                "is imported from its URL",
                hint="import a local document with `librarian tools import openapi NAME --location FILE`",
            )
        return discovery.import_source(
            body.kind,
            body.name,
            body.spec,
            principal=principal,
            approve=body.approve,
            visibility=body.visibility,
            allowed_teams=_teams(lib, principal, body.allowed_teams),
        )

    @router.get("/tool-sources", tags=["tool sources"])
    def sources(request: Request) -> dict[str, Any]:
        """The tool sources of the caller's organisation, with when each was last synced and what
        changed then."""
        return {"sources": discovery.sources(principal=caller(request))}

    @router.post("/tool-sources/{name}/sync", tags=["tool sources"], responses=_UPSTREAM)
    def sync_source(name: SourceName, request: Request) -> dict[str, Any]:
        """List a source again and apply its additions, changes and removals; a source that cannot
        be listed changes nothing (the error is kept on the source)."""
        return discovery.sync_source(name, principal=caller(request))

    @router.delete("/tool-sources/{name}", tags=["tool sources"])
    def delete_source(name: SourceName, request: Request) -> dict[str, Any]:
        """Delete a tool source and every tool imported from it."""
        return discovery.delete_source(name, principal=caller(request))

    return router
