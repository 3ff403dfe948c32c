"""/admin over REST: an organisation's administrator manages its teams, users and tokens; nobody else
does, and no organisation reaches another's people or tokens."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, dict[str, str]]]]:
    home: Path = tmp_path_factory.mktemp("rest-admin") / "home"
    with Librarian(Settings(home=home)) as lib:
        operator = lib.default_principal
        headers = {}
        for organization, name, admin in (
            ("acme", "root", True),
            ("acme", "alice", False),
            ("globex", "eve", True),
        ):
            if name != "alice":
                lib.identity.create_organization(operator, organization)
            lib.identity.create_user(operator, organization, name, admin=admin)
            scopes = ["admin"] if admin else ["write"]
            token = lib.identity.create_token(operator, organization, name, scopes=scopes)["token"]
            headers[name] = {"Authorization": f"Bearer {token}"}
        # The local organisation's own administrator (the server's organisation).
        token = lib.identity.create_token(operator, 1, 1, scopes=["admin"])["token"]
        headers["local"] = {"Authorization": f"Bearer {token}"}
        (home.parent / "doc.md").write_text("# Doc\n\nOne chunk.\n", encoding="utf-8")
        lib.ingest(str(home.parent / "doc.md"), sdk_name="doc", sdk_version="1")
        with TestClient(create_app(lib)) as client:
            yield client, headers


def test_an_administrator_manages_teams_users_and_tokens(
    api: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    client, headers = api
    root = headers["root"]

    team = client.post("/admin/teams", json={"name": "sre"}, headers=root)
    user = client.post("/admin/users", json={"name": "bob", "teams": ["sre"]}, headers=root)
    again = client.post("/admin/users", json={"name": "bob"}, headers=root)
    made = client.post("/admin/tokens", json={"user": "bob", "scopes": ["write"], "name": "ci"}, headers=root)
    assert (team.status_code, user.status_code, again.status_code, made.status_code) == (201, 201, 409, 201)
    secret = made.json()["token"]
    bob = {"Authorization": f"Bearer {secret}"}
    assert client.get("/workflows", headers=bob).status_code == 200  # the new token works at once

    directory = client.get("/admin/directory", headers=root).json()
    [acme] = directory["organizations"]
    assert {u["name"] for u in acme["users"]} >= {"root", "alice", "bob"}
    listed = client.get("/admin/tokens", headers=root).json()["tokens"]
    assert secret not in str(listed) and any(t["name"] == "ci" for t in listed)

    # Only an administrator user holds the admin scope; a writer manages nobody.
    refused_scope = client.post("/admin/tokens", json={"user": "bob", "scopes": ["admin"]}, headers=root)
    writer = client.post("/admin/users", json={"name": "mallory"}, headers=headers["alice"])
    assert refused_scope.status_code in (403, 422) and writer.status_code == 403

    # Another organisation neither sees nor revokes acme's tokens.
    token_id = next(t["id"] for t in listed if t["name"] == "ci")
    assert client.post(f"/admin/tokens/{token_id}/revoke", headers=headers["eve"]).status_code in (403, 404)
    assert "bob" not in str(client.get("/admin/directory", headers=headers["eve"]).json())
    revoked = client.post(f"/admin/tokens/{token_id}/revoke", headers=root)
    assert revoked.status_code == 200 and client.get("/workflows", headers=bob).status_code == 401


def test_the_stores_statistics_are_for_the_servers_own_administrators(
    api: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    client, headers = api
    stats = client.get("/admin/stats", headers=headers["local"])
    assert stats.status_code == 200
    body = stats.json()
    assert body["chunks"] >= 1 and body["documents"] >= 1 and body["vector_index"]["dimension"] == 384
    assert "password" not in body["database_url"]
    # Every organisation's counts: not for another organisation's administrator, nor a writer.
    for name in ("root", "eve", "alice"):
        refused = client.get("/admin/stats", headers=headers[name])
        assert refused.status_code == 403 and refused.json()["error"], name
    assert client.get("/admin/stats").status_code == 401


def test_the_servers_own_administrator_rebuilds_the_index_in_the_background(
    api: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    client, headers = api
    local = headers["local"]
    before = client.get("/admin/stats", headers=local).json()["vector_index"]["collection"]
    for name in ("root", "alice"):  # another organisation's administrator, a writer
        assert client.post("/admin/reindex", headers=headers[name]).status_code == 403
    started = client.post("/admin/reindex", headers=local)
    assert started.status_code == 202
    job_id = started.json()["job_id"]
    deadline = time.monotonic() + 120
    job = client.get(f"/jobs/{job_id}", headers=local).json()
    while job["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        job = client.get(f"/jobs/{job_id}", headers=local).json()
    assert job["status"] == "succeeded", job
    after = client.get("/admin/stats", headers=local).json()["vector_index"]["collection"]
    assert job["result"]["collection"] == after != before and job["result"]["chunks"] >= 1
    # Searches read the new index.
    found = client.post("/knowledge/query", json={"query": "one chunk"}, headers=local)
    assert found.status_code == 200, found.text
    assert found.json()["results"]
