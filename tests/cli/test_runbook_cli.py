"""``librarian runbook`` as real subprocesses: add, validate, find, run (bash steps in the sandbox),
answer, approve, step by step, history and statistics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_cli import run

EXIT_WAITING = 4

HELLO = """\
name: hello
description: Greets someone, then asks a person to confirm the greeting.
trigger_patterns:
  symptoms: [greeting missing]
steps:
  - step: 1
    title: greet
    action_type: bash
    command: echo hello {{who}}
    extract:
      word: "regex:hello (\\\\w+)"
  - step: 2
    title: check
    action_type: conditional
    condition: "{{word}} == 'world'"
    if_true: 3
    if_false: abort
  - step: 3
    title: confirm
    action_type: manual
    prompt: "Confirm {{word}}"
    final_step: true
"""

GATED = """\
name: gated restart
steps:
  - step: 1
    title: ask
    action_type: approval
    prompt: "Restart {{service}}?"
    on_failure: 3
  - step: 2
    title: restart
    action_type: bash
    command: echo restarting {{service}}
    final_step: true
  - step: 3
    title: escalate
    action_type: manual
    prompt: Tell the on-call engineer
    final_step: true
"""

# Two problems past the schema: both must be reported, each naming its step and field.
BROKEN = """\
name: broken
steps:
  - step: 1
    title: greet
    action_type: bash
  - step: 2
    title: confirm
    action_type: manual
    prompt: ok?
    condition: "1 == 1"
    final_step: true
