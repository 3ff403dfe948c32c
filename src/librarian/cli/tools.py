"""``librarian tools``: register, import, review, search and call tools (``lib.discovery``); the
verbs are in :mod:`librarian.cli.verbs`.

Exit codes: 0 success, 1 failure (the message on stderr; a tool call that failed too), 3 some
inputs were refused while others went through (manifests of a file, tools of an imported source).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from librarian.app import Librarian
from librarian.cli.common import (
    EXIT_FAILURE,
    EXIT_PARTIAL,
    JsonOption,
    handle_errors,
    librarian,
    print_json,
    stdout,
)
from librarian.cli.tool_output import (
    print_call,
    print_page,
    print_registered,
    print_search,
    print_stats,
    print_sync,
    print_tool,
    sources_table,
    tools_table,
)
from librarian.discovery.manifest import ManifestInvalidError
from librarian.discovery.ranking import ToolFilters
from librarian.errors import InvalidInputError
from librarian.safe_yaml import load_json, load_yaml

tools_app = typer.Typer(
    help="Tools: register and import them, review imports, search them by what they do and call them.",
    no_args_is_help=True,
)

ToolKey = Annotated[str, typer.Argument(help="The tool's toolId or numeric id (see `librarian tools list`).")]
ManifestFile = Annotated[
    Path, typer.Argument(help="A JSON or YAML file holding one manifest or a list of them.")
]
Visibility = Annotated[
    str | None,
    typer.Option("--visibility", help="private, teams, organization (default) or public (admins)."),
]
Teams = Annotated[
    list[str] | None, typer.Option("--team", help="A team name or id (with --visibility teams); repeatable.")
]
TopK = Annotated[int, typer.Option("--top-k", help="How many results (1-50).")]
Limit = Annotated[int, typer.Option("--limit", help="At most this many (1-1000).")]
After = Annotated[int, typer.Option("--after", help="The cursor printed by the previous page.")]


# -- reading input ----------------------------------------------------------------------------------


def read_manifests(path: Path) -> list[Any]:
    """The manifests of a JSON or YAML file: one object, or a list of them.

    Raises:
        InvalidInputError: the file cannot be read or parsed, or holds neither an object nor a list.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    origin = str(path)
    loaded = load_json(data, origin) if path.suffix.lower() == ".json" else load_yaml(data, origin)
    if isinstance(loaded, dict):
        return [loaded]
    if isinstance(loaded, list) and loaded:
        return loaded
    raise InvalidInputError(
        f"{path}: holds no manifest", hint="write one manifest (an object) or a list of manifests"
    )


def parse_object(text: str, option: str) -> dict[str, Any]:
    """The JSON object given as ``option`` (``--args``, ``--spec``).

    Raises:
        InvalidInputError: not JSON, or not an object, naming the option.
    """
    value = load_json(text.encode("utf-8"), option)
    if not isinstance(value, dict):
        raise InvalidInputError(
            f"{option}: must be a JSON object", hint=f'e.g. {option} \'{{"name": "value"}}\''
        )
    return value


def pairs(values: list[str] | None, option: str) -> dict[str, str]:
    """``NAME=VALUE`` options as a dict.

    Raises:
        InvalidInputError: an item has no ``=`` or no name, naming the option and the item.
    """
    found: dict[str, str] = {}
    for item in values or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(f"{option} {item!r}: give NAME=VALUE", hint=f"e.g. {option} TOKEN=abc")
        found[name.strip()] = value
    return found


# Which options of `tools import` each kind takes, and the spec key each one fills.
SPEC_KEYS = {
    "mcp": {"command": "command", "url": "url", "env": "env", "headers": "headers"},
    "openapi": {"location": "location", "url": "location", "base_url": "base_url", "headers": "headers"},
    "python": {"module": "module", "entry_point_group": "entry_point_group", "functions": "functions",
               "path": "path"},
    "cli": {"sdk": "sdk_name", "version": "sdk_version", "commands": "commands"},
}  # fmt: skip
# Options whose flag is not the key's name (the spec's plural keys are filled by repeated options).
FLAGS = {"functions": "--function", "headers": "--header"}
# Exactly one of these options names where a kind's tools are.
SPEC_ORIGINS = {
    "mcp": ("command", "url"),
    "openapi": ("location", "url"),
    "python": ("module", "entry_point_group"),
    "cli": ("sdk",),
}


