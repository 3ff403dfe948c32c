"""Organisations, teams, users and tokens: shown once, stored hashed, scoped, revocable, expiring."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text, update

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    UnauthorizedError,
)
from librarian.knowledge.access import Scope
from librarian.knowledge.identity import hash_token
from librarian.knowledge.models import ApiToken
from librarian.storage.models import utcnow
from tests.cli.test_cli import run


@pytest.fixture
def lib(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Librarian:
    library = Librarian(Settings(home=tmp_path / "home"), embedder=embedder)
    operator = library.default_principal
    library.identity.create_organization(operator, "acme")
    library.identity.create_organization(operator, "globex")
    library.identity.create_team(operator, "acme", "sre")
    library.identity.create_user(operator, "acme", "alice", teams=["sre"])
    library.identity.create_user(operator, "acme", "root", admin=True)
    library.identity.create_user(operator, "globex", "gadmin", admin=True)
    return library


def test_a_token_is_shown_once_and_only_its_hash_is_stored(lib: Librarian) -> None:
    created = lib.identity.create_token(lib.default_principal, "acme", "alice", scopes=["read"])
    token = created["token"]

    with lib.engine.connect() as connection:
        dump = "\n".join(str(row) for row in connection.execute(text("SELECT * FROM api_tokens")))
    assert token.startswith("lib_") and len(token) > 40
    assert token not in dump and hash_token(token) in dump
    assert all("token" not in listed for listed in lib.identity.list_tokens(lib.default_principal, "acme"))
    principal = lib.identity.authenticate(token)
    assert (principal.user_name, principal.scopes) == ("alice", frozenset({Scope.READ}))
    assert principal.team_ids  # alice is in sre


def test_revoked_and_expired_tokens_stop_working(lib: Librarian) -> None:
    revoked = lib.identity.create_token(lib.default_principal, "acme", "alice")
    expiring = lib.identity.create_token(lib.default_principal, "acme", "alice", expires_in_days=1)
    lib.identity.revoke_token(lib.default_principal, revoked["id"])
    with lib.sessions.begin() as session:
        session.execute(
            update(ApiToken)
            .where(ApiToken.id == expiring["id"])
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )

    with pytest.raises(UnauthorizedError, match="not valid"):
        lib.identity.authenticate(revoked["token"])
    with pytest.raises(UnauthorizedError, match="expired"):
        lib.identity.authenticate(expiring["token"])


def test_administrators_manage_their_own_organisation_only(lib: Librarian) -> None:
    root = lib.identity.principal_of("acme", "root")
    alice = lib.identity.principal_of("acme", "alice")
    gadmin = lib.identity.principal_of("globex", "gadmin")

    lib.identity.create_team(root, "acme", "platform")
    with pytest.raises(ForbiddenError):
        lib.identity.create_team(gadmin, "acme", "intruders")
    with pytest.raises(ForbiddenError):
        lib.identity.create_user(alice, "acme", "eve")
    with pytest.raises(ForbiddenError, match="operator"):
        lib.identity.create_organization(root, "initech")
    with pytest.raises(InvalidInputError, match="not an administrator"):
        lib.identity.create_token(root, "acme", "alice", scopes=["admin"])
    with pytest.raises(NotFoundError):  # another organisation's token is not even found
        token = lib.identity.create_token(root, "acme", "alice")
        lib.identity.revoke_token(gadmin, token["id"])
    with pytest.raises(ConflictError):
        lib.identity.create_user(root, "acme", "alice")
    with pytest.raises(InvalidInputError, match="scope"):
        lib.identity.create_token(root, "acme", "alice", scopes=["superuser"])
    assert [o["name"] for o in lib.identity.directory(root)["organizations"]] == ["acme"]


def test_rest_requires_a_token_once_one_exists_and_enforces_scopes(lib: Librarian) -> None:
    with TestClient(create_app(lib)) as client:
        assert client.get("/sdks").status_code == 200  # no token anywhere: the local organisation
        reader = lib.identity.create_token(lib.default_principal, "acme", "alice", scopes=["read"])["token"]
        writer = lib.identity.create_token(lib.default_principal, "acme", "alice", scopes=["write"])["token"]
        document = {"title": "Runbook", "content": "Restart it.", "document_type": "runbook"}

        assert client.get("/sdks").status_code == 401
        read_only = client.post(
            "/knowledge/documents", json=document, headers={"Authorization": f"Bearer {reader}"}
        )
        created = client.post(
            "/knowledge/documents", json=document, headers={"Authorization": f"Bearer {writer}"}
        )
        feedback = {"sdk_name": "acme", "error_text": "unknown option --x", "source_url": "file:///x.md"}
        no_feedback = client.post("/feedback", json=feedback, headers={"Authorization": f"Bearer {reader}"})

    assert read_only.status_code == 403 and "'write' scope" in read_only.json()["message"]
    assert no_feedback.status_code == 403
    assert (
        created.status_code == 201
        and created.json()["created_by"] == lib.identity.principal_of("acme", "alice").user_id
    )


def test_admin_commands_create_people_and_tokens(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run(home, "admin", "create-org", "acme")
    run(home, "admin", "create-team", "sre", "--org", "acme")
    user = json.loads(
        run(home, "admin", "create-user", "alice", "--org", "acme", "--team", "sre", "--json").stdout
    )
    created = json.loads(
        run(home, "admin", "token", "create", "alice", "--org", "acme", "--scope", "write", "--json").stdout
    )
    listed = json.loads(run(home, "admin", "token", "list", "--org", "acme", "--json").stdout)
    added = json.loads(
        run(
            home, "--token", created["token"], "knowledge", "add", "--title", "Pager duty",
            "--content", "Who is on call: see the rota.", "--type", "wiki", "--json",
        ).stdout
    )  # fmt: skip
    run(home, "admin", "token", "revoke", str(created["id"]))
    refused = run(home, "--token", created["token"], "knowledge", "list", check=1)
    directory = json.loads(run(home, "admin", "list", "--json").stdout)

    assert user["teams"] and listed[0]["prefix"] == created["token"][:10] and "token" not in listed[0]
    assert added["created_by"] == user["id"] and added["visibility"] == "organization"
    assert "not valid" in refused.stderr
    assert [o["name"] for o in directory["organizations"]] == ["local", "acme"]


def test_a_token_user_refreshes_only_its_own_sources(lib: Librarian, tmp_path: Path) -> None:
    from librarian.refresh import all_sources

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nText.\n")
    assert lib.ingest(str(folder), sdk_name="mine", sdk_version="1").status == "ok"  # the operator's
    lib.default_principal = lib.identity.principal_of("acme", "alice")

    assert all_sources(lib) == []
    lib.ingest(str(folder), sdk_name="alices", sdk_version="1")  # owned by alice: organisation-wide
    assert [s.sdk_name for s in all_sources(lib)] == ["alices"]
