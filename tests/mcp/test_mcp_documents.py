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
from librarian.errors import NotFoundError
from librarian.mcp import create_mcp_server
from mcp import Client
from tests.mcp.test_mcp import structured
from tests.mcp.test_mcp_runbooks import error_text


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


@pytest.mark.anyio
async def test_a_documents_visibility_and_summary_change_over_mcp(lib: Librarian) -> None:
    lib.identity.create_user(lib.default_principal, 1, "colleague")
    colleague = lib.identity.principal_of(1, "colleague")
    async with Client(create_mcp_server(lib)) as client:
        added = await call(
            client,
            "add_document",
            title="Payroll keys",
            content="Rotate the payroll signing key.",
            description="How the payroll key is rotated",
            severity="high",
        )
        assert lib.knowledge.documents.get(colleague, added["id"])["title"] == "Payroll keys"
        hidden = await call(
            client, "update_document", document_id=added["id"], base_version=1, visibility="private"
        )
        bad = await error_text(
            client, "update_document", document_id=added["id"], base_version=2, severity="apocalyptic"
        )
    assert hidden["visibility"] == "private" and hidden["description"] == "How the payroll key is rotated"
    assert "severity" in bad
    with pytest.raises(NotFoundError):  # the colleague no longer reads it
        lib.knowledge.documents.get(colleague, added["id"])


@pytest.mark.anyio
async def test_search_documentation_filters_by_category_tags_and_date(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        await call(
            client, "add_document", title="Disk alerts", content="Page on disk full.", category="storage"
        )
        await call(
            client,
            "add_document",
            title="Disk quotas",
            content="Disk full quotas.",
            category="quota",
            tags=["ops"],
        )
        storage = (await call(client, "search_documentation", query="disk full", category="storage"))[
            "results"
        ]
        tagged = (await call(client, "search_documentation", query="disk full", tags=["ops"]))["results"]
        future = (await call(client, "search_documentation", query="disk full", since="2999-01-01"))[
            "results"
        ]
        recent = (await call(client, "search_documentation", query="disk full", since="2020-01-01"))[
            "results"
        ]
        bad = await error_text(client, "search_documentation", query="disk full", since="last tuesday")
    assert storage and {r["category"] for r in storage} == {"storage"}
    assert tagged and all("ops" in r["tags"] for r in tagged)
    assert future == [] and len(recent) >= 2
    assert "since" in bad and "not a date" in bad


@pytest.mark.anyio
async def test_research_feedback_keeps_the_version_and_question(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        stored = await call(
            client,
            "record_feedback",
            sdk_name="aws-cli",
            error_text="Unknown options: --tagging",
            source_url="cli://aws/s3api/put-object",
            entity_name="s3api put-object",
            sdk_version="1.45.11",
            query="upload with tags",
        )
    assert stored["sdk_version"] == "1.45.11" and stored["query"] == "upload with tags"
