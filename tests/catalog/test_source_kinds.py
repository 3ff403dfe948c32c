"""Every kind of source from REST and MCP: a website, an OpenAPI document, a program's CLI help and an
installed package, each under its rules (public addresses, allowed roots, administrators for what runs
on the server), each indexed for real by its connector."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.catalog.policy import SourcePolicy
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.mcp import create_mcp_server
from mcp import Client
from tests.ingest.test_openapi import PETSTORE
from tests.mcp.test_mcp import structured


@dataclass
class Served:
    """The facade, the folder the server allows, and headers for dev (write) and admin (local admin)."""

    lib: Librarian
    root: Path
    headers: dict[str, dict[str, str]]

    def client(self) -> TestClient:
        return TestClient(create_app(self.lib, allowed_roots=[self.root]))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("source-kinds")
    (root / "petstore.yaml").write_text(PETSTORE, encoding="utf-8")
    with Librarian(Settings(home=root / "home"), embedder=embedder) as lib:
        operator = lib.default_principal
        lib.identity.create_organization(operator, "kinds")
        lib.identity.create_user(operator, "kinds", "dev")
        dev = lib.identity.create_token(operator, "kinds", "dev", scopes=["write"])["token"]
        admin = lib.identity.create_token(operator, 1, 1, scopes=["admin"])["token"]
        headers = {"dev": {"Authorization": f"Bearer {dev}"}, "admin": {"Authorization": f"Bearer {admin}"}}
        yield Served(lib, root, headers)


def submit(client: TestClient, body: dict[str, Any], headers: dict[str, str]) -> Any:
    return client.post("/sources", json=body, headers=headers)


def finished(lib: Librarian, job_id: str) -> dict[str, Any]:
    return lib.jobs.wait(lib.default_principal, job_id, timeout=240)


def test_each_kind_is_checked_before_a_job_exists(served: Served) -> None:
    client, dev, admin = served.client(), served.headers["dev"], served.headers["admin"]

    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"uri": "x", "kind": "ftp"}, 422, "kind"),
        (
            {"uri": "http://127.0.0.1:9/docs/", "kind": "website", "sdk_name": "a", "sdk_version": "1"},
            422,
            "127.0.0.1",
        ),
        ({"uri": "https://docs.example.org/", "kind": "website", "sdk_name": "a"}, 422, "sdk_version"),
        (
            {"uri": "file:///etc/passwd", "kind": "website", "sdk_name": "a", "sdk_version": "1"},
            422,
            "http(s)",
        ),
        ({"uri": "/etc/openapi.yaml", "kind": "openapi", "sdk_name": "a"}, 422, "allowed roots"),
        ({"uri": "http://10.0.0.8/openapi.json", "kind": "openapi", "sdk_name": "a"}, 422, "10.0.0.8"),
        ({"uri": "git", "kind": "cli"}, 422, "sdk_name"),
        ({"uri": "git", "kind": "cli", "sdk_name": "git"}, 403, "admin"),  # dev is no administrator
        ({"uri": "requests", "kind": "package", "sdk_name": "requests"}, 403, "admin"),
        # A walk's limits are the caller's to lower, never to raise past the server's.
        (
            {
                "uri": "https://docs.example.org/",
                "kind": "website",
                "sdk_name": "a",
                "sdk_version": "1",
                "max_pages": 100_000,
            },
            422,
            "max_pages: use 1 to 500",
        ),
        ({"uri": "x", "kind": "auto", "max_pages": 3}, 422, "does not apply"),
        ({"uri": "git", "kind": "openapi", "sdk_name": "g", "scope": "/x"}, 422, "only a website"),
    ]
    for body, status, words in cases:
        answer = submit(client, body, dev)
        assert answer.status_code == status, (body, answer.text)
        assert words in answer.json()["message"], (body, answer.json())
    # Even an administrator names a program, never a path or a command line.
    for name in ("/usr/bin/git", "git; id", "../git", "-rf"):
        answer = submit(client, {"uri": name, "kind": "cli", "sdk_name": "x"}, admin)
        assert answer.status_code == 422 and "not a program name" in answer.json()["message"], name


def test_an_openapi_document_a_programs_help_and_a_package_are_indexed(served: Served) -> None:
    lib, client, admin = served.lib, served.client(), served.headers["admin"]
    petstore = str(served.root / "petstore.yaml")
    jobs = {
        "openapi": submit(client, {"uri": petstore, "kind": "openapi", "sdk_name": "petstore"}, admin),
        "cli": submit(
            client,
            {"uri": "git", "kind": "cli", "sdk_name": "git", "scopes": ["branch"], "max_commands": 2},
            admin,
        ),
        "package": submit(client, {"uri": "simpleeval", "kind": "package", "sdk_name": "simpleeval"}, admin),
    }
    for kind, answer in jobs.items():
        assert answer.status_code == 202, (kind, answer.text)
        done = finished(lib, answer.json()["job_id"])
        assert done["status"] == "succeeded", (kind, done)
        assert done["request"]["kind"] == kind

    pets = lib.search("list all pets", sdk_name="petstore", top_k=3)
    branch = lib.search("set the upstream of a branch", sdk_name="git", top_k=3)
    evaluator = lib.search("evaluate an expression safely", sdk_name="simpleeval", top_k=3)
    assert pets and "listPets" in " ".join(hit.entity_name or "" for hit in pets) + pets[0].content
    assert branch and branch[0].source_url.startswith("cli://git")
    # The walk stopped at two help pages (git's own and branch's), as asked.
    walked = {hit.source_url for hit in lib.search("git", sdk_name="git", top_k=50)}
    assert walked <= {"cli://git/", "cli://git/branch"}, walked
    assert evaluator and evaluator[0].source_url.startswith("pypi://simpleeval")


@pytest.mark.anyio
async def test_an_agent_adds_a_programs_help_over_mcp(served: Served) -> None:
    async with Client(create_mcp_server(served.lib, SourcePolicy.of([served.root]))) as client:
        added = structured(
            await client.call_tool(
                "add_source",
                {
                    "uri": "git",
                    "kind": "cli",
                    "sdk_name": "git-mcp",
                    "scopes": ["switch"],
                    "wait_seconds": 120,
                },
            )
        )
        refused = await client.call_tool("add_source", {"uri": "git", "kind": "teleport"})
    assert added["status"] == "succeeded" and added["request"]["scopes"] == ["switch"]
    assert refused.is_error
