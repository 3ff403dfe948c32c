"""The runbook tools through an in-memory MCP client session: an agent finds a runbook for its
problem, drives it step by step (answering an agent_prompt step with its own analysis), answers and
approves waiting steps, and reads the history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.mcp import create_mcp_server
from mcp import Client
from tests.mcp.test_mcp import structured

RUNBOOK_TOOLS = {
    "get_runbook",
    "list_runbooks",
    "add_runbook",
    "start_runbook_execution",
    "execute_runbook_step",
    "answer_runbook_step",
    "approve_runbook_step",
    "get_runbook_execution",
}

TRIAGE = r"""
name: Checkout latency triage
description: Find out why checkout got slow and scale it out when it is
tags: [latency]
trigger_patterns:
  symptoms: [checkout slow, high p99 latency]
  services: [checkout]
variables:
  service: checkout
steps:
  - step: 1
    title: Read the latency
    action_type: bash
    command: echo p99 {{service}} 950ms
    extract:
      p99: "regex:p99 \\w+ (\\d+)ms"
  - step: 2
    title: Analyse the latency
    action_type: agent_prompt
    prompt: "The p99 of {{service}} is {{p99}} ms: {{step_1_output}} Reply verdict: slow or verdict: fine."
    extract:
      verdict: "regex:verdict: (\\w+)"
  - step: 3
    title: Is it slow?
    action_type: conditional
    condition: "{{verdict}} == 'slow'"
    if_true: 4
    if_false: 5
  - step: 4
    title: Scale out
    action_type: bash
    command: echo scaling {{service}}
    final_step: true
  - step: 5
    title: Close the alert
    action_type: manual
    prompt: Nothing to do; close the alert
    final_step: true
"""

DRAIN = """
name: Drain a node
description: Move the workloads off a node before maintenance
steps:
  - step: 1
    title: Cordon the node
    action_type: manual
    prompt: Cordon {{node}} in the console and say when it is done
  - step: 2
    title: Sign off the drain
    action_type: approval
    prompt: Drain {{node}} now?
  - step: 3
    title: Drain
    action_type: bash
    command: echo drained {{node}}
    final_step: true
"""


SLOW = """
name: Slow warm-up
description: Warm the cache, which takes a few seconds
steps:
  - step: 1
    title: Warm the cache
    action_type: bash
    command: sleep 3
    final_step: true
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    home: Path = tmp_path_factory.mktemp("mcp-runbooks") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as library:
        yield library


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    return structured(await client.call_tool(tool, arguments))


