"""Knowledge documents over MCP beyond search: list them, read a document's versions, restore one; and
the store as a whole: its statistics and a rebuild of its vector index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.mcp import create_mcp_server
from mcp import Client
from tests.mcp.test_mcp import structured
from tests.mcp.test_mcp_runbooks import error_text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    home: Path = tmp_path_factory.mktemp("mcp-documents") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as library:
        yield library


async def call(client: Client, name: str, **arguments: Any) -> Any:
    return structured(await client.call_tool(name, arguments))


@pytest.mark.anyio
async def test_an_agent_lists_documents_reads_their_versions_and_restores_one(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["restore_document"].annotations.read_only_hint is False  # type: ignore[union-attr]
        assert tools["list_document_versions"].annotations.read_only_hint is True  # type: ignore[union-attr]

        first = await call(client, "add_document", title="Deploys", content="Deploy with make ship.")
        second = await call(client, "add_document", title="Rollbacks", content="Roll back with make undo.")
        await call(client, "update_document", document_id=first["id"], base_version=1, content="Use ship.sh.")

        page = await call(client, "list_documents", limit=1)
        rest = await call(client, "list_documents", limit=1, after_id=page["next_after_id"])
        assert [d["id"] for d in page["documents"] + rest["documents"]] == [first["id"], second["id"]]

        versions = (await call(client, "list_document_versions", document_id=first["id"]))["versions"]
        assert [v["version"] for v in versions] == [2, 1]
        restored = await call(client, "restore_document", document_id=first["id"], version=1, base_version=2)
        current = await call(client, "get_document", document_id=first["id"])
        assert restored["version"] == current["version"] == 3 and "make ship" in current["content"]

        stale = await error_text(
            client, "restore_document", document_id=first["id"], version=1, base_version=2
        )
        missing = await error_text(
            client, "restore_document", document_id=first["id"], version=9, base_version=3
        )
        unknown = await error_text(client, "list_document_versions", document_id=10**9)
    assert "version 3, not 2" in stale
    assert "no version 9" in missing
    assert "Traceback" not in unknown and "10000000" in unknown


@pytest.mark.anyio
async def test_the_operator_reads_the_stores_statistics(lib: Librarian) -> None:
    # The in-memory session acts as the operator; who else may read them is tested over REST
    # (tests/api/test_rest_admin.py), through the same facade method.
    async with Client(create_mcp_server(lib)) as client:
        before = await call(client, "get_store_stats")
        await call(client, "add_document", title="Paging", content="Page the on-call engineer.")
        after = await call(client, "get_store_stats")
    assert after["documents"] == before["documents"] + 1 and after["chunks"] > before["chunks"]
    assert after["vector_index"]["dimension"] == 384


@pytest.mark.anyio
async def test_the_operator_rebuilds_the_vector_index(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        before = (await call(client, "get_store_stats"))["vector_index"]["collection"]
        job = await call(client, "start_reindex")
        done = await call(client, "get_job", job_id=job["id"], wait_seconds=60)
        after = (await call(client, "get_store_stats"))["vector_index"]["collection"]
    assert done["status"] == "succeeded" and done["result"]["collection"] == after != before
