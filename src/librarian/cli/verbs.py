"""``librarian verbs``: register the named capabilities plans use and discover the ones that exist
(``lib.discovery``). Exit codes as ``librarian tools``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from librarian.cli.common import JsonOption, librarian, print_json, stdout
from librarian.cli.tool_output import print_discovery, print_page, print_registered, print_verb, verbs_table
from librarian.cli.tools import (
    After,
    Limit,
    ManifestFile,
    Teams,
    TopK,
    Visibility,
    read_manifests,
    register_all,
    teams_of,
)

verbs_app = typer.Typer(
    help="Verbs: the named capabilities plans use; register them and discover the ones that exist.",
    no_args_is_help=True,
)
VerbName = Annotated[str, typer.Argument(help="The verb, e.g. GET_WEATHER (`get weather` works too).")]


@verbs_app.command("register")
def register_verbs(
    file: ManifestFile, visibility: Visibility = None, team: Teams = None, as_json: JsonOption = False
) -> None:
    """Register verbs from their manifests, in file order (exit 3 when some are refused, 1 when all are)."""
    with librarian() as lib:
        manifests = read_manifests(file)
        teams = teams_of(lib, team)
        report, code = register_all(
            manifests,
            lambda manifest: lib.discovery.register_verb(
                manifest, principal=lib.default_principal, visibility=visibility, allowed_teams=teams
            ),
            file,
            "verb",
        )
    print_json(report) if as_json else print_registered("verb", report)
    if code is not None:
        raise typer.Exit(code)


@verbs_app.command("list")
def list_verbs(
    status: Annotated[str | None, typer.Option("--status", help="Only verbs in this status.")] = None,
    limit: Limit = 100,
    after: After = 0,
    as_json: JsonOption = False,
) -> None:
    """Verbs you may read, by id, a page at a time (the next page's cursor is printed)."""
    with librarian() as lib:
        rows = lib.discovery.verbs(
            principal=lib.default_principal, status=status, limit=limit, after_id=after
        )
    print_page("verbs", rows, limit, verbs_table, as_json)


@verbs_app.command("show")
def show_verb(verb: VerbName, as_json: JsonOption = False) -> None:
    """One verb: description, capabilities, examples, inputs, outputs and decomposition."""
    with librarian() as lib:
        view = lib.discovery.verb(verb, principal=lib.default_principal)
    print_json(view) if as_json else print_verb(view)


@verbs_app.command("discover")
def discover(
    description: Annotated[str, typer.Argument(help="The capability you need, in plain words.")],
    top_k: TopK = 5,
    as_json: JsonOption = False,
) -> None:
    """The verbs and tools for a capability, each with score, confidence and why, and the best one."""
    with librarian() as lib:
        found = lib.discovery.discover_verbs(description, principal=lib.default_principal, top_k=top_k)
    print_json(found) if as_json else print_discovery(found)


@verbs_app.command("delete")
def delete_verb(verb: VerbName, as_json: JsonOption = False) -> None:
    """Delete a verb that no other verb decomposes into."""
    with librarian() as lib:
        view = lib.discovery.delete_verb(verb, principal=lib.default_principal)
    if as_json:
        print_json(view)
        return
    stdout.print(f"verb {escape(view['verb'])} deleted", highlight=False)
