"""No task outlives its worker: the process groups of running tasks are killed when the worker stops."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from librarian.errors import BackendUnavailableError
from librarian.runtime.sandbox import EnvironmentManager, ProcessOutcome, SandboxLimits, kill_all_sandboxes
from librarian.runtime.spec import WorkflowBuilder
from librarian.runtime.store import get_workflow, workflow_tasks
from tests.processes import process_gone, wait_for
from tests.runtime.conftest import RuntimeFactory

# The task records the pid of the program that then runs for a minute (``exec``: same process).
LONG_TASK = ["sh", "-c", "echo $$ > pid.txt; exec sleep 60"]


def _pid_in(path: Path, seconds: float = 10.0) -> int:
    assert wait_for(lambda: path.is_file() and path.read_text().strip(), seconds), f"{path} never written"
    text = path.read_text().strip()
    return int(text) if text.isdecimal() else 0


def _running(marker: str) -> list[int]:
    """Machine pids of the processes whose arguments include ``marker``."""
    return [
        process.pid
        for process in psutil.process_iter(["cmdline", "status"])
        if marker in (process.info["cmdline"] or []) and process.info["status"] != psutil.STATUS_ZOMBIE
    ]


@pytest.fixture
def manager(tmp_path: Path) -> EnvironmentManager:
    return EnvironmentManager(tmp_path / "workspaces", limits=SandboxLimits(timeout_seconds=120))


def _run_in_thread(manager: EnvironmentManager, outcomes: list[ProcessOutcome]) -> threading.Thread:
    workspace = manager.workspace_for("wf-1")
    thread = threading.Thread(target=lambda: outcomes.append(manager.run(LONG_TASK, workspace)), daemon=True)
    thread.start()
    return thread


def test_killing_every_sandbox_ends_a_running_task_at_once(manager: EnvironmentManager) -> None:
    outcomes: list[ProcessOutcome] = []
    thread = _run_in_thread(manager, outcomes)
    pid = _pid_in(manager.root / "wf-1" / "pid.txt")
    assert not process_gone(pid)
    assert kill_all_sandboxes() >= 1
    assert wait_for(lambda: process_gone(pid), 2.0), "the task's process survived the kill"
    thread.join(2.0)
    assert not thread.is_alive() and outcomes[0].exit_code == -9 and not outcomes[0].timed_out
    # Nothing is left registered, and the manager still runs programs afterwards.
    assert manager.kill_running() == 0
    assert manager.run(["echo", "still here"], manager.workspace_for("wf-1")).stdout == "still here\n"


def test_shutdown_kills_running_tasks_and_refuses_new_ones(manager: EnvironmentManager) -> None:
    outcomes: list[ProcessOutcome] = []
    thread = _run_in_thread(manager, outcomes)
    pid = _pid_in(manager.root / "wf-1" / "pid.txt")
    assert manager.shutdown() == 1
    assert wait_for(lambda: process_gone(pid), 2.0)
    thread.join(2.0)
    assert manager.closed and outcomes[0].exit_code == -9
    with pytest.raises(BackendUnavailableError, match="shutting down"):
        manager.run(["true"], manager.workspace_for("wf-1"))


def test_a_task_starting_as_the_kill_strikes_is_killed_as_it_registers(
    manager: EnvironmentManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A program runs before it can be registered: a kill in between must not miss it.
    kills: list[int] = []
    real_start = manager._start

    def start_then_kill(*args: Any) -> Any:
        program = real_start(*args)
        kills.append(manager.kill_running())
        return program

    monkeypatch.setattr(manager, "_start", start_then_kill)
    outcome = manager.run(["sleep", "60"], manager.workspace_for("wf-1"), timeout_seconds=10)
    assert kills == [1], "the starting task was not counted"
    assert (outcome.exit_code, outcome.timed_out) == (-9, False), "the kill missed the starting task"


def test_the_exit_hook_kills_the_tasks_of_a_process_that_exits(tmp_path: Path) -> None:
    """A real interpreter exits while a daemon thread runs a sandboxed task: the hook kills it."""
    program = textwrap.dedent(
        f"""
        import threading, time
        from pathlib import Path
        from librarian.runtime.sandbox import EnvironmentManager
        manager = EnvironmentManager(Path({str(tmp_path / "ws")!r}))
        workspace = manager.workspace_for("wf")
        threading.Thread(target=manager.run, args=({LONG_TASK!r}, workspace), daemon=True).start()
        while not (workspace.root / "pid.txt").is_file() or not (workspace.root / "pid.txt").read_text():
            time.sleep(0.01)
        """
    )
    subprocess.run([sys.executable, "-c", program], check=True, timeout=30)
    pid = int((tmp_path / "ws" / "wf" / "pid.txt").read_text())
    assert wait_for(lambda: process_gone(pid), 2.0), "the task outlived the process that started it"


def test_stopping_the_workers_kills_a_long_task_instead_of_waiting_for_it(
    open_runtime: RuntimeFactory,
) -> None:
    runtime = open_runtime(runtime_task_timeout_seconds=120.0)
    # The runtime isolates tasks: inside its PID namespace a task's $$ is not its pid on the machine,
    # so the program is found by an argument no other process has.
    marker = f"60.{uuid.uuid4().int % 10**9:09d}"
    task = {"argv": ["sh", "-c", f"echo ready > pid.txt; exec sleep {marker}"]}
    spec = WorkflowBuilder("long", goal="sleep").task("nap", "command_executor", task).build()
    workflow_id = runtime.submit(spec)
    _pid_in(runtime.settings.home / "workspaces" / workflow_id / "pid.txt")
    assert wait_for(lambda: _running(marker), 10.0)
    pid = _running(marker)[0]
    started = time.monotonic()
    runtime.close()
    assert time.monotonic() - started < 5.0, "close() waited for the task instead of killing it"
    assert wait_for(lambda: process_gone(pid), 2.0), "the task outlived its workers"
    # The killed run was not reported as the task's failure: it stays in flight until its lease expires.
    runtime.engine.dispose()
    with runtime.sessions() as session:
        workflow = get_workflow(session, workflow_id)
        assert workflow.final_status == "running"
        assert [task.status for task in workflow_tasks(session, workflow.workflow_id)] == ["in_progress"]