def source_spec(kind: str, given: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec of a tool source of ``kind`` from the options of ``tools import``.

    ``given`` maps option names (``entry_point_group`` for ``--entry-point-group``) to values; empty
    ones are left out. ``extra`` (``--spec``) adds keys no option covers.

    Raises:
        InvalidInputError: an unknown kind, an option the kind does not take, or not exactly one of
            the options that say where the tools are, by name.
    """
    if kind not in SPEC_KEYS:
        raise InvalidInputError(f"KIND: {kind!r} is not one of {', '.join(SPEC_KEYS)}")
    present = {key: value for key, value in given.items() if value}
    stray = sorted(set(present) - set(SPEC_KEYS[kind]))
    if stray:
        options = ", ".join(_flag(key) for key in stray)
        raise InvalidInputError(f"{options}: not used by a {kind} source")
    origins = [key for key in SPEC_ORIGINS[kind] if key in present]
    if len(origins) != 1:
        options = " or ".join(_flag(key) for key in SPEC_ORIGINS[kind])
        article = "an" if kind in ("mcp", "openapi") else "a"
        needed = f"one of {options}" if len(SPEC_ORIGINS[kind]) > 1 else options
        raise InvalidInputError(
            f"{article} {kind} source needs {needed}",
            hint={
                "mcp": 'e.g. --command "mcp-server-time --local-timezone UTC" or --url https://host/mcp',
                "openapi": "e.g. --location https://api.example.com/openapi.json",
                "python": "e.g. --module mypackage.tools",
                "cli": "e.g. --sdk git (a CLI indexed with `librarian ingest-cli`)",
            }[kind],
        )
    spec: dict[str, Any] = {SPEC_KEYS[kind][key]: value for key, value in present.items()}
    if kind == "cli" and len(spec.get("commands", ())) == 1:
        spec["commands"] = spec["commands"][0]  # one value is a prefix: it and the commands below it
    return {**(extra or {}), **spec}


def _flag(key: str) -> str:
    return FLAGS.get(key, "--" + key.replace("_", "-"))


def register_all(
    manifests: list[Any], register: Callable[[Any], dict[str, Any]], origin: Path, key: str
) -> tuple[dict[str, Any], int | None]:
    """Register each manifest with ``register``; a refused one is kept with its problems.

    Returns the report (``registered`` and ``errors``) and the exit code it calls for: ``None``
    when all went through, 3 when some were refused, 1 when all were.
    """
    registered: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for position, manifest in enumerate(manifests):
        label = (manifest.get(key) or manifest.get("name")) if isinstance(manifest, dict) else None
        where = f"{origin} #{position + 1}" + (f" ({label})" if label else "")
        try:
            registered.append(register(manifest))
        except ManifestInvalidError as exc:
            errors.append({"manifest": where, "problems": exc.problems})
        except InvalidInputError as exc:
            errors.append({"manifest": where, "problems": [exc.message]})
    report = {"registered": registered, "errors": errors}
    if not errors:
        return report, None
    return report, EXIT_PARTIAL if registered else EXIT_FAILURE


def teams_of(lib: Librarian, teams: list[str] | None) -> tuple[int, ...]:
    """Team names or ids of ``--team`` as ids of the caller's organisation."""
    if not teams:
        return ()
    return tuple(lib.identity.team_ids_of(lib.default_principal.organization_id, teams))


# -- tools: registering and importing ---------------------------------------------------------------


@tools_app.command("register")
def register(
    file: ManifestFile, visibility: Visibility = None, team: Teams = None, as_json: JsonOption = False
) -> None:
    """Register tools from their manifests (exit 3 when some are refused, 1 when all are)."""
    with librarian() as lib:
        manifests = read_manifests(file)
        teams = teams_of(lib, team)
        report, code = register_all(
            manifests,
            lambda manifest: lib.discovery.register_tool(
                manifest, principal=lib.default_principal, visibility=visibility, allowed_teams=teams
            ),
            file,
            "toolId",
        )
    print_json(report) if as_json else print_registered("tool", report)
    if code is not None:
        raise typer.Exit(code)


@tools_app.command("import")
def import_source(
    kind: Annotated[str, typer.Argument(help="mcp, openapi, python or cli.")],
    name: Annotated[str, typer.Argument(help="Your name for the source (letters, digits, - _ .).")],
    command: Annotated[
        str | None, typer.Option("--command", help="mcp: the server's command line, started over stdio.")
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="mcp: the server's streamable HTTP URL; openapi: the document's URL."),
    ] = None,
    location: Annotated[
        str | None, typer.Option("--location", help="openapi: the document's file or URL.")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="openapi: send calls here instead of its servers.")
    ] = None,
    module: Annotated[str | None, typer.Option("--module", help="python: the module to list.")] = None,
    entry_point_group: Annotated[
        str | None, typer.Option("--entry-point-group", help="python: list this entry-point group.")
    ] = None,
    functions: Annotated[
        list[str] | None, typer.Option("--function", help="python --module: only this function; repeatable.")
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option("--path", help="python: a directory to find the module in; repeatable."),
    ] = None,
    sdk: Annotated[str | None, typer.Option("--sdk", help="cli: the name the CLI was indexed under.")] = None,
    version: Annotated[
        str | None, typer.Option("--version", help="cli: its indexed version (default: the newest).")
    ] = None,
    commands: Annotated[
        list[str] | None,
        typer.Option("--commands", help="cli: only these commands (repeatable); one value is a prefix."),
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", help="mcp --command: NAME=VALUE in its environment.")
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", help="mcp --url, openapi: NAME=VALUE sent with calls.")
    ] = None,
    extra: Annotated[
        str | None, typer.Option("--spec", help='More spec keys as a JSON object, e.g. \'{"slug": "acme"}\'.')
    ] = None,
    approve: Annotated[
        bool, typer.Option("--approve", help="Import the tools active, not quarantined (administrators).")
    ] = False,
    visibility: Visibility = None,
    team: Teams = None,
    as_json: JsonOption = False,
) -> None:
    """Import the tools of a source and keep it for `tools sync` (exit 3 when some tools were skipped).

    Imported tools are quarantined until an administrator approves them (or imports with --approve).
    """
    with handle_errors():
        spec = source_spec(
            kind,
            {
                "command": command,
                "url": url,
                "location": location,
                "base_url": base_url,
                "module": module,
                "entry_point_group": entry_point_group,
                "functions": functions,
                "path": path,
                "sdk": sdk,
                "version": version,
                "commands": commands,
                "env": pairs(env, "--env"),
                "headers": pairs(header, "--header"),
            },
            parse_object(extra, "--spec") if extra else None,
        )
    with librarian() as lib:
        report = lib.discovery.import_source(
            kind,
            name,
            spec,
            principal=lib.default_principal,
            approve=approve,
            visibility=visibility,
            allowed_teams=teams_of(lib, team),
        )
    _synced(report, as_json)


