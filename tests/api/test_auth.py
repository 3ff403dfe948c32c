"""Bearer-token authentication of REST and MCP over HTTP, and refresh jobs started over REST."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr

from librarian.api import create_app
from librarian.api.auth import is_loopback_host, serve_warning
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from tests.mcp.test_mcp import serve_with_mcp

TOKEN = "correct-horse-battery-staple"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("auth") / "docs"
    folder.mkdir()
    (folder / "upload.md").write_text("# Uploading\n\nUse `acme upload FILE` to upload a file.\n")
    (folder / "queues.md").write_text("# Queues\n\nUse `acme send --queue URL` to send a message.\n")
    return folder


@pytest.fixture(scope="module")
def lib(docs: Path, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    """A store with ``acme 1.0`` indexed, served with an API token."""
    settings = Settings(home=docs.parent / "home", api_token=SecretStr(TOKEN))
    with Librarian(settings, embedder=embedder) as library:
        assert library.ingest(str(docs), sdk_name="acme", sdk_version="1.0").status == "ok"
        yield library


@pytest.fixture(scope="module")
def client(lib: Librarian) -> Iterator[TestClient]:
    with TestClient(create_app(lib)) as test_client:
        yield test_client


def test_requests_without_a_token_are_refused(client: TestClient) -> None:
    response = client.get("/sdks")

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="librarian"'
    assert response.json()["category"] == "unauthorized"
    assert client.post("/research", json={"sdk_name": "acme", "query": "upload"}).status_code == 401


@pytest.mark.parametrize(
    "header", [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer ", f"Basic {TOKEN}", TOKEN]
)
def test_a_wrong_token_or_scheme_is_refused(client: TestClient, header: str) -> None:
    response = client.get("/sdks", headers={"Authorization": header})

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer realm="librarian"')


def test_a_wrong_token_is_named_invalid(client: TestClient) -> None:
    response = client.get("/sdks", headers={"Authorization": "Bearer nope"})
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert response.json()["message"] == "the bearer token is not valid"


def test_the_right_token_is_accepted(client: TestClient) -> None:
    response = client.get("/sdks", headers={"Authorization": f"bearer {TOKEN}"})  # scheme is case-blind

    assert response.status_code == 200
    assert response.json()[0]["sdk_name"] == "acme"


def test_health_and_the_docs_stay_open(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/docs").status_code == 200
    assert client.get("/openapi.json").status_code == 200


def test_the_docs_pages_load_their_assets_from_the_server_not_a_cdn(client: TestClient) -> None:
    for page, assets in (
        ("/docs", ["/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css"]),
        ("/redoc", ["/docs-assets/redoc.standalone.js"]),
    ):
        html = client.get(page).text
        assert not re.search(r"https?://", html.replace("http://www.w3.org", "")), page
        for asset in assets:
            assert f'"{asset}"' in html
            served = client.get(asset)  # no token: the assets are public files of the package
            assert served.status_code == 200 and len(served.content) > 100_000, asset
    assert client.get("/docs-assets/../sources").status_code == 401  # never a way past the token
    assert client.get("/docs-assets/nothing.js").status_code == 404


def test_the_openapi_document_declares_the_scheme_and_stays_valid(client: TestClient) -> None:
    document: dict[str, Any] = client.get("/openapi.json").json()

    scheme = document["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    for path, item in document["paths"].items():
        for operation in item.values():
            # `{}`: optional while no token is configured (the server cannot know that statically).
            secured = operation.get("security") == [{"bearerAuth": []}, {}]
            assert secured == (path != "/health"), path
            assert ("401" in operation["responses"]) == (path != "/health"), path
    assert "/sources/{selector}/refresh" in document["paths"]
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(document)


def test_without_a_token_setting_nothing_is_required(tmp_path: Path) -> None:
    with Librarian(Settings(home=tmp_path / "home")) as open_lib, TestClient(create_app(open_lib)) as plain:
        assert plain.get("/sdks").status_code == 200
        # The scheme is declared, but optional: requests act as the local organisation.
        sdks = plain.get("/openapi.json").json()["paths"]["/sdks"]["get"]
        assert {} in sdks["security"]


# -- refresh over REST ----------------------------------------------------------------------------


def wait_for_job(client: TestClient, job_id: str, deadline_seconds: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + deadline_seconds
    while True:
        job: dict[str, Any] = client.get(f"/jobs/{job_id}", headers=AUTH).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job['status']} after {deadline_seconds} s"
        time.sleep(0.05)  # polling interval of a deadline-bounded wait


def test_a_refresh_job_re_ingests_only_what_changed(client: TestClient, docs: Path) -> None:
    (docs / "queues.md").write_text("# Queues\n\nUse `acme send --fifo` for ordered delivery.\n")

    refused = client.post("/sources/acme/refresh")
    response = client.post(f"/sources/{quote(str(docs), safe='')}/refresh", headers=AUTH)

    assert refused.status_code == 401
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["job_id"])
    assert job["status"] == "succeeded", job
    (outcome,) = job["result"]["outcomes"]
    assert outcome["status"] == "ok" and outcome["uri"] == str(docs.resolve())
    assert (outcome["report"]["updated"], outcome["report"]["unchanged"]) == (1, 1)


def test_refreshing_an_unknown_source_is_404_at_once(client: TestClient) -> None:
    response = client.post("/sources/gcloud/refresh", headers=AUTH)

    assert response.status_code == 404
    assert "no source matches 'gcloud'" in response.json()["message"]


# -- MCP over streamable HTTP -------------------------------------------------------------------------


@pytest.fixture
def mcp_url(lib: Librarian) -> Iterator[str]:
    """The REST app with MCP mounted at ``/mcp`` and a token set, served by uvicorn in a thread."""
    yield from serve_with_mcp(lib)


def test_the_mcp_mount_refuses_requests_without_the_token(mcp_url: str) -> None:
    missing = httpx.post(mcp_url, json=INITIALIZE, headers=MCP_HEADERS)
    wrong = httpx.post(mcp_url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer nope"})
    right = httpx.post(mcp_url, json=INITIALIZE, headers={**MCP_HEADERS, **AUTH})

    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert missing.headers["www-authenticate"] == 'Bearer realm="librarian"'


@pytest.mark.anyio
async def test_an_mcp_client_without_the_token_is_told_how_to_get_one(mcp_url: str) -> None:
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(mcp_url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        with pytest.raises(MCPError) as refused:
            await session.initialize()
    message = str(refused.value)
    assert "a bearer token is required" in message and "librarian admin token create" in message
    assert "Server returned an error response" not in message


@pytest.mark.anyio
async def test_an_mcp_client_with_the_token_works(mcp_url: str) -> None:
    async with (
        httpx2.AsyncClient(headers=AUTH, timeout=30) as http,
        streamable_http_client(mcp_url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        listed = await session.call_tool("list_sdks", {})

    assert {"research_api_usage", "search_knowledge", "list_sdks"} <= tools
    assert not listed.is_error and "acme" in str(listed.structured_content or listed.content)


# -- the serve warning --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_serving_beyond_loopback_without_a_token_warns(tmp_path: Path) -> None:
    open_settings = Settings(home=tmp_path)
    warning = serve_warning("0.0.0.0", open_settings)

    assert warning is not None and "LIBRARIAN_API_TOKEN" in warning and "0.0.0.0" in warning
    assert serve_warning("127.0.0.1", open_settings) is None
    assert serve_warning("0.0.0.0", Settings(home=tmp_path, api_token=SecretStr(TOKEN))) is None
    assert serve_warning("0.0.0.0", Settings(home=tmp_path, api_token=SecretStr("  "))) is not None
