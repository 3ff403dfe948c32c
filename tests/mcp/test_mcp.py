"""The MCP server through real client sessions: over stdio (a subprocess) and streamable HTTP."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.knowledge.documents import DocumentDraft
from librarian.mcp import create_mcp_server, mount_streamable_http
from mcp import Client

TOOLS = {
    "research_api_usage",
    "search_documentation",
    "list_sdks",
    "record_feedback",
    "search_knowledge",
    "get_document",
    "record_knowledge_feedback",
    "add_document",
    "update_document",
    "delete_document",
    "list_documents",
    "list_document_versions",
    "restore_document",
    "find_similar_incidents",
    "get_solution",
    "save_learning",
    "mark_incident_similarity",
    "record_solution_outcome",
    "record_incident",
    "import_incidents",
    "list_incidents",
    "get_incident",
    "get_runbook",
    "list_runbooks",
    "add_runbook",
    "start_runbook_execution",
    "execute_runbook_step",
    "answer_runbook_step",
    "approve_runbook_step",
    "get_runbook_execution",
    "update_runbook",
    "validate_runbook",
    "dry_run_runbook",
    "set_runbook_active",
    "list_runbook_versions",
    "list_runbook_proposals",
    "decide_runbook_proposal",
    "list_runbook_executions",
    "cancel_runbook_execution",
    "resume_runbook_execution",
    "close_runbook_execution",
    "get_runbook_stats",
    "discover_tools",
    "call_tool",
    "discover_verbs",
    "register_tool",
    "register_verb",
    "set_tool_status",
    "delete_tool",
    "import_tool_source",
    "list_tool_sources",
    "sync_tool_source",
    "delete_tool_source",
    "list_verbs",
    "get_verb",
    "delete_verb",
    "list_tools",
    "get_tool",
    "get_tool_stats",
    "record_tool_use",
    "resolve_library",
    "read_page",
    "list_sources",
    "delete_source",
    "get_store_stats",
    "add_source",
    "get_job",
    "list_jobs",
    "cancel_job",
    "resume_job",
    "refresh_source",
    "set_refresh_interval",
    "start_reindex",
    "start_evaluation",
    "run_workflow",
    "workflow_status",
    "answer_workflow",
    "cancel_workflow",
    "resume_workflow",
    "list_workflows",
    "list_verified_fixes",
    "get_verified_fix",
    "retire_verified_fix",
    "get_strategy_stats",
    "plan_workflow",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Path:
    """A data directory with version 3.1 of the ``acme`` docs indexed (the facade closed again)."""
    root = tmp_path_factory.mktemp("mcp")
    docs = root / "docs"
    docs.mkdir()
    (docs / "upload.md").write_text(
        "# Uploading files\n\nUse `acme upload --bucket NAME FILE` to upload a file to a bucket.\n",
        encoding="utf-8",
    )
    with Librarian(Settings(home=root / "home"), embedder=embedder) as lib:
        assert lib.ingest(str(docs), sdk_name="acme", sdk_version="3.1").status == "ok"
        lib.knowledge.documents.create(
            lib.default_principal,
            DocumentDraft(
                title="Rotating the database password",
                content="Run `vault write database/rotate-root/main` and restart the app pods.",
                document_type="runbook",
            ),
        )
    return root / "home"


def structured(result: mcp_types.CallToolResult) -> Any:
    """The tool's JSON result (structured content, else the text of its first content block)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content["result"] if isinstance(content, dict) and set(content) == {"result"} else content
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return json.loads(block.text)


