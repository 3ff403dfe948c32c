"""``librarian workflow run|status|list|cancel`` and ``librarian worker`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from librarian.cli.main import app
from librarian.config import Settings
from librarian.runtime.engine import Runtime
from librarian.runtime.spec import WorkflowBuilder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("LIBRARIAN_HOME", str(path))
    monkeypatch.delenv("LIBRARIAN_BROKER_URL", raising=False)
    monkeypatch.delenv("LIBRARIAN_DATABASE_URL", raising=False)
    return path


def write_workflow(tmp_path: Path, fail: bool = False) -> Path:
    path = tmp_path / "hello.yaml"
    last = "sh -c 'exit 7'" if fail else "cat greeting.txt"
    path.write_text(
        "name: hello\n"
        "goal: greet\n"
        "tasks:\n"
        "  - id: write\n"
        "    executor_type: file_writer\n"
        "    payload: {path: greeting.txt, content: hi}\n"
        "  - id: read\n"
        "    executor_type: command_executor\n"
        f'    payload: {{script: "{last}"}}\n'
        "    depends_on: [write]\n",
        encoding="utf-8",
    )
    return path


def test_run_wait_json_then_status_and_list(home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    ran = runner.invoke(app, ["workflow", "run", str(write_workflow(tmp_path)), "--wait", "--json"])
    assert ran.exit_code == 0, ran.output
    report = json.loads(ran.stdout)
    assert report["status"] == "success" and report["total_reward"] == 2.0
    workflow_id = report["workflow_id"]

    status = runner.invoke(app, ["workflow", "status", workflow_id, "--json"])
    assert status.exit_code == 0 and json.loads(status.stdout)["tasks"][1]["key"] == "read"
    tree = runner.invoke(app, ["workflow", "status", workflow_id])
    assert tree.exit_code == 0 and "read" in tree.stdout and "success" in tree.stdout

    listed = runner.invoke(app, ["workflow", "list", "--json"])
    assert [row["workflow_id"] for row in json.loads(listed.stdout)] == [workflow_id]


def test_a_failed_workflow_exits_1_and_shows_why(home: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["workflow", "run", str(write_workflow(tmp_path, fail=True))])
    assert result.exit_code == 1
    assert "failed" in result.stdout and "exit" in result.stdout


def test_cancel_a_submitted_workflow(home: Path, tmp_path: Path) -> None:
    # With a broker URL the runtime only submits; nobody runs it, so it can be cancelled.
    settings = Settings(home=home, broker_url="amqp://guest:guest@127.0.0.1:5672/")
    with Runtime(settings) as runtime:
        workflow_id = runtime.submit(
            WorkflowBuilder("idle").task("x", "command_executor", {"argv": ["true"]}).build()
        )
    result = CliRunner().invoke(app, ["workflow", "cancel", workflow_id, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"workflow_id": workflow_id, "status": "cancelled"}


def test_errors_are_reported_on_stderr_with_exit_1(home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["workflow", "status", "00000000-0000-0000-0000-000000000000"])
    assert missing.exit_code == 1 and "no workflow" in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks:\n  - id: a\n    executor_type: teleporter\n    payload: {}\n", encoding="utf-8")
    refused = runner.invoke(app, ["workflow", "run", str(bad)])
    assert refused.exit_code == 1 and "teleporter" in refused.stderr
    no_broker = runner.invoke(app, ["worker", "--role", "executor"])
    assert no_broker.exit_code == 1 and "LIBRARIAN_BROKER_URL" in no_broker.stderr


def test_a_question_exits_4_and_answer_resumes_the_workflow(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "needs-input.yaml"
    path.write_text(
        "name: needs-input\n"
        "tasks:\n"
        "  - id: read\n"
        "    executor_type: command_executor\n"
        "    payload: {argv: [cat, data.txt], expect: {stdout_contains: '42'}}\n",
        encoding="utf-8",
    )
    correctors = ["--correctors", "tests.runtime.clarifying:correctors"]
    runner = CliRunner()
    asked = runner.invoke(app, ["workflow", "run", str(path), *correctors])
    assert asked.exit_code == 4, asked.output
    assert "What should data.txt contain?" in asked.stdout and "librarian workflow answer" in asked.stdout
    workflow_id = json.loads(runner.invoke(app, ["workflow", "list", "--json"]).stdout)[0]["workflow_id"]
    status = json.loads(runner.invoke(app, ["workflow", "status", workflow_id, "--json"]).stdout)
    assert status["status"] == "paused" and status["question"]["task"] == "read"

    answered = runner.invoke(app, ["workflow", "answer", workflow_id, "42", *correctors, "--json"])
    assert answered.exit_code == 0, answered.output
    assert json.loads(answered.stdout)["status"] == "success"
    again = runner.invoke(app, ["workflow", "answer", workflow_id, "42"])
    assert again.exit_code == 1 and "not waiting for" in again.stderr


def test_the_fix_learned_from_an_answer_is_listed_shown_and_retired(home: Path, tmp_path: Path) -> None:
    """pip moved --not-required from freeze to list: no docs, no LLM, so the loop asks; the answer works
    and becomes a verified fix, which ``librarian fixes`` shows and retires."""
    path = tmp_path / "leaves.yaml"
    path.write_text(
        "name: leaves\n"
        "tasks:\n"
        "  - id: leaves\n"
        "    executor_type: command_executor\n"
        "    payload:\n"
        "      argv: [python, -m, pip, freeze, --not-required]\n"
        "      expect: {stdout_contains: Package}\n",
        encoding="utf-8",
    )
    runner = CliRunner()
    asked = runner.invoke(app, ["workflow", "run", str(path)])
    assert asked.exit_code == 4, asked.output
    workflow_id = json.loads(runner.invoke(app, ["workflow", "list", "--json"]).stdout)[0]["workflow_id"]
    answered = runner.invoke(app, ["workflow", "answer", workflow_id, "pip list --not-required", "--json"])
    assert answered.exit_code == 0, answered.output

    listed = json.loads(runner.invoke(app, ["fixes", "list", "--json"]).stdout)
    [fix] = listed["fixes"]
    assert fix["fixed_template"][-2:] == ["list", "--not-required"] and fix["successes"] == 1
    shown = runner.invoke(app, ["fixes", "show", str(fix["id"])])
    assert shown.exit_code == 0 and "1 succeeded, 0 failed" in shown.stdout
    strategies = json.loads(runner.invoke(app, ["fixes", "strategies", "--json"]).stdout)["strategies"]
    assert strategies and all(row["trials"] >= 1 for row in strategies)

    no_reason = runner.invoke(app, ["fixes", "retire", str(fix["id"]), "--reason", " "])
    retired = runner.invoke(app, ["fixes", "retire", str(fix["id"]), "--reason", "wrong interpreter"])
    assert no_reason.exit_code == 1 and "reason" in no_reason.stderr
    assert retired.exit_code == 0 and "will not be reused" in retired.stdout
    assert json.loads(runner.invoke(app, ["fixes", "list", "--json"]).stdout)["fixes"] == []
    table = runner.invoke(app, ["fixes", "list", "--retired"])
    assert "(retired)" in table.stdout
    missing = runner.invoke(app, ["fixes", "show", "999"])
    assert missing.exit_code == 1 and "no verified fix 999" in missing.stderr
