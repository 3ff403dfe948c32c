"""The /knowledge routes: documents with versions over REST, conflicts, validation and feedback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[TestClient]:
    home = tmp_path_factory.mktemp("rest-knowledge") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as lib, TestClient(create_app(lib)) as test_client:
        yield test_client


def test_a_document_round_trip_with_versions_and_a_conflict(client: TestClient) -> None:
    created = client.post(
        "/knowledge/documents",
        json={
            "title": "Certificate expiry",
            "content": "Renew the certificate with `certbot renew` and reload nginx.",
            "document_type": "runbook",
            "category": "networking",
            "tags": ["tls"],
        },
    )
    assert created.status_code == 201
    doc = created.json()
    edited = client.patch(
        f"/knowledge/documents/{doc['id']}", json={"base_version": 1, "tags": ["tls", "nginx"]}
    )
    stale = client.patch(f"/knowledge/documents/{doc['id']}", json={"base_version": 1, "title": "Stale"})
    versions = client.get(f"/knowledge/documents/{doc['id']}/versions").json()["versions"]
    first = client.get(f"/knowledge/documents/{doc['id']}", params={"version": 1}).json()
    found = client.post(
        "/knowledge/search",
        json={"query": "renew certificate", "filters": {"document_type": ["runbook"], "tags": ["nginx"]}},
    ).json()["results"]
    feedback = client.post(
        f"/knowledge/documents/{doc['id']}/feedback", json={"feedback_type": "helpful", "rating": 5}
    )
    restored = client.post(
        f"/knowledge/documents/{doc['id']}/restore", json={"version": 1, "base_version": 2}
    )
    deleted = client.delete(f"/knowledge/documents/{doc['id']}", params={"base_version": 3})

    assert edited.status_code == 200 and edited.json()["tags"] == ["nginx", "tls"]
    assert stale.status_code == 409 and stale.json()["category"] == "conflict"
    assert [v["version"] for v in versions] == [2, 1] and first["tags"] == ["tls"]
    assert found[0]["id"] == doc["id"] and found[0]["url"] == f"/knowledge/{doc['id']}"
    assert feedback.status_code == 201 and feedback.json()["usefulness_score"] > 2.5
    assert restored.json()["version"] == 3 and restored.json()["tags"] == ["tls"]
    assert deleted.status_code == 200
    assert client.get(f"/knowledge/documents/{doc['id']}").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "filters": {"colour": "red"}}, "colour"),
        ({"query": "x", "filters": {"severity": ["apocalyptic"]}}, "severity"),
        ({"query": "x", "limit": 500}, "limit"),
        ({"query": ""}, "query"),
    ],
)
def test_bad_searches_name_the_field(client: TestClient, body: dict[str, object], field: str) -> None:
    response = client.post("/knowledge/search", json=body)
    assert response.status_code == 422
    assert field in response.json()["message"]


def test_bad_documents_name_the_field(client: TestClient) -> None:
    unknown_type = client.post(
        "/knowledge/documents", json={"title": "t", "content": "c", "document_type": "novel"}
    )
    extra = client.post("/knowledge/documents", json={"title": "t", "content": "c", "colour": "red"})
    no_version = client.patch("/knowledge/documents/1", json={"title": "t"})
    assert unknown_type.status_code == 422 and "document_type" in unknown_type.json()["message"]
    assert extra.status_code == 422 and "colour" in extra.json()["message"]
    assert no_version.status_code == 422 and "base_version" in no_version.json()["message"]


def test_pages_of_documents_follow_a_cursor(client: TestClient) -> None:
    for index in range(3):
        client.post("/knowledge/documents", json={"title": f"Page {index}", "content": "Paging works."})
    first = client.get("/knowledge/documents", params={"limit": 2}).json()
    second = client.get("/knowledge/documents", params={"limit": 2, "after": first["next_after"]}).json()
    ids = [d["id"] for d in first["documents"] + second["documents"]]
    assert len(ids) == len(set(ids)) >= 3 and ids == sorted(ids)
