"""The planner (a goal becomes a workflow) and ``librarian workflow plan``, against a local fake LLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from librarian.cli.main import app
from librarian.errors import InvalidInputError
from librarian.llm import LLMOutputError
from librarian.llm.openai_compat import OpenAICompatibleLLM
from librarian.runtime.planner import plan_workflow
from tests.llm.fake_llm_server import FakeLLMServer

TYPES = ["command_executor", "file_writer"]

# What a model might answer for "write a greeting and check it": setup, step, verification.
PLANNED: dict[str, Any] = {
    "name": "greeting",
    "tasks": [
        {
            "id": "write",
            "description": "write the greeting",
            "executor_type": "file_writer",
            "payload": {"path": "greeting.txt", "content": "hello\n"},
        },
        {
            "id": "check",
            "description": "check the greeting",
            "executor_type": "command_executor",
            "payload": {"argv": ["cat", "greeting.txt"], "expect": {"stdout_contains": "hello"}},
            "depends_on": ["write"],
        },
    ],
}


def llm(server: FakeLLMServer) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(server.openai_url, "planner", backoff_seconds=0.0, timeout_seconds=5.0)


def test_a_goal_becomes_a_validated_workflow(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue(json.dumps(PLANNED))

    spec = plan_workflow(
        llm(fake_llm), "write a greeting and check it", known_executor_types=TYPES, context="sh is POSIX"
    )

    assert [task.id for task in spec.tasks] == ["write", "check"]
    assert spec.goal == "write a greeting and check it" and spec.name == "greeting"
    (request,) = fake_llm.requests
    system, user = request.body["messages"][0]["content"], request.body["messages"][1]["content"]
    assert "verification" in system and '"depends_on"' in system  # instructions, then the schema
    assert "Goal: write a greeting and check it" in user
    assert "command_executor, file_writer" in user and "sh is POSIX" in user


def test_a_workflow_the_checks_refuse_is_sent_back_with_the_reason(fake_llm: FakeLLMServer) -> None:
    cyclic = json.loads(json.dumps(PLANNED))
    cyclic["tasks"][0]["depends_on"] = ["check"]
    fake_llm.queue(json.dumps(cyclic), json.dumps(PLANNED))

    spec = plan_workflow(llm(fake_llm), "greet", known_executor_types=TYPES)

    assert [task.id for task in spec.tasks] == ["write", "check"]
    repair = fake_llm.requests[1].body["messages"]
    assert repair[-1]["role"] == "user" and "cycle" in repair[-1]["content"]


def test_an_unknown_executor_type_until_the_limit_raises(fake_llm: FakeLLMServer) -> None:
    wrong = json.loads(json.dumps(PLANNED))
    wrong["tasks"][1]["executor_type"] = "shell"
    fake_llm.queue(*[json.dumps(wrong)] * 2)

    with pytest.raises(LLMOutputError, match=r"no usable workflow in 2 attempts.*shell"):
        plan_workflow(llm(fake_llm), "greet", known_executor_types=TYPES, max_attempts=2)


def test_answers_that_are_not_json_are_repaired(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue("Sure! I will write the greeting first.", "```json\n" + json.dumps(PLANNED) + "\n```")

    spec = plan_workflow(llm(fake_llm), "greet", known_executor_types=TYPES)

    assert len(spec.tasks) == 2 and len(fake_llm.requests) == 2


@pytest.mark.parametrize(("goal", "types"), [("  ", TYPES), ("greet", [])])
def test_an_empty_goal_or_no_executor_types_is_refused(
    fake_llm: FakeLLMServer, goal: str, types: list[str]
) -> None:
    with pytest.raises(InvalidInputError):
        plan_workflow(llm(fake_llm), goal, known_executor_types=types)
    assert fake_llm.requests == []


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("LIBRARIAN_HOME", str(path))
    for name in ("LIBRARIAN_BROKER_URL", "LIBRARIAN_DATABASE_URL", "LIBRARIAN_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    return path


def use_fake_llm(monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> None:
    monkeypatch.setenv("LIBRARIAN_LLM_PROVIDER", "openai")
    monkeypatch.setenv("LIBRARIAN_LLM_URL", server.openai_url)
    monkeypatch.setenv("LIBRARIAN_LLM_MODEL", "planner")


def test_cli_plan_saves_a_workflow_that_workflow_run_accepts(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLMServer
) -> None:
    use_fake_llm(monkeypatch, fake_llm)
    fake_llm.queue(json.dumps(PLANNED))
    saved = tmp_path / "greeting.yaml"

    planned = CliRunner().invoke(app, ["workflow", "plan", "write a greeting", "--output", str(saved)])

    assert planned.exit_code == 0, planned.output
    assert yaml.safe_load(saved.read_text())["tasks"][1]["depends_on"] == ["write"]
    ran = CliRunner().invoke(app, ["workflow", "run", str(saved), "--json"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["status"] == "success"


def test_cli_plan_run_executes_the_plan(
    home: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLMServer
) -> None:
    use_fake_llm(monkeypatch, fake_llm)
    fake_llm.queue(json.dumps(PLANNED))

    result = CliRunner().invoke(app, ["workflow", "plan", "write a greeting", "--run", "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "success" and [task["key"] for task in report["tasks"]] == ["write", "check"]


def test_cli_plan_prints_yaml_that_parses_back_whole(
    home: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLMServer
) -> None:
    use_fake_llm(monkeypatch, fake_llm)
    long = json.loads(json.dumps(PLANNED))
    long["tasks"][0]["payload"]["content"] = "a line much longer than any terminal is wide " * 5
    fake_llm.queue(json.dumps(long))

    result = CliRunner().invoke(app, ["workflow", "plan", "write a greeting"])

    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout)
    assert printed["tasks"][0]["payload"]["content"] == long["tasks"][0]["payload"]["content"]
    assert printed["goal"] == "write a greeting"


def test_cli_plan_without_an_llm_says_how_to_go_on(home: Path) -> None:
    result = CliRunner().invoke(app, ["workflow", "plan", "write a greeting"])

    assert result.exit_code == 1
    assert "needs an LLM" in result.stderr and "workflow run FILE" in result.stderr


def test_rest_plan_then_submit_runs_the_planned_workflow(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    from fastapi.testclient import TestClient

    from librarian.api import create_app
    from librarian.app import Librarian
    from librarian.config import Settings

    fake_llm.queue(json.dumps(PLANNED))
    settings = Settings(
        home=tmp_path / "home", llm_provider="openai", llm_url=fake_llm.openai_url, llm_model="planner"
    )
    with Librarian(settings) as lib, TestClient(create_app(lib)) as client:
        planned = client.post("/workflows/plan", json={"goal": "write a greeting", "context": "cat exists"})
        assert planned.status_code == 200, planned.text
        workflow = planned.json()["workflow"]
        ran = client.post("/workflows", json={"workflow": workflow, "wait_seconds": 60})

    assert workflow["goal"] == "write a greeting" and [t["id"] for t in workflow["tasks"]] == [
        "write",
        "check",
    ]
    assert "cat exists" in json.dumps(fake_llm.requests[0].body)
    assert ran.status_code == 201 and ran.json()["status"] == "success"