@tools_app.command("sync")
def sync(
    name: Annotated[str, typer.Argument(help="The source's name.")], as_json: JsonOption = False
) -> None:
    """List a source again and apply its additions, changes and removals (exit 3 if some skipped)."""
    with librarian() as lib:
        report = lib.discovery.sync_source(name, principal=lib.default_principal)
    _synced(report, as_json)


def _synced(report: dict[str, Any], as_json: bool) -> None:
    print_json(report) if as_json else print_sync(report)
    if report["errors"]:
        raise typer.Exit(EXIT_PARTIAL)


@tools_app.command("sources")
def sources(as_json: JsonOption = False) -> None:
    """The tool sources of your organisation, with their last sync."""
    with librarian() as lib:
        rows = lib.discovery.sources(principal=lib.default_principal)
    if as_json:
        print_json(rows)
        return
    if not rows:
        stdout.print(
            "no tool sources: import one with `librarian tools import KIND NAME ...`", style="yellow"
        )
        return
    stdout.print(sources_table(rows))


@tools_app.command("remove-source")
def remove_source(
    name: Annotated[str, typer.Argument(help="The source's name.")], as_json: JsonOption = False
) -> None:
    """Delete a tool source and every tool imported from it."""
    with librarian() as lib:
        result = lib.discovery.delete_source(name, principal=lib.default_principal)
    if as_json:
        print_json(result)
        return
    stdout.print(
        f"source {escape(result['source'])} removed with its {result['removed_tools']} tools", highlight=False
    )


# -- tools: reading and reviewing -------------------------------------------------------------------


@tools_app.command("list")
def list_tools(
    status: Annotated[
        str | None, typer.Option("--status", help="Only tools in this status: active, quarantined, inactive.")
    ] = None,
    tool_type: Annotated[
        str | None, typer.Option("--type", help="Only tools of this type: mcp, openapi, python, cli.")
    ] = None,
    limit: Limit = 100,
    after: After = 0,
    as_json: JsonOption = False,
) -> None:
    """Tools you may read, by id, a page at a time (the next page's cursor is printed)."""
    with librarian() as lib:
        rows = lib.discovery.tools(
            principal=lib.default_principal, status=status, tool_type=tool_type, limit=limit, after_id=after
        )
    print_page("tools", rows, limit, tools_table, as_json)


