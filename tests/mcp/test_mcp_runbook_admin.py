"""The runbook administration tools through an in-memory MCP client session, acting for real users:
an author edits a runbook and reads its versions, retires it and brings it back, validates and
dry-runs runbooks, reads per-step statistics, decides the loop's proposals, and cancels, closes,
resumes and lists executions. A reader cannot change anything, a colleague cannot change what is not
theirs, and another organisation sees none of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.knowledge.access import Principal
from librarian.mcp import create_mcp_server
from librarian.runbooks.models import RunbookProposal
from mcp import Client
from tests.mcp.test_mcp import structured
from tests.mcp.test_mcp_runbooks import error_text

ADMIN_TOOLS = {
    "update_runbook",
    "list_runbook_versions",
    "set_runbook_active",
    "validate_runbook",
    "dry_run_runbook",
    "get_runbook_stats",
    "list_runbook_proposals",
    "decide_runbook_proposal",
    "cancel_runbook_execution",
    "close_runbook_execution",
    "resume_runbook_execution",
    "list_runbook_executions",
}
READ_ONLY_TOOLS = {
    "list_runbook_versions",
    "validate_runbook",
    "dry_run_runbook",
    "get_runbook_stats",
    "list_runbook_proposals",
    "list_runbook_executions",
}

RESTART = r"""
name: Restart a stuck worker
description: Restart a worker whose queue stopped draining
variables:
  worker: null
steps:
  - step: 1
    title: Read the queue depth
    action_type: bash
    command: echo depth {{worker}} 120
    extract:
      depth: "regex:depth \\S+ (\\d+)"
  - step: 2
    title: Is the queue stuck?
    action_type: conditional
    condition: "{{depth}} > 100"
    if_true: 3
    if_false: 4
  - step: 3
    title: Restart the worker
    action_type: bash
    command: echo restarting {{worker}}
    final_step: true
  - step: 4
    title: Nothing to do
    action_type: manual
    prompt: The queue of {{worker}} drains; close the alert
    final_step: true
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    home: Path = tmp_path_factory.mktemp("mcp-runbook-admin") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as library:
        yield library


def people_of(lib: Librarian) -> dict[str, Principal]:
    """alice and bob (write scope), rita (read scope) and root (an administrator) of ``acme``, and eve
    (write scope) of ``globex``: each the principal of a real token."""
    operator = lib.default_principal
    people = {}
    for organization, names in (("acme", ("alice", "bob", "rita", "root")), ("globex", ("eve",))):
        lib.identity.create_organization(operator, organization)
        for name in names:
            admin = name == "root"
            lib.identity.create_user(operator, organization, name, admin=admin)
            scopes = ["admin"] if admin else ["read"] if name == "rita" else ["write"]
            token = lib.identity.create_token(operator, organization, name, scopes=scopes)["token"]
            people[name] = lib.identity.authenticate(token)
    return people


@pytest.fixture(scope="module")
def people(lib: Librarian) -> dict[str, Principal]:
    return people_of(lib)


@asynccontextmanager
async def session_as(lib: Librarian, principal: Principal) -> AsyncIterator[Client]:
    """A client session whose tool calls act for ``principal``, as `librarian --token ... mcp` does."""
    operator = lib.default_principal
    lib.default_principal = principal
    try:
        async with Client(create_mcp_server(lib)) as client:
            yield client
    finally:
        lib.default_principal = operator


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    return structured(await client.call_tool(tool, arguments))


async def add_restart(lib: Librarian, author: Principal, name: str) -> dict[str, Any]:
    async with session_as(lib, author) as client:
        added: dict[str, Any] = await call(
            client, "add_runbook", text=RESTART.replace("Restart a stuck worker", name)
        )
    return added


