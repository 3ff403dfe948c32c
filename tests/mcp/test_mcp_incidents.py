"""The incident record tools through an in-memory MCP client session, acting for real users: an agent
records an incident, imports a team's post-mortems and exports, pages through the incidents and reads
one. A reader cannot record or import, bad input is named, and another organisation sees none of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.knowledge.access import Principal
from librarian.mcp import create_mcp_server
from mcp import Client
from tests.mcp.test_mcp_runbook_admin import call, people_of, session_as
from tests.mcp.test_mcp_runbooks import error_text

INCIDENT_TOOLS = {"record_incident", "import_incidents", "list_incidents", "get_incident"}

POSTMORTEM = """---
title: Checkout pods OOMKilled after the cache change
severity: high
occurred_at: 2025-10-15T14:03:00Z
affected_services: [checkout]
symptoms: [pod restarts, OOMKilled]
---
# Checkout pods OOMKilled

## Summary
The checkout pods ran out of memory after the cache size was doubled.

## Root cause
The in-process cache grew past the pod's memory limit.

## Resolution
- Halve the cache size
- Raise the memory limit to 1 GiB
"""

HISTORY = """title,severity,affected_services,symptoms,root_cause
Search latency spike,medium,search;gateway,slow queries,a missing index
Login errors,critical,auth,500 errors;timeouts,an expired certificate
,low,billing,,no title here
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    home: Path = tmp_path_factory.mktemp("mcp-incidents") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as library:
        yield library


@pytest.fixture(scope="module")
def people(lib: Librarian) -> dict[str, Principal]:
    return people_of(lib)


@pytest.mark.anyio
async def test_the_incident_tools_an_agent_sees(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= INCIDENT_TOOLS
    for name in INCIDENT_TOOLS:
        tool = tools[name]
        assert tool.title and tool.description and tool.annotations is not None, name
        assert tool.annotations.read_only_hint is name.startswith(("list_", "get_")), name
        for argument, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), (name, argument)
    assert tools["record_incident"].input_schema["required"] == ["title"]
    assert tools["import_incidents"].input_schema["properties"]["files"]["maxItems"] == 1000


