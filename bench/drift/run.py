"""Running one drift case: directly (to verify the case), and through ``librarian workflow run`` (to measure).

:func:`run_direct` runs a command line or Python code in a fresh directory with an environment's
``PATH``, the way the case's author checked it. :func:`run_workflow` writes the case as a workflow
file (a ``file_writer`` task per file, then the task itself with the environment's ``PATH``), runs it
with the real CLI in a data directory, then reads what happened from that directory's store: the
task's final output (for the check), the loop's timeline (research calls, the strategy that won, the
chain depth, documentation indexed on demand) and the event log (correction time: from the failure
being recorded to the corrected retry being scheduled, documentation indexing left out; and, apart,
the wait for the embedding model a new process loads once).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select

from bench.drift.cases import DriftCase
from bench.drift.envs import BuiltEnvironment
from librarian.config import Settings
from librarian.correction.timeline import STEP_KIND, read_timeline
from librarian.runtime.models import Task, TaskEvent
from librarian.storage.database import open_database
from librarian.storage.models import as_utc

__all__ = ["DirectRun", "WorkflowRun", "check_result", "run_direct", "run_workflow"]

MAIN_TASK = "task"


@dataclass(frozen=True)
class DirectRun:
    """A command or code run outside the runtime."""

    exit_code: int
    stdout: str
    stderr: str
    workspace: Path


@dataclass
class WorkflowRun:
    """One run of a case through ``librarian workflow run``, as measured."""

    case: str
    run: int
    status: str = "error"
    fixed: bool = False
    check_error: str = ""
    research_calls: int = 0
    corrections: list[dict[str, Any]] = field(default_factory=list)
    correction_seconds: list[float] = field(default_factory=list)
    correction_seconds_with_model_load: list[float] = field(default_factory=list)
    indexing_seconds: float = 0.0
    model_load_seconds: float = 0.0
    strategy: str | None = None
    depth: int = 0
    wall_seconds: float = 0.0
    workflow_id: str = ""
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)


def task_env(case: DriftCase, environment: BuiltEnvironment, services: dict[str, str]) -> dict[str, str]:
    """The variables the case's task runs with: its environment's ``PATH`` and the case's own."""
    env = {name: value.format(**services) for name, value in case.environment.env.items()}
    return {**env, "PATH": environment.path}


