"""/incidents and /solutions over REST: record, import, match, give verdicts, rank solutions."""

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
    home = tmp_path_factory.mktemp("rest-incidents") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as lib, TestClient(create_app(lib)) as test_client:
        yield test_client


def test_record_match_and_teach(client: TestClient) -> None:
    disk = client.post(
        "/incidents",
        json={
            "title": "Disk full on db-3",
            "severity": "critical",
            "problem_signature": {
                "symptoms": ["disk full", "writes failing"],
                "error_messages": ["could not extend file base/16384/2619: No space left on device"],
                "affected_services": ["orders"],
            },
            "solution_applied": "Archived WAL and grew the volume",
            "resolution_time_minutes": 40,
            "was_successful": True,
            "occurred_at": "2025-06-01T08:00:00Z",
        },
    )
    assert disk.status_code == 201, disk.text
    current = client.post(
        "/incidents",
        json={"title": "Writes failing on db-4", "problem_signature": {"symptoms": ["writes failing"]}},
    ).json()
    body = {
        "description": "database refuses writes",
        "error_messages": ["could not extend file base/99/7: No space left on device"],
        "incident_id": current["id"],
    }
    similar = client.post("/incidents/similar", json=body).json()["similar_incidents"]
    verdict = client.post(
        f"/incidents/{current['id']}/feedback", json={"other_id": disk.json()["id"], "similar": False}
    )
    after = client.post("/incidents/similar", json=body).json()["similar_incidents"]

    assert similar[0]["id"] == disk.json()["id"] and similar[0]["resolution_time_minutes"] == 40
    assert similar[0]["occurred_at"].startswith("2025-06-01")
    assert verdict.status_code == 201
    assert all(item["id"] != disk.json()["id"] for item in after)
    page = client.get("/incidents", params={"limit": 1}).json()
    assert len(page["incidents"]) == 1 and page["next_after"] == page["incidents"][0]["id"]


def test_import_reports_lines_and_solutions_rank(client: TestClient) -> None:
    imported = client.post(
        "/incidents/import",
        json={
            "files": [
                {
                    "filename": "history.csv",
                    "content": "title,severity\nQueue backlog,high\nBroken,whatever\n",
                },
                {"filename": "notes.txt", "content": "not an export"},
            ]
        },
    ).json()
    assert imported["imported"] == 1
    assert {(p["file"], p.get("line")) for p in imported["problems"]} == {
        ("history.csv", 3),
        ("notes.txt", None),
    }

    signature = {"error_messages": ["ECONNRESET while calling payments"], "affected_services": ["payments"]}
    saved = client.post(
        "/knowledge/save",
        json={
            "title": "Payments resets",
            "document_type": "solution",
            "content": "Keep-alive was too long.",
            "problem_signature": signature,
            "solution": "Lower the keep-alive to 5 s",
            "worked": True,
        },
    ).json()
    solution_id = saved["solution"]["id"]
    client.post(f"/solutions/{solution_id}/outcomes", json={"worked": False})
    ranked = client.post("/solutions/query", json={"problem_signature": signature}).json()["solutions"]
    assert ranked[0]["id"] == solution_id and (ranked[0]["successes"], ranked[0]["failures"]) == (1, 1)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/incidents", {"title": "t", "severity": "apocalyptic"}, "severity"),
        ("/incidents", {"title": "t", "problem_signature": {"symptoms": [1]}}, "symptoms"),
        ("/incidents", {"title": "t", "problem_signature": {"colour": "red"}}, "colour"),
        ("/incidents/similar", {"description": ""}, "description"),
        ("/solutions/query", {"problem_signature": {}}, "problem_signature"),
        ("/incidents/1/feedback", {"other_id": 1, "similar": True}, "other_id"),
    ],
)
def test_bad_input_names_the_field(
    client: TestClient, path: str, body: dict[str, object], field: str
) -> None:
    if path == "/incidents/1/feedback":
        client.post("/incidents", json={"title": "exists"})
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert field in response.json()["message"]