async def exercise(session: ClientSession) -> None:
    """List the tools and call each one, checking what an agent would see."""
    await session.initialize()
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    research_schema = tools["research_api_usage"].input_schema
    assert set(research_schema["required"]) == {"sdk_name", "query"}
    assert {"version", "error_text"} <= set(research_schema["properties"])
    assert "failed" in (tools["research_api_usage"].description or "")

    sdks = structured(await session.call_tool("list_sdks", {}))
    assert sdks == [{"sdk_name": "acme", "versions": ["3.1"], "chunks": sdks[0]["chunks"]}]

    answer = structured(
        await session.call_tool("research_api_usage", {"sdk_name": "acme", "query": "upload a file"})
    )
    assert answer["error"] is False
    assert answer["resolved_version"] == "3.1"
    assert answer["snippets"][0]["source_url"].endswith("upload.md")

    unknown = structured(
        await session.call_tool("research_api_usage", {"sdk_name": "acmee", "query": "upload a file"})
    )
    assert unknown["error"] is True
    assert any("acme" in s for s in unknown["fallback_suggestions"])

    hits = structured(await session.call_tool("search_documentation", {"query": "upload", "top_k": 2}))
    assert hits["results"][0]["sdk_version"] == "3.1" and hits["trimmed"] is None
    small = structured(
        await session.call_tool("search_documentation", {"query": "upload", "top_k": 5, "max_chars": 1200})
    )
    assert len(small["results"]) == 1 and small["trimmed"]["max_chars"] == 1200
    assert len(json.dumps(small["results"])) <= 1200
    refused = await session.call_tool("search_documentation", {"query": "upload", "top_k": 500})
    assert refused.is_error and "top_k: use 1 to 100" in str(refused.content[0])
    assert "ctx" not in tools["search_documentation"].input_schema["properties"]

    # The knowledge tools with the design's schemas: search, read the whole document, feedback.
    assert set(tools["search_knowledge"].input_schema["properties"]) == {"query", "filters", "limit"}
    found = structured(
        await session.call_tool(
            "search_knowledge",
            {"query": "rotate the database password", "filters": {"document_type": ["runbook"]}},
        )
    )["results"]
    assert found[0]["title"] == "Rotating the database password"
    marked = {found[0]["snippet"][a:b].lower() for a, b in found[0]["highlights"]}
    assert {"database", "rotate"} <= marked
    document = structured(await session.call_tool("get_document", {"document_id": found[0]["id"]}))
    assert "vault write" in document["content"]
    rated = structured(
        await session.call_tool(
            "record_knowledge_feedback",
            {"document_id": found[0]["id"], "feedback_type": "helpful", "was_used": True},
        )
    )
    assert rated["usefulness_score"] > 2.5 and rated["feedback_count"] >= 1
    # Documents by hand: add, edit from the version read (a stale one is a conflict), delete.
    added = structured(
        await session.call_tool("add_document", {"title": "On-call rota", "content": "Ask #sre."})
    )
    edited = structured(
        await session.call_tool(
            "update_document", {"document_id": added["id"], "base_version": 1, "content": "Ask #ops."}
        )
    )
    stale = await session.call_tool(
        "update_document", {"document_id": added["id"], "base_version": 1, "title": "x"}
    )
    assert edited["version"] == 2 and stale.is_error and "version 2, not 1" in stale.content[0].text  # type: ignore[union-attr]
    gone = structured(
        await session.call_tool("delete_document", {"document_id": added["id"], "base_version": 2})
    )
    assert gone["deleted"] is True
    assert (await session.call_tool("get_document", {"document_id": added["id"]})).is_error

    # An investigation saved over MCP is found by the next one, with its solution.
    signature = {
        "error_messages": ["FATAL: too many connections for role app-7f3k2"],
        "affected_services": ["orders"],
    }
    saved = structured(
        await session.call_tool(
            "save_learning",
            {
                "title": "Orders DB connection storm",
                "content": "The orders API exhausted Postgres connections after a pool misconfiguration.",
                "problem_signature": signature,
                "solution": "Set the pool size to 20 and add PgBouncer",
                "worked": True,
            },
        )
    )
    similar = structured(
        await session.call_tool(
            "find_similar_incidents",
            {
                "description": "orders cannot reach the database",
                "error_messages": ["FATAL: too many connections for role app-91xz0"],
            },
        )
    )["similar_incidents"]
    # (the stdio and HTTP sessions share one store: each saved one such incident)
    assert similar[0]["title"] == saved["incident"]["title"] and similar[0]["matched"]["error_messages"]
    solutions = structured(await session.call_tool("get_solution", {"problem_signature": signature}))[
        "solutions"
    ]
    assert solutions[0]["solution"].startswith("Set the pool size") and solutions[0]["successes"] >= 1
    outcome = structured(
        await session.call_tool(
            "record_solution_outcome", {"solution_id": solutions[0]["id"], "worked": True}
        )
    )
    assert outcome["successes"] == solutions[0]["successes"] + 1
    wrong = await session.call_tool("get_solution", {"problem_signature": {"symptoms": "x", "colour": 1}})
    assert wrong.is_error and "colour" in wrong.content[0].text  # type: ignore[union-attr]

    bad_filter = await session.call_tool("search_knowledge", {"query": "x", "filters": {"colour": "red"}})
    assert bad_filter.is_error
    assert "colour" in bad_filter.content[0].text  # type: ignore[union-attr]

    stored = structured(
        await session.call_tool(
            "record_feedback",
            {
                "sdk_name": "acme",
                "error_text": "unknown option --tag; AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCY",
                "source_url": answer["snippets"][0]["source_url"],
            },
        )
    )
    assert stored["helpful"] is True and "wJalrXUtnFEMI" not in stored["error_text"]

    failed = await session.call_tool("research_api_usage", {"sdk_name": "acme", "query": " "})
    assert failed.is_error
    block = failed.content[0]
    assert isinstance(block, mcp_types.TextContent)
    assert "the research query is empty" in block.text


@pytest.mark.anyio
async def test_stdio_session(home: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        # The real `librarian --home H mcp` command, as an agent's MCP client configuration runs it.
        args=["-m", "librarian.cli.main", "--home", str(home), "mcp"],
        env={"HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await exercise(session)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_with_mcp(lib: Librarian) -> Iterator[str]:
    """Serve the REST app of ``lib`` with MCP mounted at ``/mcp`` (uvicorn in a thread); yield its URL."""
    app = create_app(lib)
    mount_streamable_http(app, create_mcp_server(lib))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped during startup"
        assert time.monotonic() < deadline, "uvicorn did not start within 20 s"
        time.sleep(0.02)  # polling interval of a deadline-bounded wait
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def http_url(home: Path, embedder: LocalMiniLMEmbedder) -> Iterator[str]:
    """The REST app with MCP mounted at ``/mcp``, served by uvicorn in a thread."""
    with Librarian(Settings(home=home), embedder=embedder) as lib:
        yield from serve_with_mcp(lib)


@pytest.mark.anyio
async def test_streamable_http_session(http_url: str) -> None:
    async with streamable_http_client(http_url) as (read, write), ClientSession(read, write) as session:
        await exercise(session)


@pytest.mark.anyio
async def test_every_tool_has_a_title_annotations_and_described_arguments(tmp_path: Path) -> None:
    with Librarian(Settings(home=tmp_path / "home")) as lib:
        async with Client(create_mcp_server(lib)) as client:
            tools = (await client.list_tools()).tools
    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:
        assert tool.title and tool.annotations is not None, tool.name
        assert tool.annotations.read_only_hint is not None, tool.name
        description = tool.description or ""
        assert description and "\n    " not in description and "Args:" not in description, tool.name
        for name, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
    by_name = {tool.name: tool for tool in tools}
    assert by_name["delete_source"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert by_name["research_api_usage"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert by_name["research_api_usage"].title == "Research API usage"
