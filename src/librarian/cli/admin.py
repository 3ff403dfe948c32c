"""``librarian admin``: organisations, teams, users and API tokens.

Run on the server's data directory without ``--token``, these commands act as the operator, who may
do everything; with ``--token`` they act as that token's user (an administrator manages its own
organisation only).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from librarian.cli.common import JsonOption, librarian, print_json, stdout

admin_app = typer.Typer(help="Manage organisations, teams, users and API tokens.", no_args_is_help=True)
token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)
admin_app.add_typer(token_app, name="token")

OrgOption = Annotated[str, typer.Option("--org", help="Organisation name or id.")]


@admin_app.command("create-org")
def create_org(
    name: Annotated[str, typer.Argument(help="The organisation's name.")], as_json: JsonOption = False
) -> None:
    """Create an organisation (operator only)."""
    with librarian() as lib:
        created = lib.identity.create_organization(lib.default_principal, name)
    print_json(created) if as_json else stdout.print(f"organisation {created['id']}: {created['name']}")


@admin_app.command("create-team")
def create_team(
    name: Annotated[str, typer.Argument(help="The team's name.")], org: OrgOption, as_json: JsonOption = False
) -> None:
    """Create a team in an organisation."""
    with librarian() as lib:
        created = lib.identity.create_team(lib.default_principal, org, name)
    print_json(created) if as_json else stdout.print(f"team {created['id']}: {created['name']}")


@admin_app.command("create-user")
def create_user(
    name: Annotated[str, typer.Argument(help="The user's name (unique in its organisation).")],
    org: OrgOption,
    team: Annotated[
        list[str] | None, typer.Option("--team", help="A team to join; repeat for several.")
    ] = None,
    admin: Annotated[bool, typer.Option("--admin", help="Let the user manage its organisation.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Create a user, optionally an administrator, in teams of its organisation."""
    with librarian() as lib:
        created = lib.identity.create_user(lib.default_principal, org, name, admin=admin, teams=team or [])
    print_json(created) if as_json else stdout.print(f"user {created['id']}: {created['name']}")


@admin_app.command("add-member")
def add_member(
    team: Annotated[str, typer.Argument(help="Team name or id.")],
    user: Annotated[str, typer.Argument(help="User name or id.")],
    org: OrgOption,
) -> None:
    """Put a user into a team."""
    with librarian() as lib:
        lib.identity.add_member(lib.default_principal, org, team, user)
    stdout.print(f"{user} is a member of {team}")


@admin_app.command("list")
def list_directory(
    org: Annotated[str | None, typer.Option("--org", help="Only this organisation.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Organisations with their teams and users."""
    with librarian() as lib:
        directory = lib.identity.directory(lib.default_principal, org)
    if as_json:
        print_json(directory)
        return
    for organization in directory["organizations"]:
        stdout.print(f"[bold]{organization['name']}[/] (id {organization['id']})")
        for team in organization["teams"]:
            stdout.print(f"  team {team['id']}: {team['name']}")
        for user in organization["users"]:
            role = " (admin)" if user["is_admin"] else ""
            stdout.print(f"  user {user['id']}: {user['name']}{role} teams={user['teams']}")


@token_app.command("create")
def create_token(
    user: Annotated[str, typer.Argument(help="User name or id.")],
    org: OrgOption,
    name: Annotated[str, typer.Option("--name", help="What the token is for.")] = "token",
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="read, write or admin; repeat for several (default read)."),
    ] = None,
    expires_in_days: Annotated[
        int | None, typer.Option("--expires-in-days", help="Lifetime (default: none).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token; it is printed this once and cannot be shown again."""
    with librarian() as lib:
        created = lib.identity.create_token(
            lib.default_principal,
            org,
            user,
            name=name,
            scopes=scope or ["read"],
            expires_in_days=expires_in_days,
        )
    if as_json:
        print_json(created)
        return
    stdout.print(f"token {created['id']} for {created['user']} ({', '.join(created['scopes'])}):")
    stdout.print(created["token"], highlight=False, soft_wrap=True)
    stdout.print("[dim]store it now: only its hash is kept[/]")


@token_app.command("list")
def list_tokens(
    org: Annotated[str | None, typer.Option("--org", help="Organisation (default: your own).")] = None,
    as_json: JsonOption = False,
) -> None:
    """The tokens of an organisation (their first characters, never the secret)."""
    with librarian() as lib:
        tokens = lib.identity.list_tokens(lib.default_principal, org)
    if as_json:
        print_json(tokens)
        return
    table = Table("id", "user", "name", "prefix", "scopes", "last used", "revoked")
    for token in tokens:
        table.add_row(
            str(token["id"]),
            token["user"],
            token["name"],
            token["prefix"],
            ",".join(token["scopes"]),
            token["last_used_at"] or "-",
            token["revoked_at"] or "-",
        )
    stdout.print(table)


@token_app.command("revoke")
def revoke_token(
    token_id: Annotated[int, typer.Argument(help="The token's id.")], as_json: JsonOption = False
) -> None:
    """Revoke a token; requests with it are refused from now on."""
    with librarian() as lib:
        revoked = lib.identity.revoke_token(lib.default_principal, token_id)
    print_json(revoked) if as_json else stdout.print(
        f"token {revoked['id']} revoked at {revoked['revoked_at']}"
    )