@pytest.mark.anyio
async def test_the_administration_tools_an_agent_sees(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= ADMIN_TOOLS
    for name in ADMIN_TOOLS:
        tool = tools[name]
        assert tool.title and tool.description and tool.annotations is not None, name
        assert tool.annotations.read_only_hint is (name in READ_ONLY_TOOLS), name
        assert "ctx" not in tool.input_schema["properties"], name
        for argument, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), (name, argument)
    assert tools["cancel_runbook_execution"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["resume_runbook_execution"].annotations.open_world_hint is True  # type: ignore[union-attr]
    assert set(tools["update_runbook"].input_schema["required"]) == {"runbook_id", "text", "base_version"}


@pytest.mark.anyio
async def test_an_author_edits_a_runbook_and_reads_its_versions(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    runbook = await add_restart(lib, people["alice"], "Restart a worker (edits)")
    edited_text = RESTART.replace("Restart a stuck worker", "Restart a worker (edits)").replace(
        "echo restarting", "echo restarting gracefully"
    )
    async with session_as(lib, people["alice"]) as alice:
        edited = await call(
            alice,
            "update_runbook",
            runbook_id=runbook["id"],
            text=edited_text,
            base_version=1,
            note="graceful",
        )
        stale = await error_text(
            alice, "update_runbook", runbook_id=runbook["id"], text=RESTART, base_version=1
        )
        versions = await call(alice, "list_runbook_versions", runbook_id=runbook["id"])
        first = (await call(alice, "get_runbook", runbook_id=runbook["id"], version=1))["runbook"]
        unpinned = await error_text(alice, "get_runbook", topic="restart", version=1)
    async with session_as(lib, people["bob"]) as bob:
        not_his = await error_text(
            bob, "update_runbook", runbook_id=runbook["id"], text=edited_text, base_version=2
        )
    async with session_as(lib, people["rita"]) as rita:
        reader = await error_text(
            rita, "update_runbook", runbook_id=runbook["id"], text=edited_text, base_version=2
        )
    async with session_as(lib, people["eve"]) as eve:
        hidden = await error_text(eve, "list_runbook_versions", runbook_id=runbook["id"])

    assert edited["change"] == "new_version" and edited["version"] == 2
    assert edited["steps"][2]["command"] == "echo restarting gracefully {{worker}}"
    assert f"runbook {runbook['id']} is at version 2, not 1" in stale
    assert [(v["version"], v["note"]) for v in versions["versions"]] == [(2, "graceful"), (1, "")]
    assert first["version"] == 1 and first["steps"][2]["command"] == "echo restarting {{worker}}"
    assert "give runbook_id" in unpinned
    assert "can be changed by its author or an administrator" in not_his
    assert "needs the 'write' scope" in reader
    assert f"no runbook {runbook['id']}" in hidden


@pytest.mark.anyio
async def test_a_retired_runbook_starts_no_run_until_it_is_back(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    runbook = await add_restart(lib, people["alice"], "Restart a worker (retire)")
    async with session_as(lib, people["alice"]) as alice:
        retired = await call(alice, "set_runbook_active", runbook_id=runbook["id"], active=False)
        refused = await error_text(
            alice, "start_runbook_execution", runbook_id=runbook["id"], variables={"worker": "w1"}
        )
        listed = await call(alice, "list_runbooks")
        back = await call(alice, "set_runbook_active", runbook_id=runbook["id"], active=True)
        unknown = await error_text(alice, "set_runbook_active", runbook_id=987654, active=True)
    async with session_as(lib, people["rita"]) as rita:
        reader = await error_text(rita, "set_runbook_active", runbook_id=runbook["id"], active=False)

    assert retired["is_active"] is False and back["is_active"] is True
    assert f"runbook {runbook['id']} is retired" in refused
    assert runbook["id"] not in [r["id"] for r in listed["runbooks"]]
    assert "no runbook 987654" in unknown
    assert "needs the 'write' scope" in reader


@pytest.mark.anyio
async def test_a_runbook_is_validated_without_being_stored(lib: Librarian) -> None:
    broken = RESTART.replace("action_type: conditional", "action_type: maybe")
    async with Client(create_mcp_server(lib)) as client:
        valid = await call(client, "validate_runbook", text=RESTART)
        invalid = await call(client, "validate_runbook", text=broken)
        listed = await call(client, "list_runbooks")

    assert valid["valid"] is True and valid["problems"] == [] and valid["steps"] == 4
    assert valid["required_variables"] == ["worker"]
    assert invalid["valid"] is False
    assert any("step 2" in problem and "action_type" in problem for problem in invalid["problems"])
    assert "Restart a stuck worker" not in [r["name"] for r in listed["runbooks"]]


@pytest.mark.anyio
async def test_a_dry_run_renders_the_steps_and_the_path_it_would_take(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    runbook = await add_restart(lib, people["alice"], "Restart a worker (dry run)")
    async with session_as(lib, people["rita"]) as rita:  # reading is enough
        quiet = await call(
            rita, "dry_run_runbook", runbook_id=runbook["id"], variables={"worker": "w1"}, assume={"depth": 3}
        )
        blank = await call(rita, "dry_run_runbook", runbook_id=runbook["id"])
        no_version = await error_text(rita, "dry_run_runbook", runbook_id=runbook["id"], version=7)
    async with session_as(lib, people["eve"]) as eve:
        hidden = await error_text(eve, "dry_run_runbook", runbook_id=runbook["id"])

    assert [visit["step"] for visit in quiet["path"]] == [1, 2, 4]
    assert quiet["steps"][3]["prompt"] == "The queue of w1 drains; close the alert"
    assert quiet["missing_variables"] == [] and blank["missing_variables"] == ["worker"]
    assert f"runbook {runbook['id']} has no version 7" in no_version
    assert f"no runbook {runbook['id']}" in hidden


@pytest.mark.anyio
async def test_executions_are_listed_resumed_cancelled_closed_and_counted(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    runbook = await add_restart(lib, people["alice"], "Restart a worker (runs)")
    async with session_as(lib, people["alice"]) as alice:
        done = await call(
            alice,
            "start_runbook_execution",
            runbook_id=runbook["id"],
            variables={"worker": "w1"},
            step_by_step=False,
        )
        started = await call(
            alice, "start_runbook_execution", runbook_id=runbook["id"], variables={"worker": "w2"}
        )
        resumed = await call(alice, "resume_runbook_execution", execution_id=started["id"])
        listed = await call(alice, "list_runbook_executions", runbook_id=runbook["id"])
        completed = await call(
            alice, "list_runbook_executions", runbook_id=runbook["id"], status="completed", limit=1
        )
        open_run = await error_text(alice, "close_runbook_execution", execution_id=started["id"], rating=4)
    async with session_as(lib, people["bob"]) as bob:
        not_his = await error_text(bob, "cancel_runbook_execution", execution_id=started["id"])
    async with session_as(lib, people["alice"]) as alice:
        cancelled = await call(
            alice, "cancel_runbook_execution", execution_id=started["id"], reason="worker replaced"
        )
        again = await call(alice, "cancel_runbook_execution", execution_id=started["id"])
        closed = await call(
            alice,
            "close_runbook_execution",
            execution_id=done["id"],
            outcome="resolved",
            notes="the queue drains again",
            rating=5,
        )
        bad_rating = await error_text(alice, "close_runbook_execution", execution_id=done["id"], rating=9)
        bad_outcome = await error_text(
            alice, "close_runbook_execution", execution_id=done["id"], outcome="fixed"
        )
        stats = await call(alice, "get_runbook_stats", runbook_id=runbook["id"])
        bad_status = await error_text(alice, "list_runbook_executions", status="paused")
    async with session_as(lib, people["rita"]) as rita:
        reader_close = await error_text(rita, "close_runbook_execution", execution_id=done["id"], rating=1)
        reader_resume = await error_text(rita, "resume_runbook_execution", execution_id=started["id"])
    async with session_as(lib, people["eve"]) as eve:
        elsewhere = await call(eve, "list_runbook_executions")
        hidden_stats = await error_text(eve, "get_runbook_stats", runbook_id=runbook["id"])
        hidden_run = await error_text(eve, "cancel_runbook_execution", execution_id=done["id"])

    assert done["status"] == "completed" and done["completed_steps"] == [1, 2, 3]
    assert resumed["status"] == "running" and [s["step"] for s in resumed["steps"]] == [1]
    assert {e["id"] for e in listed["executions"]} == {done["id"], started["id"]}
    assert "steps" not in listed["executions"][0]  # the list stays small: no step runs
    assert [e["id"] for e in completed["executions"]] == [done["id"]]
    assert "finish or cancel it first" in open_run
    assert f"no runbook execution {started['id']}" in not_his
    assert cancelled["status"] == "cancelled" and again["status"] == "cancelled"
    assert len(again["steps"]) == len(cancelled["steps"]) == 1
    assert closed["outcome"] == "resolved" and closed["effectiveness_rating"] == 5
    assert closed["resolution_notes"] == "the queue drains again"
    assert "rating: give 1 to 5 stars" in bad_rating
    assert "outcome" in bad_outcome and "'resolved', 'partially_resolved'" in bad_outcome
    assert stats["execution_count"] == 2 and stats["average_rating"] == 5.0
    per_step = [(s["step"], s["runs"], s["succeeded"]) for s in stats["steps"]]
    assert per_step == [(1, 2, 2), (2, 1, 1), (3, 1, 1)]
    assert "status" in bad_status and "'running', 'waiting', 'completed'" in bad_status
    assert "needs the 'write' scope" in reader_close and "needs the 'write' scope" in reader_resume
    assert elsewhere == {"executions": []}
    assert f"no runbook {runbook['id']}" in hidden_stats
    assert f"no runbook execution {done['id']}" in hidden_run


def propose(lib: Librarian, runbook: dict[str, Any], step: int, new_command: str) -> None:
    """A proposal as the self-correcting loop leaves one after it corrected a step's command."""
    old_command = next(s["command"] for s in runbook["steps"] if s["step_number"] == step)
    with lib.sessions.begin() as session:
        session.add(
            RunbookProposal(
                runbook_id=runbook["id"],
                base_version=runbook["version"],
                step_number=step,
                old_command=old_command,
                new_command=new_command,
            )
        )


@pytest.mark.anyio
async def test_the_author_accepts_and_rejects_the_loops_proposals(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    runbook = await add_restart(lib, people["alice"], "Restart a worker (proposals)")
    propose(lib, runbook, 3, "echo restarting --graceful {{worker}}")
    propose(lib, runbook, 1, "echo depth-of {{worker}} 120")
    async with session_as(lib, people["rita"]) as rita:
        pending = (await call(rita, "list_runbook_proposals", runbook_id=runbook["id"]))["proposals"]
        reader = await error_text(rita, "decide_runbook_proposal", proposal_id=pending[0]["id"], accept=True)
    async with session_as(lib, people["bob"]) as bob:
        not_his = await error_text(bob, "decide_runbook_proposal", proposal_id=pending[0]["id"], accept=True)
    async with session_as(lib, people["alice"]) as alice:
        accepted = await call(alice, "decide_runbook_proposal", proposal_id=pending[0]["id"], accept=True)
        rejected = await call(alice, "decide_runbook_proposal", proposal_id=pending[1]["id"], accept=False)
        twice = await error_text(alice, "decide_runbook_proposal", proposal_id=pending[0]["id"], accept=False)
        unknown = await error_text(alice, "decide_runbook_proposal", proposal_id=987654, accept=True)
        current = (await call(alice, "get_runbook", runbook_id=runbook["id"]))["runbook"]
        everything = await call(alice, "list_runbook_proposals", runbook_id=runbook["id"], status="all")
        still_pending = await call(alice, "list_runbook_proposals", runbook_id=runbook["id"])
        bad_status = await error_text(
            alice, "list_runbook_proposals", runbook_id=runbook["id"], status="open"
        )
    async with session_as(lib, people["eve"]) as eve:
        hidden = await error_text(eve, "list_runbook_proposals", runbook_id=runbook["id"])

    assert [(p["step"], p["status"]) for p in pending] == [(3, "pending"), (1, "pending")]
    assert "needs the 'write' scope" in reader
    assert "can be changed by its author or an administrator" in not_his
    assert accepted["status"] == "accepted" and rejected["status"] == "rejected"
    assert current["version"] == 2
    assert current["steps"][2]["command"] == "echo restarting --graceful {{worker}}"
    assert current["steps"][0]["command"] == "echo depth {{worker}} 120"  # the rejected one changed nothing
    assert "already accepted" in twice
    assert "no runbook proposal 987654" in unknown
    assert [p["status"] for p in everything["proposals"]] == ["accepted", "rejected"]
    assert still_pending == {"proposals": []}
    assert "status" in bad_status and "'pending', 'accepted', 'rejected' or 'all'" in bad_status
    assert f"no runbook {runbook['id']}" in hidden