def run_direct(
    case: DriftCase,
    environment: BuiltEnvironment,
    services: dict[str, str],
    *,
    argv: list[str] | None = None,
    code: str | None = None,
    timeout: float = 120.0,
) -> DirectRun:
    """Run ``argv`` or ``code`` with the environment's ``PATH`` in a fresh directory holding the files
    (after the case's setup commands)."""
    workspace = Path(tempfile.mkdtemp(prefix=f"drift-{case.id}-"))
    for name, text in case.files.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    env = {"HOME": str(workspace), "LANG": "C.UTF-8", **task_env(case, environment, services)}
    if code is not None:
        script = workspace / "script.py"
        script.write_text(code, encoding="utf-8")
        python = "python3" if environment.manager == "pip" else sys.executable
        argv = [python, "-I", str(script)]
    assert argv is not None
    for setup in case.setup:
        tool = _which(setup[0], env["PATH"]) or setup[0]
        subprocess.run(
            [tool, *setup[1:]], cwd=workspace, env=env, capture_output=True, timeout=timeout, check=False
        )
    program = _which(argv[0], env["PATH"]) or argv[0]
    try:
        done = subprocess.run(
            [program, *argv[1:]], cwd=workspace, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return DirectRun(-9, "", f"timed out after {timeout:g}s", workspace)
    return DirectRun(done.returncode, done.stdout, done.stderr, workspace)


def check_result(case: DriftCase, run: DirectRun, services: dict[str, str]) -> str:
    """Run the case's check on a result; the empty string when it passes, else why it failed."""
    names = {
        "stdout": run.stdout,
        "stderr": run.stderr,
        "exit_code": run.exit_code,
        "workspace": run.workspace,
        "services": services,
    }
    try:
        exec(compile(case.check, f"<check of {case.id}>", "exec"), names)  # the case file is ours
    except Exception as exc:  # the check's own verdict, whatever it raises
        return f"{type(exc).__name__}: {exc}"[:500]
    return ""


def workflow_spec(case: DriftCase, environment: BuiltEnvironment, services: dict[str, str]) -> dict[str, Any]:
    """The case as a workflow file: one ``file_writer`` per file, the setup commands, then the task."""
    tasks: list[dict[str, Any]] = []
    for number, (name, text) in enumerate(sorted(case.files.items()), start=1):
        tasks.append(
            {
                "id": f"file-{number}",
                "executor_type": "file_writer",
                "payload": {"path": name, "content": text},
            }
        )
    env = task_env(case, environment, services)
    # Tasks run without a network unless they ask; a case that talks to a local service asks.
    network = {"network": True} if case.services else {}
    for number, argv in enumerate(case.setup, start=1):
        tasks.append(
            {
                "id": f"setup-{number}",
                "executor_type": "command_executor",
                "payload": {"argv": argv, "env": env, **network},
            }
        )
    payload = {**dict(case.task.payload), **network}
    payload["env"] = {**dict(payload.get("env") or {}), **env}
    tasks.append(
        {
            "id": MAIN_TASK,
            "executor_type": case.task.executor_type,
            "description": case.task.description,
            "payload": payload,
            "depends_on": [t["id"] for t in tasks],
        }
    )
    return {"name": case.id, "goal": case.task.description, "tasks": tasks}


def index_scopes(case: DriftCase, environment: BuiltEnvironment, data: Path) -> float:
    """Index the help of the case's ``docs.scopes`` with ``librarian ingest-cli``; the seconds it took.

    For a tool too large for the loop's bounded on-demand walk (the AWS CLI): the documentation a
    person would index before running such workflows. Nothing is done for other cases.
    """
    if not case.docs.scopes or case.docs.command is None:
        return 0.0
    argv = [
        str(Path(sys.executable).parent / "librarian"),
        "ingest-cli",
        case.docs.command,
        "--sdk",
        case.tool,
    ]
    for scope in case.docs.scopes:
        argv += ["--scope", scope]
    argv += ["--max-depth", "2", "--path", environment.path, "--json"]
    started = time.perf_counter()
    subprocess.run(argv, env=_cli_env(data), capture_output=True, text=True, check=False, timeout=1800)
    return round(time.perf_counter() - started, 1)


def _cli_env(data: Path) -> dict[str, str]:
    """The environment ``librarian`` runs with: the data directory, offline, no questions asked."""
    env = {
        **os.environ,
        "LIBRARIAN_HOME": str(data),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # The benchmark measures the loop on its own: no question may pause a workflow.
        "LIBRARIAN_CORRECTION_ASK_USER": "false",
    }
    env.pop("LIBRARIAN_DATABASE_URL", None)
    env.pop("LIBRARIAN_BROKER_URL", None)
    return env


def run_workflow(
    case: DriftCase,
    environment: BuiltEnvironment,
    services: dict[str, str],
    *,
    data: Path,
    run_number: int,
    timeout: float = 900.0,
) -> WorkflowRun:
    """Run the case with ``librarian workflow run`` in ``data``, then measure it (see the module docs)."""
    result = WorkflowRun(case.id, run_number)
    folder = data / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case.id}-{run_number}.yaml"
    path.write_text(
        yaml.safe_dump(workflow_spec(case, environment, services), sort_keys=False), encoding="utf-8"
    )
    env = _cli_env(data)
    librarian = str(Path(sys.executable).parent / "librarian")
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [librarian, "workflow", "run", str(path), "--json", "--timeout", str(timeout)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout + 120,
        )
    except subprocess.TimeoutExpired:
        result.error = f"librarian workflow run did not end within {timeout + 120:g}s"
        return result
    result.wall_seconds = round(time.perf_counter() - started, 3)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        result.error = f"exit {done.returncode}: {done.stderr.strip()[-800:]}"
        return result
    result.workflow_id = str(report.get("workflow_id"))
    result.status = str(report.get("status"))
    _measure(result, data)
    final = _final_output(data, result.workflow_id)
    if final is None:
        result.check_error = "the task has no output"
        return result
    exit_code, stdout, stderr = final
    workspace = data / "workspaces" / result.workflow_id
    result.check_error = check_result(case, DirectRun(exit_code, stdout, stderr, workspace), services)
    result.fixed = result.status == "success" and not result.check_error
    return result