"""


def data(home: Path, *args: str, check: int | None = 0) -> Any:
    return json.loads(run(home, *args, "--json", check=check).stdout)


def added(home: Path, tmp_path: Path, name: str, text: str) -> int:
    file = tmp_path / f"{name}.yaml"
    file.write_text(text)
    return int(data(home, "runbook", "add", str(file))["id"])


def test_add_validate_import_list_show_and_find(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "hello.yaml").write_text(HELLO)
    (tmp_path / "broken.yaml").write_text(BROKEN)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "gated.yaml").write_text(GATED)
    (folder / "broken.yaml").write_text(BROKEN)

    first = data(home, "runbook", "add", str(tmp_path / "hello.yaml"))
    again = data(home, "runbook", "add", str(tmp_path / "hello.yaml"))
    valid = data(home, "runbook", "validate", str(tmp_path / "hello.yaml"))
    invalid = run(home, "runbook", "validate", str(tmp_path / "broken.yaml"), check=1)
    imported = run(home, "runbook", "import", str(folder), check=3)  # 3: one file was refused
    listed = data(home, "runbook", "list")
    shown = data(home, "runbook", "show", str(first["id"]))
    page = run(home, "runbook", "show", str(first["id"])).stdout
    found = data(home, "runbook", "find", "the greeting is missing")

    assert first["change"] == "created" and again["change"] == "unchanged" and again["version"] == 1
    assert valid["valid"] is True and valid["required_variables"] == ["who"]
    assert "step 1 ('greet'), field command: a bash step needs one" in invalid.stderr
    assert "step 2 ('confirm'), field condition: not used by a manual step" in invalid.stderr
    assert "1 created" in imported.stdout and "broken.yaml" in imported.stderr
    assert [row["name"] for row in listed] == ["gated restart", "hello"]
    assert [step["action"] for step in shown["steps"]] == [
        "echo hello {{who}}",
        "{{word}} == 'world'",
        "Confirm {{word}}",
    ]
    assert "if_false: abort" in page and "Confirm {{word}}" in page
    assert found["matches"][0]["id"] == first["id"] and found["runbook"]["name"] == "hello"


def test_run_waits_for_a_person_then_history_and_stats_show_it_completed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runbook_id = added(home, tmp_path, "hello", HELLO)

    waiting = run(home, "runbook", "run", str(runbook_id), "--var", "who=world", check=EXIT_WAITING)
    execution_id = data(home, "runbook", "history", "--status", "waiting")[0]["id"]
    started = data(home, "runbook", "execution", execution_id)
    answered = data(home, "runbook", "answer", execution_id, "greeting confirmed")
    closed = data(home, "runbook", "close", execution_id, "--outcome", "resolved", "--rating", "4")
    history = data(home, "runbook", "history", "--runbook", str(runbook_id))
    stats = data(home, "runbook", "stats", str(runbook_id))

    assert f'librarian runbook answer {execution_id} "..."' in waiting.stdout
    assert "Confirm world" in waiting.stdout
    assert started["waiting_for"]["kind"] == "manual" and started["waiting_for"]["step"] == 3
    assert [(s["step"], s["status"]) for s in started["steps"]] == [
        (1, "succeeded"),
        (2, "succeeded"),
        (3, "waiting"),
    ]
    assert started["steps"][0]["output"].strip() == "hello world" and started["steps"][1]["output"] == "true"
    assert answered["status"] == "completed" and answered["steps"][2]["output"] == "greeting confirmed"
    assert closed["outcome"] == "resolved" and closed["effectiveness_rating"] == 4
    assert [(row["id"], row["status"]) for row in history] == [(execution_id, "completed")]
    assert (stats["execution_count"], stats["success_count"], stats["average_rating"]) == (1, 1, 4.0)
    assert [(step["step"], step["runs"], step["succeeded"]) for step in stats["steps"]] == [
        (1, 1, 1),
        (2, 1, 1),
        (3, 1, 1),
    ]


def test_a_condition_that_aborts_fails_the_run_and_a_bad_var_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runbook_id = added(home, tmp_path, "hello", HELLO)

    failed = data(home, "runbook", "run", str(runbook_id), "--var", "who=moon", check=1)
    malformed = run(home, "runbook", "run", str(runbook_id), "--var", "who", check=1)
    missing = run(home, "runbook", "run", str(runbook_id), check=1)

    assert failed["status"] == "failed"
    assert [s["output"].strip() for s in failed["steps"]] == ["hello moon", "false"]
    assert "--var 'who': give NAME=VALUE" in malformed.stderr
    assert "who has no value" in missing.stderr
    assert data(home, "runbook", "stats", str(runbook_id))["success_count"] == 0


def test_dry_run_renders_the_steps_and_follows_assumed_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runbook_id = added(home, tmp_path, "hello", HELLO)

    unknown = data(home, "runbook", "dry-run", str(runbook_id), "--var", "who=moon")
    assumed = data(
        home, "runbook", "dry-run", str(runbook_id), "--var", "who=moon", "--assume", "word=planet"
    )
    bare = data(home, "runbook", "dry-run", str(runbook_id))

    assert unknown["steps"][0]["command"] == "echo hello moon" and unknown["missing_variables"] == []
    assert "undetermined" in unknown["path"][1]
    assert assumed["steps"][2]["prompt"] == "Confirm planet"
    assert assumed["path"][1]["branch"] == "if_false" and assumed["path"][1]["next"] == "abort"
    assert bare["missing_variables"] == ["who"]
    assert data(home, "runbook", "history") == []  # nothing ran


def test_approval_is_approved_or_rejected_and_a_run_can_be_cancelled(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runbook_id = added(home, tmp_path, "gated", GATED)

    asked = data(home, "runbook", "run", str(runbook_id), "--var", "service=web", check=EXIT_WAITING)
    shown = run(home, "runbook", "execution", asked["id"]).stdout
    not_an_answer = run(home, "runbook", "answer", asked["id"], "yes", check=1)
    approved = data(home, "runbook", "approve", asked["id"], "--comment", "go ahead")
    other = data(home, "runbook", "run", str(runbook_id), "--var", "service=db", check=EXIT_WAITING)
    rejected = data(
        home, "runbook", "approve", other["id"], "--reject", "--comment", "not now", check=EXIT_WAITING
    )
    cancelled = data(home, "runbook", "cancel", other["id"])

    assert asked["waiting_for"]["kind"] == "approval" and asked["waiting_for"]["prompt"] == "Restart web?"
    assert f"librarian runbook approve {asked['id']} --reject" in shown
    assert "waits for an approval" in not_an_answer.stderr
    assert approved["status"] == "completed"
    assert approved["steps"][1]["output"].strip() == "restarting web"
    assert rejected["steps"][0]["status"] == "failed" and "not now" in rejected["steps"][0]["error"]
    assert rejected["waiting_for"]["step"] == 3  # its on_failure: escalate to a person
    assert cancelled["status"] == "cancelled"
    assert [row["id"] for row in data(home, "runbook", "history", "--status", "cancelled")] == [other["id"]]


def test_step_by_step_runs_one_step_per_call(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runbook_id = added(home, tmp_path, "hello", HELLO)

    started = run(home, "runbook", "run", str(runbook_id), "--var", "who=world", "--step-by-step")
    execution_id = data(home, "runbook", "history")[0]["id"]
    first = data(home, "runbook", "step", execution_id)
    second = data(home, "runbook", "step", execution_id)
    third = data(home, "runbook", "step", execution_id, check=EXIT_WAITING)
    done = data(home, "runbook", "step", execution_id, "--answer", "confirmed")

    assert f"librarian runbook step {execution_id}" in started.stdout
    assert (first["status"], [s["step"] for s in first["steps"]]) == ("running", [1])
    assert first["variables"]["word"] == "world"
    assert (second["status"], second["current_step_number"]) == ("running", 3)
    assert third["waiting_for"]["kind"] == "manual"
    assert done["status"] == "completed" and done["steps"][2]["output"] == "confirmed"
