"""The registry on every backend, the circuit breaker on a real failing tool, and the LLM paths of
enrichment and decomposition against a local OpenAI-compatible server (issue 16)."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from librarian.app import Librarian
from librarian.config import Settings
from librarian.discovery.calling import ToolCallError
from librarian.discovery.models import ToolRow
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import ConflictError
from librarian.storage.models import utcnow
from tests.llm.fake_llm_server import FakeLLMServer, FakeReply

FLAKY = '''
import os


def fetch(url: str) -> str:
    """Fetch a web page and return its text."""
    if os.path.exists(os.environ.get("FLAKY_FLAG", "") or "/nonexistent-flag"):
        return "page text"
    if url == "bad":
        raise ValueError("not a URL")
    os._exit(3)  # the plugin crashes: the tool's own fault
'''


def test_the_registry_searches_learns_and_filters_on_every_backend(library: Librarian) -> None:
    """The same contract on SQLite, PostgreSQL, a Chroma server and pgvector settings."""
    outcome = library.discovery.register_tools(
        [
            {
                "toolId": "t.time",
                "name": "get_time",
                "type": "mcp",
                "description": "Current time in a timezone",
            },
            {
                "toolId": "t.rain",
                "name": "forecast",
                "type": "openapi",
                "description": "Weather forecast for a city",
            },
            {
                "toolId": "t.git",
                "name": "git_log",
                "type": "mcp",
                "description": "Show the commit history of a repo",
            },
        ]
    )
    assert sorted(outcome["created"]) == ["t.git", "t.rain", "t.time"]

    assert library.discovery.search_tools("will it rain in Oslo", top_k=1)["results"][0]["toolId"] == "t.rain"
    library.discovery.record_use("t.git", "who changed this file last week")
    best = library.discovery.search_tools("who edited the config file yesterday", top_k=1)["results"][0]
    assert best["toolId"] == "t.git" and any("served 1" in reason for reason in best["why"])
    library.discovery.set_status("t.rain", "inactive")
    assert "t.rain" not in [r["toolId"] for r in library.discovery.search_tools("rain", top_k=3)["results"]]
    assert [view["toolId"] for view in library.discovery.tools(status="inactive")] == ["t.rain"]
    library.discovery.delete_tool("t.git")
    assert library.discovery.stats()["tools_active"] == 1


def test_a_failing_tool_is_taken_out_of_use_then_probed_back(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "flaky.py").write_text(textwrap.dedent(FLAKY))
    flag = plugins / "up"
    settings = Settings(home=tmp_path / "home", tools_failure_threshold=2, tools_probe_after_seconds=3600)
    with Librarian(settings, embedder=embedder) as lib:
        lib.discovery.register_tool(
            {
                "toolId": "web.fetch",
                "name": "fetch",
                "type": "python",
                "description": "Fetch a web page and return its text",
                "binding": {"module": "flaky", "function": "fetch", "path": [str(plugins)]},
            }
        )
        # Requests the tool refuses are not its fault: they never take it out of use.
        for _ in range(3):
            with pytest.raises(ToolCallError, match="ValueError: not a URL"):
                lib.discovery.call("web.fetch", {"url": "bad"})
        assert lib.discovery.tool("web.fetch")["health"] == "healthy"
        for _ in range(2):
            with pytest.raises(ToolCallError, match="exit"):
                lib.discovery.call("web.fetch", {"url": "https://example.org"})

        shown = lib.discovery.tool("web.fetch")
        assert shown["health"] == "open" and shown["calls"]["consecutive_failures"] == 2
        assert lib.discovery.search_tools("fetch a web page")["results"] == []
        with pytest.raises(ConflictError, match="out of use after 2 failed calls"):
            lib.discovery.call("web.fetch", {"url": "https://example.org"})

        # The probe period passes; the upstream recovered: one probe call brings the tool back.
        with lib.sessions.begin() as session:
            session.execute(
                update(ToolRow).values(circuit_opened_at=utcnow() - timedelta(hours=2), updated_at=utcnow())
            )
        flag.write_text("")
        (plugins / "flaky.py").write_text(
            textwrap.dedent(FLAKY).replace('os.environ.get("FLAKY_FLAG", "")', repr(str(flag)))
        )
        assert lib.discovery.call("web.fetch", {"url": "https://example.org"}).content == "page text"
        assert lib.discovery.tool("web.fetch")["health"] == "healthy"
        assert lib.discovery.search_tools("fetch a web page")["results"][0]["toolId"] == "web.fetch"


def test_the_llm_enriches_tools_and_decomposes_goals(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    with FakeLLMServer() as server:
        settings = Settings(
            home=tmp_path / "home", llm_provider="openai", llm_url=server.openai_url, llm_model="m"
        )
        with Librarian(settings, embedder=embedder) as lib:
            server.queue("1. What's the time in Tokyo?\n2. Current hour in Paris please\n3. x\n")
            server.queue("Is it raining in Rome?\nDo I need an umbrella today?\n")
            lib.discovery.register_tool(
                {
                    "toolId": "t.time",
                    "name": "get_time",
                    "type": "mcp",
                    "description": "Current time in a timezone",
                }
            )
            lib.discovery.register_tool(
                {"toolId": "t.rain", "name": "forecast", "type": "openapi", "description": "Weather forecast"}
            )
            assert lib.discovery.tool("t.time")["enrichment"][:2] == [
                "What's the time in Tokyo?",
                "Current hour in Paris please",
            ]
            assert "<tool>" in server.requests[0].body["messages"][-1]["content"]

            server.queue('["tell the current time in Tokyo", "check the weather forecast for Tokyo"]')
            resolution = lib.discovery.resolve_verb("PLAN_TRIP", "get ready for a trip to Tokyo")
            assert resolution.kind == "decomposed"
            assert [binding.tool for binding in resolution.bindings] == ["t.time", "t.rain"]

            # A failing LLM never blocks a save: the offline questions are kept.
            server.queue(FakeReply(status=500))
            saved = lib.discovery.register_tool(
                {
                    "toolId": "t.git",
                    "name": "git_log",
                    "type": "mcp",
                    "description": "Show the commit history",
                }
            )
            assert saved["change"] == "created" and saved["enrichment"]
