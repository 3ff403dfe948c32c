"""A killed embedded run is resumed and a retried submission does not run twice (real kill -9).

The hardening issue's reproductions: ``kill -9`` of an embedded ``librarian workflow run`` left the
workflow ``running`` with nothing to resume it; a client retrying a submission created a second
workflow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from librarian.api import create_app
from librarian.app import Librarian
from librarian.cli.main import app
from librarian.config import Settings
from librarian.mcp import create_mcp_server
from librarian.runtime.engine import Runtime
from librarian.runtime.recovery import owner_is_gone
from mcp import Client
from tests.processes import wait_for

WORKFLOW = """\
name: slow
goal: write three files, the middle one slowly
tasks:
  - id: first
    executor_type: command_executor
    payload: {script: "echo 1 > first.txt"}
  - id: slow
    executor_type: command_executor
    payload: {script: "echo started > slow-started.txt; sleep 4; echo 2 >> slow.txt"}
    depends_on: [first]
  - id: last
    executor_type: command_executor
    payload: {script: "cat first.txt slow.txt > last.txt"}
    depends_on: [slow]
"""

QUICK = (
    'name: {name}\ntasks:\n  - {{id: {task}, executor_type: command_executor, payload: {{argv: ["true"]}}}}\n'
)


def _librarian(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "LIBRARIAN_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    for name in ("LIBRARIAN_BROKER_URL", "LIBRARIAN_DATABASE_URL"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-m", "librarian.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _killed_mid_task(tmp_path: Path) -> tuple[Path, Path, str]:
    """Run the workflow embedded, kill -9 the process while ``slow`` runs; the home, workspace and id."""
    home = tmp_path / "home"
    path = tmp_path / "slow.yaml"
    path.write_text(WORKFLOW)
    process = _librarian(home, "workflow", "run", str(path))
    workspaces = home / "workspaces"
    assert wait_for(lambda: any(workspaces.glob("*/slow-started.txt")), 60.0), process.communicate(timeout=5)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    workspace = next(workspaces.glob("*/slow-started.txt")).parent
    with Runtime(Settings(home=home)) as runtime:
        (listed,) = runtime.list()
        assert listed["status"] == "running"  # what the kill left
    return home, workspace, listed["workflow_id"]


def test_workflow_resume_finishes_a_killed_run_without_repeating_finished_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, workspace, workflow_id = _killed_mid_task(tmp_path)
    monkeypatch.setenv("LIBRARIAN_HOME", str(home))
    resumed = CliRunner().invoke(app, ["workflow", "resume", workflow_id, "--json"])
    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["status"] == "success"
    assert (workspace / "last.txt").read_text() == "1\n2\n"
    assert (workspace / "first.txt").read_text() == "1\n"  # the finished task did not run again
    with Runtime(Settings(home=home)) as runtime:
        events = [event["kind"] for event in runtime.status(workflow_id).to_dict()["events"]]
    assert "lease_released" in events


def test_the_next_embedded_start_resumes_an_orphaned_workflow(tmp_path: Path) -> None:
    home, workspace, workflow_id = _killed_mid_task(tmp_path)
    with Runtime(Settings(home=home)) as runtime:
        runtime.start()
        report = runtime.wait(workflow_id, timeout=60)
    assert report.status == "success" and (workspace / "last.txt").read_text() == "1\n2\n"


def test_resume_refuses_a_finished_workflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIBRARIAN_HOME", str(tmp_path / "home"))
    path = tmp_path / "quick.yaml"
    path.write_text(QUICK.format(name="quick", task="a"))
    ran = CliRunner().invoke(app, ["workflow", "run", str(path), "--json"])
    workflow_id = json.loads(ran.stdout)["workflow_id"]
    again = CliRunner().invoke(app, ["workflow", "resume", workflow_id])
    assert again.exit_code == 1 and "is success, not running" in again.output


def test_a_retried_submission_with_its_key_returns_the_first_workflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARIAN_HOME", str(tmp_path / "home"))
    path = tmp_path / "quick.yaml"
    path.write_text(QUICK.format(name="quick", task="a"))
    runner = CliRunner()
    first = runner.invoke(app, ["workflow", "run", str(path), "--idempotency-key", "deploy-42", "--json"])
    second = runner.invoke(app, ["workflow", "run", str(path), "--idempotency-key", "deploy-42", "--json"])
    assert first.exit_code == second.exit_code == 0, second.output
    assert json.loads(first.stdout)["workflow_id"] == json.loads(second.stdout)["workflow_id"]
    listed = runner.invoke(app, ["workflow", "list", "--json"])
    assert len(json.loads(listed.stdout)) == 1
    path.write_text(QUICK.format(name="other", task="b"))
    conflict = runner.invoke(app, ["workflow", "run", str(path), "--idempotency-key", "deploy-42"])
    assert conflict.exit_code == 1 and "was used for another workflow" in conflict.output


def test_only_dead_processes_of_this_machine_lose_their_leases() -> None:
    import socket

    host = socket.gethostname()
    assert owner_is_gone(f"runtime@{host}:999999999:abcdef")
    assert not owner_is_gone(f"runtime@{host}:{os.getpid()}:abcdef")  # this process
    assert not owner_is_gone(f"runtime@{host}:1:abcdef")  # alive (init)
    assert not owner_is_gone("runtime@another-host:999999999:abcdef")  # cannot tell: lease expiry decides
    assert not owner_is_gone(None)


def test_a_killed_run_is_resumed_over_rest_and_mcp_refuses_a_finished_one(tmp_path: Path) -> None:
    home, workspace, workflow_id = _killed_mid_task(tmp_path)
    with Librarian(Settings(home=home)) as lib:
        client = TestClient(create_app(lib))
        resumed = client.post(f"/workflows/{workflow_id}/resume")
        assert resumed.status_code == 200 and resumed.json()["status"] in ("running", "success")
        done = client.get(f"/workflows/{workflow_id}", params={"wait_seconds": 60}).json()
        assert done["status"] == "success" and (workspace / "last.txt").read_text() == "1\n2\n"
        assert client.post(f"/workflows/{workflow_id}/resume").status_code == 409
        assert client.post("/workflows/00000000-0000-0000-0000-000000000000/resume").status_code == 404

        async def over_mcp() -> str:
            async with Client(create_mcp_server(lib)) as session:
                result = await session.call_tool("resume_workflow", {"workflow_id": workflow_id})
            assert result.is_error
            return str(result.content[0].text)  # type: ignore[union-attr]

        assert "is success, not running" in anyio.run(over_mcp)
