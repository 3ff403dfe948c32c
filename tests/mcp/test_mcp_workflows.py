"""The workflow tools through an in-memory MCP client session: an agent runs a workflow, follows it,
answers the question the self-correcting loop asks when it cannot decide alone, cancels one, and
lists the fixes the loop verified."""

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
from tests.workflow_samples import LEAVES, sleeping

WORKFLOW_TOOLS = {
    "run_workflow",
    "workflow_status",
    "answer_workflow",
    "cancel_workflow",
    "list_workflows",
    "list_verified_fixes",
    "get_verified_fix",
    "retire_verified_fix",
    "get_strategy_stats",
    "plan_workflow",
    "resume_workflow",
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    home: Path = tmp_path_factory.mktemp("mcp-workflows") / "home"
    settings = Settings(home=home, runtime_workers=2, runtime_task_timeout_seconds=120.0)
    with Librarian(settings, embedder=embedder) as library:
        yield library


async def call(client: Client, name: str, **arguments: Any) -> Any:
    return structured(await client.call_tool(name, arguments))


@pytest.mark.anyio
async def test_the_workflow_tools_an_agent_sees(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= WORKFLOW_TOOLS
    run = tools["run_workflow"]
    assert run.input_schema["required"] == ["workflow"] and "ctx" not in run.input_schema["properties"]
    assert run.annotations is not None and run.annotations.destructive_hint is True
    assert tools["workflow_status"].annotations.read_only_hint is True  # type: ignore[union-attr]
    for name in WORKFLOW_TOOLS:
        tool = tools[name]
        assert tool.title and tool.description
        for argument, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), (name, argument)


@pytest.mark.anyio
async def test_an_agent_runs_a_workflow_and_answers_the_loops_question(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        paused = await call(client, "run_workflow", workflow=LEAVES, wait_seconds=120)
        assert paused["status"] == "paused", paused
        question = paused["question"]
        assert question["task"] == "leaves" and "--not-required" in question["question"]
        assert [step["stage"] for step in paused["timeline"]][:2] == ["trigger", "version"]
        assert paused["timeline"][-1]["stage"] == "clarification"

        answered = await call(
            client, "answer_workflow", workflow_id=paused["workflow_id"], answer="pip list --not-required"
        )
        assert answered["status"] in ("running", "success")
        done = await call(client, "workflow_status", workflow_id=paused["workflow_id"], wait_seconds=120)
        assert done["status"] == "success", done["failure_report"]
        [task] = done["tasks"]
        assert task["status"] == "success" and "pip list --not-required" in task["outcome"]
        correction = [step for step in done["timeline"] if step["stage"] == "correction"]
        assert correction and correction[-1]["task"] == "leaves"
        # The brief view stays small however long the log: the newest events, the timeline.
        assert done["events_total"] >= len(done["recent_events"]) > 0

        listed = await call(client, "list_workflows", status="success")
        assert paused["workflow_id"] in [w["workflow_id"] for w in listed["workflows"]]
        # The answer that worked is learned: the next agent meeting this drift needs no question.
        fixes = (await call(client, "list_verified_fixes"))["fixes"]
        learned = [
            fix
            for fix in fixes
            if "list" in fix["fixed_template"] and "--not-required" in fix["fixed_template"]
        ]
        assert learned, fixes
        fix = await call(client, "get_verified_fix", fix_id=learned[0]["id"])
        assert fix["snippets"] is not None and fix["retired"] is None
        stats = (await call(client, "get_strategy_stats"))["strategies"]
        assert any(row["trials"] >= 1 for row in stats), stats

        # A fix that turned out wrong is retired with a reason; it is no longer listed, and twice is an error.
        retired = await call(client, "retire_verified_fix", fix_id=fix["id"], reason="pip moved it again")
        assert retired["retired"]["reason"] == "pip moved it again"
        again = await error_text(client, "retire_verified_fix", fix_id=fix["id"], reason="again")
        assert "already retired" in again
        assert fix["id"] not in [f["id"] for f in (await call(client, "list_verified_fixes"))["fixes"]]
        everything = (await call(client, "list_verified_fixes", include_retired=True))["fixes"]
        assert [f["retired"]["reason"] for f in everything if f["id"] == fix["id"]] == ["pip moved it again"]
        missing = await error_text(client, "get_verified_fix", fix_id=10**9)
        assert "no verified fix" in missing


@pytest.mark.anyio
async def test_an_agent_cancels_a_workflow_and_bad_input_is_a_readable_error(lib: Librarian) -> None:
    slow = sleeping(2)
    async with Client(create_mcp_server(lib)) as client:
        started = await call(client, "run_workflow", workflow=slow, wait_seconds=0)
        cancelled = await call(client, "cancel_workflow", workflow_id=started["workflow_id"])
        assert started["status"] == "running" and cancelled["status"] == "cancelled"

        text = "name: bad\ntasks:\n  - id: a\n    executor_type: teleport\n    payload: {}\n"
        invalid = await error_text(client, "run_workflow", workflow=text)
        unknown = await error_text(
            client, "workflow_status", workflow_id="00000000-0000-0000-0000-000000000000"
        )
        unplanned = await error_text(client, "plan_workflow", goal="lint the repository")
    assert "teleport" in invalid and "'a'" in invalid and "Traceback" not in invalid
    assert "LLM" in unplanned and "Traceback" not in unplanned  # this server has none configured
    assert "no workflow" in unknown or "not found" in unknown.lower()