@tools_app.command("show")
def show(tool_id: ToolKey, as_json: JsonOption = False) -> None:
    """One tool: what it does, its input schema and binding, review status and health."""
    with librarian() as lib:
        view = lib.discovery.tool(tool_id, principal=lib.default_principal)
    print_json(view) if as_json else print_tool(view)


@tools_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What the tool should do, in plain words.")],
    top_k: TopK = 5,
    tool_type: Annotated[str | None, typer.Option("--type", help="Only this type.")] = None,
    category: Annotated[str | None, typer.Option("--category", help="Only this category.")] = None,
    capability: Annotated[str | None, typer.Option("--capability", help="Only tools with it.")] = None,
    status: Annotated[
        str, typer.Option("--status", help="Review status searched (administrators: quarantined, inactive).")
    ] = "active",
    as_json: JsonOption = False,
) -> None:
    """The tools that best do what you describe, each with score, confidence and why it matched."""
    filters = ToolFilters(tool_type=tool_type, category=category, capability=capability, statuses=(status,))
    with librarian() as lib:
        found = lib.discovery.search_tools(
            query, principal=lib.default_principal, top_k=top_k, filters=filters
        )
    if as_json:
        print_json(found)
        return
    if not found["results"]:
        stdout.print("no tool matches", style="yellow")
        return
    print_search(found)


def _set_status(tool_id: str, status: str, as_json: bool) -> None:
    with librarian() as lib:
        view = lib.discovery.set_status(tool_id, status, principal=lib.default_principal)
    if as_json:
        print_json(view)
        return
    stdout.print(f"tool {escape(view['toolId'])} is {view['status']}", highlight=False)


@tools_app.command("approve")
def approve(tool_id: ToolKey, as_json: JsonOption = False) -> None:
    """Approve a quarantined tool (administrators): it joins search and may be called."""
    _set_status(tool_id, "active", as_json)


@tools_app.command("deactivate")
def deactivate(tool_id: ToolKey, as_json: JsonOption = False) -> None:
    """Take a tool out of search and refuse its calls; its record stays."""
    _set_status(tool_id, "inactive", as_json)


@tools_app.command("activate")
def activate(tool_id: ToolKey, as_json: JsonOption = False) -> None:
    """Bring a deactivated tool back into search and calls."""
    _set_status(tool_id, "active", as_json)


@tools_app.command("delete")
def delete(tool_id: ToolKey, as_json: JsonOption = False) -> None:
    """Delete a tool and its recorded uses."""
    with librarian() as lib:
        view = lib.discovery.delete_tool(tool_id, principal=lib.default_principal)
    if as_json:
        print_json(view)
        return
    stdout.print(f"tool {escape(view['toolId'])} deleted", highlight=False)


@tools_app.command("stats")
def stats(as_json: JsonOption = False) -> None:
    """How many tools (by review status), verbs and sources you see."""
    with librarian() as lib:
        counts = lib.discovery.stats(principal=lib.default_principal)
    print_json(counts) if as_json else print_stats(counts)


# -- tools: using -----------------------------------------------------------------------------------


@tools_app.command("call")
def call(
    tool_id: ToolKey,
    args: Annotated[
        str, typer.Option("--args", help='The arguments as a JSON object, e.g. \'{"city": "Paris"}\'.')
    ] = "{}",
    request: Annotated[
        str | None, typer.Option("--request", help="What you want it for: ranks it for similar requests.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Call a tool with arguments checked against its input schema; print what it answered (exit 1
    when the call failed)."""
    with handle_errors():
        arguments = parse_object(args, "--args")
    with librarian() as lib:
        result = lib.discovery.call(tool_id, arguments, principal=lib.default_principal, request=request)
    answer = {"tool": tool_id, "content": result.content, "is_error": result.is_error, "text": result.text}
    print_json(answer) if as_json else print_call(answer)
    if result.is_error:
        raise typer.Exit(EXIT_FAILURE)


@tools_app.command("use")
def use(
    tool_id: ToolKey,
    request: Annotated[str, typer.Argument(help="What the tool was chosen for.")],
    failed: Annotated[bool, typer.Option("--failed", help="The tool did not serve the request.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Record that a tool was chosen for a request you ran yourself, so search learns from it."""
    with librarian() as lib:
        result = lib.discovery.record_use(
            tool_id, request, succeeded=not failed, principal=lib.default_principal
        )
    if as_json:
        print_json(result)
        return
    outcome = "served" if result["succeeded"] else "did not serve"
    stdout.print(
        f"recorded: {escape(result['tool'])} {outcome} {escape(result['request'])!r}", highlight=False
    )