def _measure(result: WorkflowRun, data: Path) -> None:
    """Research calls, corrections, chain depth, indexing and correction times, from the store."""
    settings = Settings(home=data)
    engine, sessions = open_database(settings.resolved_database_url)
    try:
        steps = [
            e
            for e in read_timeline(sessions, result.workflow_id)
            if e.kind == STEP_KIND and e.task == MAIN_TASK
        ]
        result.research_calls = sum(1 for e in steps if e.stage == "research")
        result.corrections = [
            {
                "strategy": e.data.get("strategy"),
                "source": e.data.get("source"),
                "depth": e.data.get("depth", 0),
                "shown": e.summary[:300],
            }
            for e in steps
            if e.stage == "correction"
        ]
        if result.corrections:
            result.strategy = str(result.corrections[-1]["strategy"])
            result.depth = max(int(c["depth"] or 0) for c in result.corrections)
        indexing = [float(e.data.get("seconds") or 0.0) for e in steps if e.stage == "docs"]
        result.indexing_seconds = round(sum(indexing), 3)
        loading = [float(e.data.get("seconds") or 0.0) for e in steps if e.stage == "warm_up"]
        result.model_load_seconds = round(sum(loading), 3)
        result.correction_seconds = _correction_seconds(
            sessions, result.workflow_id, steps, ("docs", "warm_up")
        )
        result.correction_seconds_with_model_load = _correction_seconds(
            sessions, result.workflow_id, steps, ("docs",)
        )
    finally:
        engine.dispose()


def _correction_seconds(
    sessions: Any, workflow_id: str, steps: list[Any], left_out: tuple[str, ...]
) -> list[float]:
    """Per correction: from the failure recorded to the corrected retry scheduled, without the time of
    the ``left_out`` steps (``docs``: indexing on demand; ``warm_up``: waiting for the model to load)."""
    with sessions() as session:
        task = session.scalar(
            select(Task).where(Task.workflow_id == uuid.UUID(workflow_id), Task.task_key == MAIN_TASK)
        )
        if task is None:
            return []
        events = list(
            session.scalars(select(TaskEvent).where(TaskEvent.task_id == task.task_id).order_by(TaskEvent.id))
        )
    docs = [(as_utc(e.at), float(e.data.get("seconds") or 0.0)) for e in steps if e.stage in left_out]
    seconds: list[float] = []
    failed_at = None
    for event in events:
        if event.kind == "result_applied" and event.to_status == "failed":
            failed_at = as_utc(event.at)
        elif event.kind == "surgery" and failed_at is not None:
            scheduled = as_utc(event.at)
            indexing = sum(s for at, s in docs if failed_at <= at <= scheduled)
            seconds.append(round(max(0.0, (scheduled - failed_at).total_seconds() - indexing), 4))
            failed_at = None
    return seconds


def _final_output(data: Path, workflow_id: str) -> tuple[int, str, str] | None:
    settings = Settings(home=data)
    engine, sessions = open_database(settings.resolved_database_url)
    try:
        with sessions() as session:
            task = session.scalar(
                select(Task).where(Task.workflow_id == uuid.UUID(workflow_id), Task.task_key == MAIN_TASK)
            )
            notes = dict(task.feedback_notes or {}) if task is not None else None
    finally:
        engine.dispose()
    if notes is None:
        return None
    details = notes.get("details") if isinstance(notes.get("details"), dict) else {}
    assert isinstance(details, dict)
    stdout = str(notes.get("stdout") or details.get("stdout") or "")
    stderr = str(notes.get("stderr") or details.get("stderr") or "")
    code = details.get("exit_code")
    return (
        (int(code) if isinstance(code, int) else (0 if notes.get("status") == "success" else 1)),
        stdout,
        stderr,
    )


def _which(program: str, path: str) -> str | None:
    return shutil.which(program, path=path) if "/" not in program else program
