"""Who is asking, and which stored objects they may see: principals, visibilities and grants.

Every knowledge object (a source's documents, a hand-written document, an incident, a solution)
belongs to one organisation and has one visibility:

* ``private``: its creator only;
* ``teams``: its creator and the members of the teams in ``allowed_teams``;
* ``organization``: every member of its organisation;
* ``public``: everyone (SDK documentation ingested by an administrator is public by default).

Access is decided *inside* every query, never after ranking (a filter applied after ranking returns
fewer than ``top_k`` results and leaks through counts). To make that cheap on every engine, an object
is stored with its **grants**: the short strings naming who may read it (``public``, ``org:3``,
``team:7``, ``user:12``). A principal holds grants too, and may read an object exactly when the two
sets meet. Lexical indexes, vector indexes and SQL filters all test that one intersection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from librarian.errors import ForbiddenError, InvalidInputError

# The implicit organisation and user of a store with no tokens: the embedded single-user default.
LOCAL_ORGANIZATION_ID = 1
LOCAL_USER_ID = 1

PUBLIC_GRANT = "public"


class Visibility(StrEnum):
    """Who may read a knowledge object besides its creator."""

    PRIVATE = "private"
    TEAMS = "teams"
    ORGANIZATION = "organization"
    PUBLIC = "public"


class Scope(StrEnum):
    """What a token may do: ``read`` searches, ``write`` adds and edits, ``admin`` manages people."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


def parse_visibility(value: str, *, field_name: str = "visibility") -> Visibility:
    """``value`` as a :class:`Visibility`, or an error naming the field and the allowed values."""
    try:
        return Visibility(value)
    except ValueError:
        allowed = ", ".join(v.value for v in Visibility)
        raise InvalidInputError(
            f"{field_name}: unknown visibility {value!r}", hint=f"use one of {allowed}"
        ) from None


def parse_scopes(values: Iterable[str]) -> frozenset[Scope]:
    """Token scopes from their names; ``admin`` implies ``write`` and ``write`` implies ``read``."""
    scopes: set[Scope] = set()
    for value in values:
        try:
            scopes.add(Scope(value.strip()))
        except ValueError:
            allowed = ", ".join(s.value for s in Scope)
            raise InvalidInputError(f"scopes: unknown scope {value!r}", hint=f"use {allowed}") from None
    if Scope.ADMIN in scopes:
        scopes.add(Scope.WRITE)
    if Scope.WRITE in scopes:
        scopes.add(Scope.READ)
    if not scopes:
        raise InvalidInputError("scopes: a token needs at least one scope", hint="use read, write or admin")
    return frozenset(scopes)


@dataclass(frozen=True)
class Principal:
    """The caller a request acts for.

    ``is_operator`` marks the machine's operator (the CLI run on the data directory without a token,
    which could read the database file anyway): it may create organisations and act across them.
    Operators still see documents through their own user's grants unless ``sees_everything``.
    """

    organization_id: int
    user_id: int
    team_ids: frozenset[int] = frozenset()
    scopes: frozenset[Scope] = frozenset({Scope.READ, Scope.WRITE, Scope.ADMIN})
    is_operator: bool = False
    user_name: str = "local"
    token_id: int | None = None
    sees_everything: bool = field(default=False)

    @property
    def grants(self) -> tuple[str, ...] | None:
        """The grants this principal holds, or ``None`` when nothing is hidden from it."""
        if self.sees_everything:
            return None
        return (
            PUBLIC_GRANT,
            f"org:{self.organization_id}",
            f"user:{self.user_id}",
            *(f"team:{team_id}" for team_id in sorted(self.team_ids)),
        )

    @property
    def is_admin(self) -> bool:
        """Whether this principal may manage its organisation's people and everyone's documents."""
        return Scope.ADMIN in self.scopes

    def require(self, scope: Scope, action: str) -> None:
        """Raise :class:`ForbiddenError` unless this principal's token carries ``scope``."""
        if scope not in self.scopes:
            raise ForbiddenError(
                f"{action} needs the {scope.value!r} scope; this token has "
                f"{', '.join(sorted(s.value for s in self.scopes)) or 'none'}",
                hint=f"ask an administrator for a token with the {scope.value!r} scope",
            )