@pytest.mark.anyio
async def test_an_agent_records_an_incident_and_reads_it_back(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    async with session_as(lib, people["alice"]) as alice:
        recorded = await call(
            alice,
            "record_incident",
            title="Payments queue stuck",
            description="The payments worker stopped consuming after the deploy.",
            severity="high",
            incident_type="outage",
            problem_signature={"symptoms": ["queue depth grows"], "affected_services": ["payments"]},
            root_cause="a consumer group rename",
            solution_applied="restore the consumer group name",
            resolution_steps=["roll back the config", "restart the workers"],
            tags=["queue"],
            resolution_time_minutes=42,
            was_successful=True,
            occurred_at="2025-11-02T08:30:00Z",
        )
        read = await call(alice, "get_incident", incident_id=recorded["id"])
        similar = await call(alice, "find_similar_incidents", description="payments queue is not draining")
        bad_severity = await error_text(alice, "record_incident", title="x", severity="urgent")
        bad_signature = await error_text(
            alice, "record_incident", title="x", problem_signature={"smells": ["burnt"]}
        )
        unknown = await error_text(alice, "get_incident", incident_id=987654)
    async with session_as(lib, people["rita"]) as rita:
        reader_reads = await call(rita, "get_incident", incident_id=recorded["id"])
        reader_writes = await error_text(rita, "record_incident", title="Not allowed")
    async with session_as(lib, people["eve"]) as eve:
        hidden = await error_text(eve, "get_incident", incident_id=recorded["id"])

    assert read == recorded
    assert read["title"] == "Payments queue stuck" and read["severity"] == "high"
    assert read["problem_signature"]["affected_services"] == ["payments"]
    assert read["resolution_steps"] == ["roll back the config", "restart the workers"]
    assert read["occurred_at"].startswith("2025-11-02T08:30:00") and read["origin"] == {"via": "mcp"}
    assert read["knowledge_document_id"] is not None
    assert similar["similar_incidents"][0]["id"] == recorded["id"]
    assert "unknown severity 'urgent'" in bad_severity
    assert "unknown field 'smells'" in bad_signature
    assert "no incident 987654" in unknown
    assert reader_reads["id"] == recorded["id"]
    assert "needs the 'write' scope" in reader_writes
    assert f"no incident {recorded['id']}" in hidden


@pytest.mark.anyio
async def test_an_agent_imports_post_mortems_and_exports(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    files: list[dict[str, Any]] = [
        {"filename": "2025-10-15-checkout.md", "content": POSTMORTEM},
        {"filename": "history.csv", "content": HISTORY},
        {"filename": "notes.txt", "content": "not an incident"},
    ]
    async with session_as(lib, people["bob"]) as bob:
        report = await call(bob, "import_incidents", files=files)
        postmortem = await call(bob, "get_incident", incident_id=report["incident_ids"][0])
        nothing = await error_text(bob, "import_incidents", files=[])
    async with session_as(lib, people["rita"]) as rita:
        reader = await error_text(rita, "import_incidents", files=files[:1])

    assert report["imported"] == 3 and len(report["incident_ids"]) == 3
    problems = {problem["file"]: problem["reason"] for problem in report["problems"]}
    assert set(problems) == {"history.csv", "notes.txt"}
    assert "title" in problems["history.csv"] and "unknown format" in problems["notes.txt"]
    assert postmortem["title"] == "Checkout pods OOMKilled after the cache change"
    assert postmortem["severity"] == "high"
    assert postmortem["resolution_steps"] == ["Halve the cache size", "Raise the memory limit to 1 GiB"]
    assert "files" in nothing and "at least 1 item" in nothing
    assert "needs the 'write' scope" in reader


@pytest.mark.anyio
async def test_incidents_are_listed_a_page_at_a_time(lib: Librarian, people: dict[str, Principal]) -> None:
    async with session_as(lib, people["alice"]) as alice:
        for number in range(3):
            await call(alice, "record_incident", title=f"Paged incident {number}", severity="low")
        pages: list[dict[str, Any]] = []
        after = 0
        while True:
            page = await call(alice, "list_incidents", after=after, limit=2)
            pages.append(page)
            if page["next_after"] is None:
                break
            after = page["next_after"]
        low = await call(alice, "list_incidents", severity="low", limit=500)
        bad_limit = await error_text(alice, "list_incidents", limit=0)
    async with session_as(lib, people["eve"]) as eve:
        elsewhere = await call(eve, "list_incidents")

    listed = [incident for page in pages for incident in page["incidents"]]
    ids = [incident["id"] for incident in listed]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    assert {"Paged incident 0", "Paged incident 1", "Paged incident 2"} <= {i["title"] for i in listed}
    assert all(len(page["incidents"]) == 2 for page in pages[:-1])
    assert set(listed[0]) == {
        "id",
        "title",
        "severity",
        "incident_type",
        "occurred_at",
        "resolution_time_minutes",
        "was_successful",
        "recurred",
        "root_cause",
        "solution",
    }  # agent-sized: get_incident reads the rest
    assert [i["title"] for i in low["incidents"]][-3:] == [f"Paged incident {n}" for n in range(3)]
    assert {i["severity"] for i in low["incidents"]} == {"low"} and low["next_after"] is None
    assert "limit: use 1 to 500" in bad_limit
    assert elsewhere == {"incidents": [], "next_after": None}


@pytest.mark.anyio
async def test_similar_incidents_match_on_infrastructure(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    async with session_as(lib, people["bob"]) as client:
        for infrastructure in ("postgres 15", "redis 7"):
            await call(
                client,
                "record_incident",
                title=f"Connections refused on {infrastructure}",
                description="Clients get connection refused during the nightly backup.",
                problem_signature={"infrastructure": infrastructure},
            )
        found = await call(
            client,
            "find_similar_incidents",
            description="connection refused during the backup",
            infrastructure="postgres 15",
        )
    [first, *_] = found["similar_incidents"]
    assert first["title"] == "Connections refused on postgres 15", found
    assert first["matched"]["infrastructure"] is True
