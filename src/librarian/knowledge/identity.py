"""Organisations, teams, users and API tokens, and turning a bearer token into a :class:`Principal`.

Tokens are ``lib_`` followed by 43 random URL-safe characters (256 bits from :mod:`secrets`). Only
their SHA-256 is stored: a token has far more entropy than a password, so a slow hash would add
latency to every request without making a stolen hash any easier to reverse. The token is shown once,
when it is created; a listing shows its first characters only.

Who may manage whom: the operator (the CLI on the data directory, without a token) may do
everything, including creating organisations; an administrator of an organisation manages its teams,
users and tokens; nobody acts across organisations except the operator.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    UnauthorizedError,
)
from librarian.knowledge.access import Principal, Scope, parse_scopes
from librarian.knowledge.models import ApiToken, Organization, Team, TeamMembership, User
from librarian.storage.models import as_utc, utcnow

TOKEN_PREFIX = "lib_"
_NAME_LIMIT = 255
# A token's last use is written at most this often, so authenticating is a read, not a write.
_LAST_USED_EVERY = timedelta(minutes=1)


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _check_name(value: str, field: str) -> str:
    name = value.strip()
    if not name or len(name) > _NAME_LIMIT or any(ord(ch) < 32 for ch in name):
        raise InvalidInputError(
            f"{field}: {value!r} is not a usable name", hint="use 1-255 printable characters"
        )
    return name


class IdentityService:
    """Create and look up organisations, teams, users and tokens; authenticate bearer tokens."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    # -- authentication -------------------------------------------------------------------------

    def has_tokens(self) -> bool:
        """Whether any token that is not revoked exists (then every HTTP request must carry one)."""
        with self._sessions() as session:
            return (
                session.scalar(select(ApiToken.id).where(ApiToken.revoked_at.is_(None)).limit(1)) is not None
            )

    def authenticate(self, token: str) -> Principal:
        """The principal a bearer token acts for.

        Raises:
            UnauthorizedError: the token is unknown, revoked or expired, or its user is disabled.
        """
        now = utcnow()
        with self._sessions.begin() as session:
            row = session.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(token.strip())))
            if row is None or row.revoked_at is not None:
                raise UnauthorizedError("the bearer token is not valid")
            if row.expires_at is not None and as_utc(row.expires_at) <= now:
                raise UnauthorizedError(
                    "the bearer token has expired", hint="ask an administrator for a new one"
                )
            user = session.get(User, row.user_id)
            if user is None or user.disabled_at is not None:
                raise UnauthorizedError("the bearer token's user is disabled")
            if row.last_used_at is None or now - as_utc(row.last_used_at) > _LAST_USED_EVERY:
                row.last_used_at = now
            return self._principal(session, user, frozenset(parse_scopes(row.scopes)), token_id=row.id)

    def principal_of(self, organization: str | int, user: str | int) -> Principal:
        """The principal of a user with every scope its role allows (for the operator's CLI ``--as``)."""
        with self._sessions() as session:
            found = self._user(session, self._organization(session, organization).id, user)
            scopes = {Scope.READ, Scope.WRITE} | ({Scope.ADMIN} if found.is_admin else set())
            return self._principal(session, found, frozenset(scopes))

    @staticmethod
    def _principal(
        session: Session, user: User, scopes: frozenset[Scope], token_id: int | None = None
    ) -> Principal:
        teams = frozenset(
            session.scalars(select(TeamMembership.team_id).where(TeamMembership.user_id == user.id))
        )
        if not user.is_admin:
            scopes = scopes - {Scope.ADMIN}
        return Principal(
            organization_id=user.organization_id,
            user_id=user.id,
            team_ids=teams,
            scopes=scopes,
            user_name=user.name,
            token_id=token_id,
        )

    # -- organisations, teams, users ------------------------------------------------------------

    def create_organization(self, actor: Principal, name: str) -> dict[str, Any]:
        """Create an organisation (operator only) with no members yet."""
        if not actor.is_operator:
            raise ForbiddenError(
                "only the operator can create organisations", hint="run `librarian admin` on the server"
            )
        with self._sessions.begin() as session:
            organization = Organization(name=_check_name(name, "name"))
            session.add(organization)
            self._flush(session, f"an organisation named {name!r} already exists")
            return {"id": organization.id, "name": organization.name}

    def create_team(self, actor: Principal, organization: str | int, name: str) -> dict[str, Any]:
        """Create a team in an organisation the actor administers."""
        with self._sessions.begin() as session:
            org = self._organization(session, organization)
            self._require_admin(actor, org.id)
            team = Team(organization_id=org.id, name=_check_name(name, "name"))
            session.add(team)
            self._flush(session, f"{org.name} already has a team named {name!r}")
            return {"id": team.id, "organization_id": org.id, "name": team.name}

    def create_user(
        self,
        actor: Principal,
        organization: str | int,
        name: str,
        *,
        admin: bool = False,
        teams: Iterable[str | int] = (),
    ) -> dict[str, Any]:
        """Create a user (``admin`` manages the organisation) and put it in ``teams``."""
        with self._sessions.begin() as session:
            org = self._organization(session, organization)
            self._require_admin(actor, org.id)
            user = User(organization_id=org.id, name=_check_name(name, "name"), is_admin=admin)
            session.add(user)
            self._flush(session, f"{org.name} already has a user named {name!r}")
            team_ids = [self._team(session, org.id, team).id for team in teams]
            session.add_all(TeamMembership(team_id=team_id, user_id=user.id) for team_id in team_ids)
            return {
                "id": user.id,
                "organization_id": org.id,
                "name": user.name,
                "is_admin": admin,
                "teams": team_ids,
            }

    def add_member(self, actor: Principal, organization: str | int, team: str | int, user: str | int) -> None:
        """Put a user into a team of the same organisation (a no-op when it is already there)."""
        with self._sessions.begin() as session:
            org = self._organization(session, organization)
            self._require_admin(actor, org.id)
            team_row, user_row = self._team(session, org.id, team), self._user(session, org.id, user)
            if session.get(TeamMembership, (team_row.id, user_row.id)) is None:
                session.add(TeamMembership(team_id=team_row.id, user_id=user_row.id))

    def directory(self, actor: Principal, organization: str | int | None = None) -> dict[str, Any]:
        """The organisations the actor may see, with their teams and users (no tokens)."""
        with self._sessions() as session:
            query = select(Organization).order_by(Organization.id)
            if organization is not None:
                query = query.where(Organization.id == self._organization(session, organization).id)
            if not actor.is_operator:
                query = query.where(Organization.id == actor.organization_id)
            result = []
            for org in session.scalars(query):
                teams = list(
                    session.scalars(select(Team).where(Team.organization_id == org.id).order_by(Team.id))
                )
                users = list(
                    session.scalars(select(User).where(User.organization_id == org.id).order_by(User.id))
                )
                members = session.execute(
                    select(TeamMembership.team_id, TeamMembership.user_id).where(
                        TeamMembership.team_id.in_([t.id for t in teams])
                    )
                ).all()
                result.append(
                    {
                        "id": org.id,
                        "name": org.name,
                        "teams": [{"id": t.id, "name": t.name} for t in teams],
                        "users": [
                            {
                                "id": u.id,
                                "name": u.name,
                                "is_admin": u.is_admin,
                                "teams": sorted(team for team, member in members if member == u.id),
                            }
                            for u in users
                        ],
                    }
                )
            return {"organizations": result}

    # -- tokens ---------------------------------------------------------------------------------

    def create_token(
        self,
        actor: Principal,
        organization: str | int,
        user: str | int,
        *,
        name: str = "token",
        scopes: Iterable[str] = ("read",),
        expires_in_days: int | None = None,
    ) -> dict[str, Any]:
        """Create a token for a user; the returned ``token`` is shown this once and never stored."""
        granted = parse_scopes(scopes)
        if expires_in_days is not None and not 1 <= expires_in_days <= 3650:
            raise InvalidInputError("expires_in_days: use 1 to 3650 days")
        with self._sessions.begin() as session:
            org = self._organization(session, organization)
            self._require_admin(actor, org.id)
            owner = self._user(session, org.id, user)
            if Scope.ADMIN in granted and not owner.is_admin:
                raise InvalidInputError(
                    f"scopes: {owner.name} is not an administrator, so its tokens cannot have 'admin'"
                )
            token = TOKEN_PREFIX + secrets.token_urlsafe(32)
            row = ApiToken(
                user_id=owner.id,
                name=_check_name(name, "name"),
                token_hash=hash_token(token),
                prefix=token[:10],
                scopes=sorted(scope.value for scope in granted),
                expires_at=None if expires_in_days is None else utcnow() + timedelta(days=expires_in_days),
            )
            session.add(row)
            session.flush()
            return {**_token_info(row, owner), "token": token}

    def list_tokens(self, actor: Principal, organization: str | int | None = None) -> list[dict[str, Any]]:
        """The tokens of an organisation (never their secret), newest first."""
        with self._sessions() as session:
            org_id = (
                actor.organization_id
                if organization is None
                else self._organization(session, organization).id
            )
            self._require_admin(actor, org_id)
            rows = session.execute(
                select(ApiToken, User)
                .join(User, User.id == ApiToken.user_id)
                .where(User.organization_id == org_id)
                .order_by(ApiToken.id.desc())
            ).all()
            return [_token_info(token, user) for token, user in rows]

    def revoke_token(self, actor: Principal, token_id: int) -> dict[str, Any]:
        """Revoke a token; it stops working at once. Revoking twice is harmless."""
        with self._sessions.begin() as session:
            row = session.get(ApiToken, token_id)
            user = None if row is None else session.get(User, row.user_id)
            if (
                row is None
                or user is None
                or not (actor.is_operator or actor.organization_id == user.organization_id)
            ):
                raise NotFoundError(f"no token with id {token_id}")
            self._require_admin(actor, user.organization_id)
            if row.revoked_at is None:
                row.revoked_at = utcnow()
            return _token_info(row, user)

    # -- lookups --------------------------------------------------------------------------------

    @staticmethod
    def _require_admin(actor: Principal, organization_id: int) -> None:
        if actor.is_operator or (actor.is_admin and actor.organization_id == organization_id):
            return
        raise ForbiddenError(
            "managing people and tokens needs an administrator of this organisation",
            hint="use a token with the 'admin' scope of an administrator",
        )

    @staticmethod
    def _organization(session: Session, ref: str | int) -> Organization:
        number = _as_id(ref)
        query = select(Organization).where(
            Organization.id == number if number is not None else Organization.name == str(ref)
        )
        found = session.scalar(query)
        if found is None:
            raise NotFoundError(f"no organisation {ref!r}", hint="list them with `librarian admin list`")
        return found

    @staticmethod
    def _team(session: Session, organization_id: int, ref: str | int) -> Team:
        number = _as_id(ref)
        key = Team.id == number if number is not None else Team.name == str(ref)
        found = session.scalar(select(Team).where(Team.organization_id == organization_id, key))
        if found is None:
            raise NotFoundError(f"teams: no team {ref!r} in this organisation")
        return found

    @staticmethod
    def _user(session: Session, organization_id: int, ref: str | int) -> User:
        number = _as_id(ref)
        key = User.id == number if number is not None else User.name == str(ref)
        found = session.scalar(select(User).where(User.organization_id == organization_id, key))
        if found is None:
            raise NotFoundError(f"no user {ref!r} in this organisation")
        return found

    @staticmethod
    def _flush(session: Session, conflict: str) -> None:
        try:
            session.flush()
        except IntegrityError as exc:
            raise ConflictError(conflict) from exc

    def team_ids_of(self, organization_id: int, teams: Iterable[str | int]) -> tuple[int, ...]:
        """Team references resolved to ids of ``organization_id`` (a team of another one is refused)."""
        with self._sessions() as session:
            return tuple(sorted({self._team(session, organization_id, team).id for team in teams}))


def _as_id(ref: str | int) -> int | None:
    """``ref`` as a row id when it is one (a decimal within the 32-bit ids of the store), else None."""
    text = str(ref).strip()
    if not text.isdecimal() or len(text) > 10:
        return None
    number = int(text)
    return number if 0 < number <= 2_147_483_647 else None


def _token_info(row: ApiToken, user: User) -> dict[str, Any]:
    def stamp(moment: datetime | None) -> str | None:
        return None if moment is None else as_utc(moment).isoformat()

    return {
        "id": row.id,
        "name": row.name,
        "prefix": row.prefix,
        "user_id": user.id,
        "user": user.name,
        "organization_id": user.organization_id,
        "scopes": list(row.scopes),
        "created_at": stamp(row.created_at),
        "expires_at": stamp(row.expires_at),
        "last_used_at": stamp(row.last_used_at),
        "revoked_at": stamp(row.revoked_at),
    }