def local_principal(*, operator: bool = True) -> Principal:
    """The implicit single user of the embedded default (no tokens configured)."""
    return Principal(
        organization_id=LOCAL_ORGANIZATION_ID,
        user_id=LOCAL_USER_ID,
        is_operator=operator,
    )


def object_grants(
    organization_id: int, visibility: Visibility | str, allowed_teams: Iterable[int], created_by: int | None
) -> list[str]:
    """The grants stored with an object: who, besides nobody, may read it."""
    level = Visibility(visibility)
    if level is Visibility.PUBLIC:
        return [PUBLIC_GRANT]
    if level is Visibility.ORGANIZATION:
        return [f"org:{organization_id}"]
    grants = [] if created_by is None else [f"user:{created_by}"]
    if level is Visibility.TEAMS:
        grants.extend(f"team:{team_id}" for team_id in sorted(set(allowed_teams)))
    if not grants:  # a private object nobody created (a system record) belongs to the organisation
        grants.append(f"org:{organization_id}")
    return grants


def can_read(principal: Principal, grants: Iterable[str]) -> bool:
    """Whether ``principal`` may read an object stored with ``grants``."""
    held = principal.grants
    return held is None or not set(held).isdisjoint(grants)


def can_change(principal: Principal, organization_id: int, created_by: int | None) -> bool:
    """Whether ``principal`` may edit or delete an object: its creator, or an admin of its organisation."""
    if Scope.WRITE not in principal.scopes:
        return False
    if principal.sees_everything:
        return True
    if principal.organization_id != organization_id:
        return False
    return principal.user_id == created_by or principal.is_admin


def require_store_administrator(principal: Principal, action: str) -> None:
    """Allow ``action`` on the store as a whole (its counts, its vector index) only to the operator
    and the administrators of the local organisation, the server's own.

    The store holds every organisation's documents: its counts reveal theirs, and rebuilding its
    index is the server's maintenance, not one organisation's.

    Raises:
        ForbiddenError: anyone else.
    """
    if principal.is_operator or principal.sees_everything:
        return
    principal.require(Scope.ADMIN, action)
    if principal.organization_id != LOCAL_ORGANIZATION_ID:
        raise ForbiddenError(
            f"{action} concerns every organisation's documents: only the server's own "
            "organisation's administrators may do it"
        )


@dataclass(frozen=True)
class SourceOwner:
    """Who owns an ingest source and who may read its documents (``None`` visibility: the default,
    public for SDK documentation and organisation-wide for everything else)."""

    organization_id: int = LOCAL_ORGANIZATION_ID
    created_by: int | None = None
    visibility: Visibility | None = None
    allowed_teams: tuple[int, ...] = ()


def owner_for(
    principal: Principal, visibility: str | None = None, allowed_teams: Iterable[int] = ()
) -> SourceOwner:
    """The owner of something ``principal`` adds, after checking it may give it that visibility.

    Only administrators publish to everyone; a non-administrator's SDK documentation stays in its
    organisation unless it asks for less.

    Raises:
        InvalidInputError: an unknown visibility, or teams without the ``teams`` visibility.
        ForbiddenError: a non-administrator asking for ``public``.
    """
    level = parse_visibility(visibility) if visibility is not None else None
    teams = tuple(sorted(set(allowed_teams)))
    if teams and level is not Visibility.TEAMS:
        raise InvalidInputError(
            "allowed_teams: teams are only used with the 'teams' visibility", hint="add visibility='teams'"
        )
    if level is Visibility.TEAMS and not teams:
        raise InvalidInputError("allowed_teams: the 'teams' visibility needs at least one team")
    if level is Visibility.PUBLIC and not principal.is_admin:
        raise ForbiddenError(
            "visibility: only an administrator can make knowledge public",
            hint="use organization, teams or private",
        )
    if level is None and not principal.is_admin:
        level = Visibility.ORGANIZATION
    return SourceOwner(principal.organization_id, principal.user_id, level, teams)
