"""The catalog through its interfaces: REST (/sources, /pages, /libraries), MCP (resolve_library,
read_page, list_sources, delete_source, library:// resources) and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.mcp import create_mcp_server
from mcp import Client
from tests.catalog.test_catalog import write_docs
from tests.mcp.test_mcp import structured


@pytest.fixture
def lib(settings: Settings, embedder: LocalMiniLMEmbedder, tmp_path: Path) -> Iterator[Librarian]:
    with Librarian(settings, embedder=embedder) as library:
        for version in ("1.0", "2.0"):
            library.ingest(
                str(write_docs(tmp_path / "docs", version)), sdk_name="aws-cli", sdk_version=version
            )
        yield library


def test_rest_lists_reads_resolves_and_deletes(lib: Librarian) -> None:
    client = TestClient(create_app(lib))
    first = client.get("/sources", params={"limit": 1}).json()
    assert len(first["sources"]) == 1 and first["next_after"] == first["sources"][0]["id"]
    second = client.get("/sources", params={"after": first["next_after"]}).json()
    assert [s["sdk_version"] for s in second["sources"]] == ["2.0"] and second["next_after"] is None

    [candidate] = client.get("/libraries/resolve", params={"name": "awscli"}).json()["candidates"]
    assert candidate["library_id"] == "aws-cli" and [v["version"] for v in candidate["versions"]] == [
        "2.0",
        "1.0",
    ]
    assert client.get("/libraries").json()["libraries"][0]["versions"] == ["2.0", "1.0"]

    url = lib.search("create a queue", top_k=1)[0].source_url
    page = client.get("/pages", params={"url": url, "sdk_version": "1.0"})
    assert page.status_code == 200 and page.json()["content"].startswith("# create-queue")
    assert client.get("/pages", params={"url": "cli://nothing"}).status_code == 404
    assert client.get("/pages").status_code == 422  # neither url nor document_id
    assert client.get("/pages", params={"url": url, "max_chars": 10}).status_code == 422

    refused = client.delete("/sources/aws-cli")
    assert refused.status_code == 422 and "names 2 sources" in refused.json()["message"]
    deleted = client.delete("/sources/aws-cli", params={"all": "true"}).json()["deleted"]
    assert {row["sdk_version"] for row in deleted} == {"1.0", "2.0"}
    assert client.get("/sources").json()["sources"] == []
    assert client.delete("/sources/aws-cli").status_code == 404
    unknown = client.post("/query", json={"query": "queue", "sdk_name": "aws-clj"})
    assert unknown.status_code == 404


@pytest.mark.anyio
async def test_mcp_tools_and_library_resources(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        for name in ("resolve_library", "read_page", "list_sources"):
            annotations = tools[name].annotations
            assert annotations is not None and annotations.read_only_hint is True
            assert tools[name].title
        deleting = tools["delete_source"].annotations
        assert deleting is not None and deleting.destructive_hint is True and deleting.idempotent_hint is True

        resolved = structured(await client.call_tool("resolve_library", {"name": "aws"}))
        assert resolved["candidates"][0]["library_id"] == "aws-cli"
        url = lib.search("create a queue", top_k=1)[0].source_url
        page = structured(await client.call_tool("read_page", {"url": url}))
        assert page["sdk_version"] == "2.0" and page["other_versions"] == ["1.0"]
        listed = structured(await client.call_tool("list_sources", {"limit": 5}))
        assert len(listed["sources"]) == 2 and listed["next_after"] is None

        templates = (await client.list_resource_templates()).resource_templates
        assert "library://{name}" in {template.uri_template for template in templates}
        one = await client.read_resource("library://aws")
        assert json.loads(one.contents[0].text)["library_id"] == "aws-cli"  # type: ignore[union-attr]

        refused = await client.call_tool("delete_source", {"source": "aws-cli"})
        assert refused.is_error
        gone = structured(await client.call_tool("delete_source", {"source": "aws-cli", "every_match": True}))
        assert len(gone["deleted"]) == 2
