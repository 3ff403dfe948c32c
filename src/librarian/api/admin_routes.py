"""REST routes of identity administration (``lib.identity``), the twins of ``librarian admin``, and
the store's statistics and index rebuild (``librarian stats``, ``librarian reindex``).

An organisation's administrators manage its own teams, users and tokens; the identity service checks
that on every call. Creating an organisation stays with the server's operator (``librarian admin
create-org`` on the server): no token acts as the operator.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Request, status
from pydantic import BaseModel, Field

from librarian.api.knowledge_routes import MAX_ID, caller
from librarian.app import Librarian

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": dict[str, Any]} for code in (401, 403, 404, 409, 422)
}
NAME = Field(min_length=1, max_length=255)


class NewTeam(BaseModel):
    """A team of the caller's organisation."""

    name: str = NAME


class NewUser(BaseModel):
    """A user of the caller's organisation."""

    name: str = NAME
    admin: bool = Field(default=False, description="Manages the organisation's people and documents.")
    teams: list[str] = Field(default_factory=list, max_length=100, description="Team names or ids.")


class NewMember(BaseModel):
    """A user (name or id) to add to a team."""

    user: str = NAME


class NewToken(BaseModel):
    """A token for a user of the caller's organisation; the answer shows it this once."""

    user: str = NAME
    name: str = Field(default="token", min_length=1, max_length=255)
    scopes: list[str] = Field(default_factory=lambda: ["read"], min_length=1, max_length=3)
    expires_in_days: int | None = Field(default=None, ge=1, le=3650)


def admin_router(lib: Librarian) -> APIRouter:
    """``/admin/...``: the directory, teams, users, members and tokens of the caller's organisation, and
    the store's statistics and index rebuild."""
    router = APIRouter(prefix="/admin", tags=["administration"], responses=_ERRORS)
    identity = lib.identity

    @router.get("/stats")
    def stats(request: Request) -> dict[str, Any]:
        """The store's counts (sources, documents, chunks) and the vector index's state, as `librarian
        stats` prints them. They cover every organisation, so only the server's own organisation's
        administrators may read them (403 for anyone else)."""
        return lib.stats(caller(request))

    @router.post("/reindex", status_code=status.HTTP_202_ACCEPTED)
    def reindex(request: Request) -> dict[str, str]:
        """Rebuild the vector index from the store in the background (`librarian reindex`), e.g. after
        changing the embedding model; poll ``GET /jobs/{job_id}``. Searches use the current index until
        the new one is complete. The server's own organisation's administrators only (403); 409 while
        a rebuild is queued or running."""
        return {"job_id": lib.jobs.submit_reindex(caller(request))["id"]}

    @router.get("/directory")
    def directory(request: Request) -> dict[str, Any]:
        """The caller's organisation with its teams and users (never tokens)."""
        return identity.directory(caller(request))

    @router.post("/teams", status_code=status.HTTP_201_CREATED)
    def create_team(body: NewTeam, request: Request) -> dict[str, Any]:
        """Create a team (an administrator of the organisation). 409 when the name is taken."""
        principal = caller(request)
        return identity.create_team(principal, principal.organization_id, body.name)

    @router.post("/users", status_code=status.HTTP_201_CREATED)
    def create_user(body: NewUser, request: Request) -> dict[str, Any]:
        """Create a user, optionally an administrator and in teams. 409 when the name is taken."""
        principal = caller(request)
        return identity.create_user(
            principal, principal.organization_id, body.name, admin=body.admin, teams=body.teams
        )

    @router.post("/teams/{team}/members", status_code=status.HTTP_204_NO_CONTENT)
    def add_member(body: NewMember, request: Request, team: str = Path(min_length=1, max_length=255)) -> None:
        """Put a user in a team (names or ids)."""
        principal = caller(request)
        identity.add_member(principal, principal.organization_id, _ref(team), _ref(body.user))

    @router.get("/tokens")
    def tokens(request: Request) -> dict[str, Any]:
        """The organisation's tokens: names, users, scopes, last use, expiry, revocation (never secrets)."""
        principal = caller(request)
        return {"tokens": identity.list_tokens(principal, principal.organization_id)}

    @router.post("/tokens", status_code=status.HTTP_201_CREATED)
    def create_token(body: NewToken, request: Request) -> dict[str, Any]:
        """Create a token; ``token`` in the answer is shown this once and stored only as a hash.
        Only an administrator user may hold the ``admin`` scope."""
        principal = caller(request)
        return identity.create_token(
            principal,
            principal.organization_id,
            _ref(body.user),
            name=body.name,
            scopes=body.scopes,
            expires_in_days=body.expires_in_days,
        )

    @router.post("/tokens/{token_id}/revoke")
    def revoke_token(request: Request, token_id: int = Path(ge=1, le=MAX_ID)) -> dict[str, Any]:
        """Revoke a token of the organisation at once."""
        return identity.revoke_token(caller(request), token_id)

    return router


def _ref(value: str) -> str | int:
    """A team or user given by id (digits) or by name."""
    return int(value) if value.isdigit() else value