async def error_text(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


@pytest.mark.anyio
async def test_the_tools_an_agent_sees(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= RUNBOOK_TOOLS
    start = tools["start_runbook_execution"].input_schema
    assert start["required"] == ["runbook_id"]
    assert start["properties"]["step_by_step"]["default"] is True
    assert start["properties"]["agent_driven"]["default"] is True
    assert "ctx" not in start["properties"]
    step = tools["execute_runbook_step"]
    assert step.input_schema["required"] == ["execution_id"] and "answer" in step.input_schema["properties"]
    assert "agent_prompt" in (step.description or "")
    assert set(tools["get_runbook"].input_schema["properties"]) == {
        "runbook_id",
        "topic",
        "problem_description",
        "limit",
        "version",
    }
    assert (
        "required" not in tools["get_runbook"].input_schema
        or not tools["get_runbook"].input_schema["required"]
    )


@pytest.mark.anyio
async def test_an_agent_drives_a_runbook_step_by_step(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        added = await call(client, "add_runbook", text=TRIAGE)
        found = await call(
            client, "get_runbook", problem_description="checkout is slow, p99 latency doubled since noon"
        )
        runbook = found["runbook"]
        assert added["change"] == "created" and runbook["id"] == added["id"]
        assert [s["action_type"] for s in runbook["steps"]] == [
            "bash",
            "agent_prompt",
            "conditional",
            "bash",
            "manual",
        ]
        assert runbook["steps"][0]["action"] == "echo p99 {{service}} 950ms"
        assert runbook["execution_count"] == 0 and runbook["success_rate"] is None
        assert found["matches"][0]["id"] == added["id"] and found["matches"][0]["reasons"]

        started = await call(
            client, "start_runbook_execution", runbook_id=added["id"], problem="slow checkout"
        )
        execution_id = started["id"]
        assert (started["status"], started["mode"], started["steps"]) == ("running", "step", [])

        first = await call(client, "execute_runbook_step", execution_id=execution_id)
        assert first["steps"][0]["output"] == "p99 checkout 950ms\n" and first["variables"]["p99"] == "950"
        assert first["current_step_number"] == 2 and first["status"] == "running"

        # The agent_prompt step waits for the agent, even though it is the next step to run.
        asked = await call(client, "execute_runbook_step", execution_id=execution_id)
        waiting = asked["waiting_for"]
        assert asked["status"] == "waiting" and waiting["kind"] == "agent_prompt" and waiting["step"] == 2
        assert "The p99 of checkout is 950 ms" in waiting["prompt"]
        assert '<data source="step_1_output">' in waiting["prompt"]  # command output quoted as data
        again = await call(client, "execute_runbook_step", execution_id=execution_id)
        assert again["status"] == "waiting" and len(again["steps"]) == 2  # no answer: nothing moves

        analysed = await call(
            client,
            "execute_runbook_step",
            execution_id=execution_id,
            answer="verdict: slow - 950 ms is three times the 300 ms budget",
        )
        assert analysed["steps"][1]["output"].startswith("verdict: slow")
        assert analysed["variables"]["verdict"] == "slow"
        assert analysed["steps"][2]["output"] == "true" and analysed["current_step_number"] == 4

        done = await call(client, "execute_runbook_step", execution_id=execution_id)
        assert done["status"] == "completed" and done["completed_steps"] == [1, 2, 3, 4]
        assert done["steps"][3]["output"] == "scaling checkout\n"

        read = await call(client, "get_runbook_execution", execution_id=execution_id)
        assert read["status"] == "completed" and read["problem"] == "slow checkout"
        late = await error_text(client, "execute_runbook_step", execution_id=execution_id, answer="late")
        assert "completed" in late and "waits for no answer" in late

        tracked = (await call(client, "get_runbook", runbook_id=added["id"]))["runbook"]
        assert tracked["execution_count"] == 1 and tracked["success_rate"] == 1.0
        assert tracked["avg_execution_time_ms"] is not None
        listed = await call(client, "list_runbooks", tag="latency")
        assert [r["name"] for r in listed["runbooks"]] == ["Checkout latency triage"]


@pytest.mark.anyio
async def test_an_agent_answers_and_approves_waiting_steps(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        runbook = await call(client, "add_runbook", text=DRAIN)
        missing = await error_text(client, "start_runbook_execution", runbook_id=runbook["id"])
        assert "node" in missing

        def start(**extra: Any) -> Any:
            return call(
                client,
                "start_runbook_execution",
                runbook_id=runbook["id"],
                variables={"node": "worker-7"},
                step_by_step=False,
                **extra,
            )

        started = await start()
        assert started["status"] == "waiting" and started["waiting_for"]["kind"] == "manual"
        assert started["waiting_for"]["prompt"] == "Cordon worker-7 in the console and say when it is done"
        cordoned = await call(client, "answer_runbook_step", execution_id=started["id"], answer="cordoned")
        assert cordoned["status"] == "waiting" and cordoned["waiting_for"]["kind"] == "approval"
        not_an_answer = await error_text(
            client, "answer_runbook_step", execution_id=started["id"], answer="ok"
        )
        assert "approval" in not_an_answer
        approved = await call(
            client, "approve_runbook_step", execution_id=started["id"], comment="window open"
        )
        assert approved["status"] == "completed" and approved["steps"][2]["output"] == "drained worker-7\n"

        second = await start()
        await call(client, "answer_runbook_step", execution_id=second["id"], answer="cordoned")
        rejected = await call(
            client, "approve_runbook_step", execution_id=second["id"], approved=False, comment="peak hour"
        )
        assert rejected["status"] == "failed" and rejected["failed_steps"] == [2]
        assert [s["step"] for s in rejected["steps"]] == [1, 2]  # the drain never ran


@pytest.mark.anyio
async def test_a_broken_runbook_is_refused_with_its_step_and_field(lib: Librarian) -> None:
    broken = DRAIN.replace("action_type: bash", "action_type: shell")
    async with Client(create_mcp_server(lib)) as client:
        text = await error_text(client, "add_runbook", text=broken)
        unknown = await error_text(client, "get_runbook_execution", execution_id="no-such-run")
        nothing = await error_text(client, "get_runbook")
    assert "step 3" in text and "field action_type" in text and "'shell' is not an action type" in text
    assert "no runbook execution no-such-run" in unknown
    assert "runbook_id, topic or problem_description" in nothing


@pytest.mark.anyio
async def test_a_long_bash_step_does_not_block_other_calls(lib: Librarian) -> None:
    finished: list[str] = []
    async with Client(create_mcp_server(lib)) as client:
        slow = await call(client, "add_runbook", text=SLOW)

        async def run_it() -> None:
            done = await call(client, "start_runbook_execution", runbook_id=slow["id"], step_by_step=False)
            assert done["status"] == "completed"
            finished.append("runbook")

        async def read_meanwhile() -> None:
            # Once the run exists its step is running (in a worker thread): other calls are answered.
            with anyio.fail_after(20):
                while not lib.runbooks.executions(lib.default_principal, runbook_id=slow["id"]):
                    await anyio.sleep(0.02)
            await call(client, "get_runbook", runbook_id=slow["id"])
            finished.append("read")

        async with anyio.create_task_group() as group:
            group.start_soon(run_it)
            group.start_soon(read_meanwhile)
    assert finished == ["read", "runbook"]
