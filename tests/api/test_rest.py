"""The REST API in-process, over a real store and the real model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder

DOCS = {
    "upload.md": (
        "# Uploading files\n\n"
        "Use `acme upload --bucket NAME --tag KEY=VALUE FILE` to upload a file to a bucket.\n"
        "The `--tag` option may be repeated to attach several tags.\n"
    ),
    "queues.md": (
        "# Sending messages\n\nUse `acme send --queue URL --body TEXT` to deliver a message to a queue.\n"
    ),
}


def write_docs(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    root = tmp_path_factory.mktemp("rest")
    with Librarian(Settings(home=root / "home"), embedder=embedder) as library:
        report = library.ingest(str(write_docs(root / "docs", DOCS)), sdk_name="acme", sdk_version="1.0")
        assert report.status == "ok", report
        yield library


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("allowed")


@pytest.fixture(scope="module")
def client(lib: Librarian, allowed: Path) -> Iterator[TestClient]:
    with TestClient(create_app(lib, allowed_roots=[allowed])) as test_client:
        yield test_client


def wait_for_job(client: TestClient, job_id: str, deadline_seconds: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + deadline_seconds
    while True:
        job: dict[str, Any] = client.get(f"/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return job
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} still {job['status']} after {deadline_seconds} s")
        time.sleep(0.05)  # polling interval of a deadline-bounded wait, not a fixed sleep


def test_health(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}


def test_research_answers_from_the_requested_version(client: TestClient) -> None:
    response = client.post(
        "/research",
        json={"sdk_name": "acme", "query": "upload a file with tags", "error_text": "unknown option --tag"},
    )
    assert response.status_code == 200
    body = response.json()
    assert body["error"] is False
    assert body["resolved_version"] == "1.0"
    assert "upload" in body["snippets"][0]["content"]
    assert body["snippets"][0]["source_url"].endswith("upload.md")
    assert body["trimmed"] is None


def test_research_and_search_fit_a_budget(client: TestClient) -> None:
    asked = {"sdk_name": "acme", "query": "upload a file with tags"}
    full = client.post("/research", json=asked).json()["snippets"]
    body = client.post("/research", json={**asked, "max_tokens": 250}).json()
    assert body["snippets"] and len(json.dumps(body["snippets"], ensure_ascii=False)) <= 1000
    assert (body["trimmed"] is not None) == (len(json.dumps(full, ensure_ascii=False)) > 1000)
    found = client.post("/knowledge/query", json={"query": "upload", "top_k": 20, "max_chars": 1200}).json()
    assert len(found["results"]) >= 1 and found["trimmed"]["returned"] == len(found["results"])
    assert client.post("/knowledge/query", json={"query": "upload", "max_chars": 10}).status_code == 422
    assert client.post("/knowledge/query", json={"query": "upload", "top_k": 101}).status_code == 422


def test_feedback_is_stored_scrubbed_and_ranks_the_snippet_for_similar_errors(client: TestClient) -> None:
    asked = {"sdk_name": "acme", "query": "upload a file with tags", "error_text": "unknown option --tag"}
    before = client.post("/research", json=asked).json()["snippets"]
    chosen = before[-1]
    response = client.post(
        "/feedback",
        json={
            "sdk_name": "acme",
            "error_text": "unknown option --tag (token=abcd1234efgh5678ijkl9012mnop3456)",
            "source_url": chosen["source_url"],
            "entity_name": chosen["entity_name"],
            "command": "acme upload --password hunter2 report.csv",
        },
    )
    assert response.status_code == 201, response.text
    stored = response.json()
    assert "hunter2" not in stored["command"] and "abcd1234" not in stored["error_text"]
    after = client.post("/research", json=asked).json()["snippets"]
    moved = next(s for s in after if s["source_url"] == chosen["source_url"])
    assert moved["feedback"]["helpful"] == 1 and moved["score"] > chosen["score"]
    assert client.post("/feedback", json={**stored, "source_url": ""}).status_code == 422


def test_research_on_an_unknown_sdk_suggests_what_to_do(client: TestClient) -> None:
    body = client.post("/research", json={"sdk_name": "acmee", "query": "upload a file"}).json()
    assert body["error"] is True
    assert body["snippets"] == []
    assert any("acme" in suggestion for suggestion in body["fallback_suggestions"])


def test_research_with_an_empty_query_is_a_validation_error(client: TestClient) -> None:
    response = client.post("/research", json={"sdk_name": "acme", "query": ""})
    assert response.status_code == 422


def test_librarian_errors_keep_their_status_and_message(client: TestClient) -> None:
    response = client.post("/research", json={"sdk_name": "acme", "query": "   "})
    assert response.status_code == 422
    assert response.json() == {
        "error": True,
        "category": "invalid_input",
        "message": "the research query is empty",
        "hint": None,
    }


def test_knowledge_query_filters_by_sdk_and_version(client: TestClient) -> None:
    body = client.post(
        "/knowledge/query",
        json={"query": "send a message to a queue", "sdk_name": "acme", "sdk_version": "1.0", "top_k": 3},
    ).json()
    assert 1 <= len(body["results"]) <= 3
    top = body["results"][0]
    assert top["source_url"].endswith("queues.md")
    assert (top["sdk_name"], top["sdk_version"]) == ("acme", "1.0")
    empty = client.post("/knowledge/query", json={"query": "queue", "sdk_version": "1.0"})
    assert empty.status_code == 422  # a version without an SDK


def test_knowledge_save_is_save_learning_and_makes_it_searchable(client: TestClient) -> None:
    response = client.post(
        "/knowledge/save",
        json={
            "title": "Deploy runbook: Friday!",
            "document_type": "runbook",
            "content": "Never deploy the billing service on a Friday afternoon.",
            "tags": ["deploy"],
        },
    )
    assert response.status_code == 201, response.text
    saved = response.json()
    assert saved["incident"] is None and saved["solution"] is None  # nothing to match on
    results = client.post(
        "/knowledge/query",
        json={"query": "when not to deploy billing", "document_type": "runbook", "tags": ["deploy"]},
    ).json()["results"]
    assert results and results[0]["source_url"] == f"/knowledge/{saved['document_id']}"


def test_knowledge_save_refuses_a_type_it_cannot_save(client: TestClient) -> None:
    response = client.post("/knowledge/save", json={"title": "t", "content": "text", "document_type": "wiki"})
    assert response.status_code == 422
    assert "document_type" in response.json()["message"]


def test_sdks_lists_names_versions_and_counts(client: TestClient) -> None:
    sdks = client.get("/sdks").json()
    assert [s["sdk_name"] for s in sdks] == ["acme"]
    assert "1.0" in sdks[0]["versions"]
    assert sdks[0]["chunks"] >= 2


def test_sources_refuses_local_paths_outside_the_allowed_roots(client: TestClient, tmp_path: Path) -> None:
    response = client.post("/sources", json={"uri": str(tmp_path)})
    assert response.status_code == 422
    assert "allowed roots" in response.json()["message"]
    escaped = client.post("/sources", json={"uri": "file:///etc"})
    assert escaped.status_code == 422


@pytest.mark.parametrize(
    "uri", ["http://127.0.0.1/team/repo.git", "https://10.1.2.3/repo.git", "https://[::1]:8443/repo.git"]
)
def test_sources_refuses_git_urls_on_private_addresses(client: TestClient, uri: str) -> None:
    # Literal addresses: nothing is resolved over a network and no request is sent.
    response = client.post("/sources", json={"uri": uri})

    assert response.status_code == 422
    assert "refus" in response.json()["message"] and uri.split("/")[2].split(":")[0].strip("[]") in str(
        response.json()
    )


def test_sources_refuses_every_local_path_by_default(lib: Librarian, allowed: Path) -> None:
    with TestClient(create_app(lib)) as default_client:
        response = default_client.post("/sources", json={"uri": str(allowed)})
    assert response.status_code == 422
    assert "none are configured" in response.json()["message"]


def test_sources_ingests_an_allowed_path_in_the_background(client: TestClient, allowed: Path) -> None:
    docs = write_docs(allowed / "widgets", {"widgets.md": "# Widgets\n\nUse `acme widget list` to list.\n"})
    response = client.post("/sources", json={"uri": str(docs), "sdk_name": "acme", "sdk_version": "2.0"})
    assert response.status_code == 202
    job = wait_for_job(client, response.json()["job_id"])
    assert job["status"] == "succeeded", job
    assert job["result"]["added"] == 1
    assert job["started_at"] and job["finished_at"]
    versions = client.get("/sdks").json()[0]["versions"]
    assert versions == ["2.0", "1.0"]


def test_a_failed_ingest_job_reports_its_error(client: TestClient, allowed: Path) -> None:
    response = client.post("/sources", json={"uri": str(allowed / "missing")})
    job = wait_for_job(client, response.json()["job_id"])
    assert job["status"] == "failed"
    assert job["error"]["category"] == "not_found"


def test_unknown_job_is_404(client: TestClient) -> None:
    response = client.get("/jobs/unknown")
    assert response.status_code == 404
    assert response.json()["category"] == "not_found"


def test_openapi_lists_every_path(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    assert set(document["paths"]) == {
        "/health",
        "/research",
        "/feedback",
        "/knowledge/query",
        "/knowledge/save",
        "/sdks",
        "/sources",
        "/sources/{selector}",
        "/pages",
        "/libraries",
        "/libraries/resolve",
        "/jobs",
        "/jobs/{job_id}",
        "/jobs/{job_id}/cancel",
        "/jobs/{job_id}/resume",
        "/sources/refresh",
        "/sources/{selector}/refresh",
        "/sources/{selector}/refresh-interval",
        "/knowledge/search",
        "/knowledge/documents",
        "/knowledge/documents/{document_id}",
        "/knowledge/documents/{document_id}/versions",
        "/knowledge/documents/{document_id}/restore",
        "/knowledge/documents/{document_id}/feedback",
        "/incidents",
        "/incidents/{incident_id}",
        "/incidents/import",
        "/incidents/similar",
        "/incidents/{incident_id}/feedback",
        "/solutions/query",
        "/solutions/{solution_id}/outcomes",
        "/runbooks",
        "/runbooks/find",
        "/runbooks/match",
        "/runbooks/validate",
        "/runbooks/{runbook_id}",
        "/runbooks/{runbook_id}/activate",
        "/runbooks/{runbook_id}/deactivate",
        "/runbooks/{runbook_id}/dry-run",
        "/runbooks/{runbook_id}/executions",
        "/runbooks/{runbook_id}/proposals",
        "/runbooks/{runbook_id}/stats",
        "/runbooks/{runbook_id}/versions",
        "/runbook-proposals/{proposal_id}/accept",
        "/runbook-proposals/{proposal_id}/reject",
        "/runbook-executions",
        "/runbook-executions/{execution_id}",
        "/runbook-executions/{execution_id}/answer",
        "/runbook-executions/{execution_id}/approve",
        "/runbook-executions/{execution_id}/cancel",
        "/runbook-executions/{execution_id}/close",
        "/runbook-executions/{execution_id}/resume",
        "/runbook-executions/{execution_id}/step",
        "/workflows",
        "/workflows/plan",
        "/workflows/{workflow_id}",
        "/workflows/{workflow_id}/events",
        "/workflows/{workflow_id}/follow",
        "/workflows/{workflow_id}/answer",
        "/workflows/{workflow_id}/cancel",
        "/workflows/{workflow_id}/resume",
        "/verified-fixes",
        "/verified-fixes/{fix_id}",
        "/verified-fixes/{fix_id}/retire",
        "/strategy-stats",
        "/admin/directory",
        "/admin/stats",
        "/admin/reindex",
        "/eval",
        "/admin/teams",
        "/admin/users",
        "/admin/teams/{team}/members",
        "/admin/tokens",
        "/admin/tokens/{token_id}/revoke",
        "/verbs",
        "/verbs/discover",
        "/verbs/register",
        "/verbs/{verb}",
        "/tools",
        "/tools/search",
        "/tools/stats",
        "/tools/{tool_id}",
        "/tools/{tool_id}/activate",
        "/tools/{tool_id}/approve",
        "/tools/{tool_id}/call",
        "/tools/{tool_id}/deactivate",
        "/tools/{tool_id}/uses",
        "/tool-sources",
        "/tool-sources/{name}",
        "/tool-sources/{name}/sync",
    }
    assert document["paths"]["/sources"]["post"]["description"]
    assert "ResearchRequest" in document["components"]["schemas"]
