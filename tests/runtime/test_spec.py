"""Workflow files: YAML and JSON accepted, errors name the file, the task and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from librarian.errors import InvalidInputError
from librarian.runtime.spec import WorkflowBuilder, load_spec

KNOWN = {"command_executor", "file_writer", "code_executor", "api_caller"}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_yaml_workflow_loads_with_tasks_in_dependency_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "site.yaml",
        """
name: site
goal: build the site
tasks:
  - id: publish
    executor_type: command_executor
    payload: {argv: [echo, publish]}
    depends_on: [build]
  - id: build
    executor_type: command_executor
    payload: {argv: [echo, build]}
""",
    )
    spec = load_spec(path, known_executor_types=KNOWN)
    assert spec.name == "site" and spec.goal == "build the site"
    assert [task.id for task in spec.tasks] == ["build", "publish"]
    assert spec.tasks[1].depends_on == ("build",)


def test_a_json_workflow_without_a_name_is_named_after_its_file(tmp_path: Path) -> None:
    document = {
        "tasks": [{"id": "a", "executor_type": "file_writer", "payload": {"path": "x", "content": ""}}]
    }
    spec = load_spec(write(tmp_path, "nightly.json", json.dumps(document)))
    assert spec.name == "nightly" and spec.goal == "nightly"


def test_a_schema_error_names_the_file_the_task_and_the_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.yaml",
        "tasks:\n  - id: ok\n    executor_type: command_executor\n    payload: {argv: [true]}\n"
        "  - id: broken\n    executor_type: command_executor\n    payload: not-an-object\n",
    )
    with pytest.raises(InvalidInputError) as caught:
        load_spec(path)
    message = caught.value.message
    assert str(path) in message and "'broken'" in message and "payload" in message


def test_a_missing_required_field_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "tasks:\n  - id: lonely\n    payload: {}\n")
    with pytest.raises(InvalidInputError, match=r"'lonely'.*executor_type"):
        load_spec(path)


def test_invalid_yaml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "tasks:\n  - id: [unclosed\n")
    with pytest.raises(InvalidInputError, match=r"bad.yaml: invalid YAML at line \d+"):
        load_spec(path)


def test_an_unknown_dependency_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "w.yaml",
        "tasks:\n  - id: a\n    executor_type: command_executor\n    payload: {}\n    depends_on: [ghost]\n",
    )
    with pytest.raises(InvalidInputError, match=r"task 'a'.*depends_on: unknown task 'ghost'"):
        load_spec(path)


def test_a_dependency_cycle_is_refused_and_shown() -> None:
    builder = (
        WorkflowBuilder("loop")
        .task("a", "command_executor", {}, depends_on=["c"])
        .task("b", "command_executor", {}, depends_on=["a"])
        .task("c", "command_executor", {}, depends_on=["b"])
    )
    with pytest.raises(InvalidInputError, match=r"dependency cycle .*->"):
        builder.build()


def test_a_repeated_task_id_and_an_unknown_executor_type_are_refused() -> None:
    repeated = WorkflowBuilder("w").task("a", "command_executor", {}).task("a", "command_executor", {})
    with pytest.raises(InvalidInputError, match="repeated task id"):
        repeated.build()
    unknown = WorkflowBuilder("w").task("a", "teleporter", {})
    with pytest.raises(InvalidInputError, match="unknown executor type 'teleporter'"):
        unknown.build(known_executor_types=KNOWN)


def test_the_builder_round_trips_through_the_file_format(tmp_path: Path) -> None:
    spec = (
        WorkflowBuilder("hello", goal="greet twice")
        .task("greet", "command_executor", {"argv": ["echo", "hi"]}, description="say hi")
        .task("again", "command_executor", {"argv": ["echo", "again"]}, depends_on=["greet"])
        .build(known_executor_types=KNOWN)
    )
    reloaded = load_spec(write(tmp_path, "hello.json", json.dumps(spec.to_dict())))
    assert reloaded == spec
