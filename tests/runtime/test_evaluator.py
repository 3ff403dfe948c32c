"""The evaluator: output validation per executor type, and rewards read from configuration."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from librarian.config import Settings
from librarian.correction.triggers import WarningCheck, default_trigger_rules, load_trigger_rules
from librarian.errors import InvalidInputError
from librarian.runtime.contracts import ExecutionResult, TaskSpec, TaskStatus, Workspace
from librarian.runtime.evaluator import (
    Rewards,
    Validation,
    evaluate,
    json_mismatch,
    resolve_pointer,
    validate_output,
)
from librarian.runtime.executors import CodeExecutor, CommandExecutor, FileWriter
from librarian.runtime.executors.file_writer import READ_BACK_TEXT_BYTES
from librarian.runtime.sandbox import EnvironmentManager, SandboxLimits


def _custom_settings(home: Path) -> Settings:
    """Rewards deliberately unlike the defaults, to prove the evaluator reads configuration."""
    return Settings(
        home=home,
        runtime_reward_success=2.0,
        runtime_reward_success_after_retry=3.25,
        runtime_reward_invalid_output=-7.0,
        runtime_reward_failure=-4.0,
        runtime_reward_failure_per_retry=-0.25,
    )


@pytest.fixture
def rewards(tmp_path: Path) -> Rewards:
    return Rewards.from_settings(_custom_settings(tmp_path))


@pytest.fixture
def environment(tmp_path: Path) -> EnvironmentManager:
    return EnvironmentManager(tmp_path / "ws", limits=SandboxLimits(timeout_seconds=30, memory_mb=1024))


@pytest.fixture
def workspace(environment: EnvironmentManager) -> Workspace:
    return environment.workspace_for("wf-eval")


def _task(executor_type: str, **payload: Any) -> TaskSpec:
    return TaskSpec(task_id="t", workflow_id="wf-eval", executor_type=executor_type, payload=payload)


def _run(environment: EnvironmentManager, workspace: Workspace, task: TaskSpec) -> ExecutionResult:
    return CommandExecutor(environment).execute(task, workspace)


def test_rewards_come_from_settings(tmp_path: Path) -> None:
    custom = Rewards.from_settings(_custom_settings(tmp_path))
    assert custom == Rewards(2.0, 3.25, -7.0, -4.0, -0.25)
    defaults = Rewards.from_settings(Settings(home=tmp_path))
    assert (defaults.for_success(0), defaults.for_success(1), defaults.invalid_output) == (1.0, 1.5, -0.5)
    assert defaults.for_failure(2) == pytest.approx(-1.2)


def test_first_time_success(rewards: Rewards, environment: EnvironmentManager, workspace: Workspace) -> None:
    task = _task("command_executor", argv=["echo", "ready"], expect={"stdout_contains": "ready"})
    evaluation = evaluate(task, _run(environment, workspace, task), retries=0, rewards=rewards)
    assert evaluation.status is TaskStatus.SUCCESS
    assert evaluation.reward == 2.0
    assert evaluation.feedback["status"] == "success" and evaluation.feedback["stdout"] == "ready\n"


def test_success_after_a_retry(
    rewards: Rewards, environment: EnvironmentManager, workspace: Workspace
) -> None:
    task = _task("command_executor", argv=["true"])
    for retries in (1, 4):
        evaluation = evaluate(task, _run(environment, workspace, task), retries=retries, rewards=rewards)
        assert evaluation.status is TaskStatus.SUCCESS
        assert evaluation.reward == 3.25


def test_output_failing_validation_is_a_failure_with_the_invalid_output_reward(
    rewards: Rewards, environment: EnvironmentManager, workspace: Workspace
) -> None:
    task = _task(
        "command_executor", argv=["echo", "status: degraded"], expect={"stdout_regex": r"status: ok$"}
    )
    result = _run(environment, workspace, task)
    assert result.ok  # the command itself worked
    evaluation = evaluate(task, result, retries=2, rewards=rewards)
    assert evaluation.status is TaskStatus.FAILED
    assert evaluation.reward == -7.0
    feedback = evaluation.feedback
    assert feedback["status"] == "failed"
    assert feedback["error_type"] == "ValidationError"
    assert "does not match the pattern" in feedback["error_message"]
    assert feedback["details"]["stdout"] == "status: degraded\n"
    assert feedback["details"]["expect"] == {"stdout_regex": r"status: ok$"}


@pytest.mark.parametrize(("retries", "reward"), [(0, -4.0), (1, -4.25), (3, -4.75)])
def test_failure_reward_grows_with_retries(
    rewards: Rewards, environment: EnvironmentManager, workspace: Workspace, retries: int, reward: float
) -> None:
    task = _task("command_executor", argv=["/bin/sh", "-c", "echo denied >&2; exit 255"])
    evaluation = evaluate(task, _run(environment, workspace, task), retries=retries, rewards=rewards)
    assert evaluation.status is TaskStatus.FAILED
    assert evaluation.reward == pytest.approx(reward)
    assert evaluation.feedback["error_type"] == "CommandFailedError"
    assert evaluation.feedback["details"]["exit_code"] == 255


def test_negative_retries_are_refused(rewards: Rewards) -> None:
    result = ExecutionResult(ok=True, feedback={"status": "success"})
    with pytest.raises(InvalidInputError, match="retries"):
        evaluate(_task("file_writer"), result, retries=-1, rewards=rewards)


# --- command and code ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expect", "ok", "reason"),
    [
        ({}, True, ""),
        ({"stdout_contains": ["alpha", "gamma"]}, True, ""),
        ({"stdout_contains": "delta"}, False, "stdout does not contain 'delta'"),
        ({"stdout_regex": r"^beta$"}, True, ""),
        ({"stdout_regex": r"("}, False, "not a valid regular expression"),
        ({"stderr_contains": "warn"}, True, ""),
        ({"stderr_regex": r"^warn$"}, True, ""),
        ({"stderr_regex": r"^error"}, False, "stderr does not match the pattern"),
        ({"stderr_not_regex": r"(?i)warn"}, False, "stderr matches '(?i)warn', which it must not: 'warn'"),
        ({"stderr_not_regex": r"deprecated"}, True, ""),
        ({"stdout_not_regex": r"^beta$"}, False, "stdout matches '^beta$', which it must not"),
        ({"stdout_not_regex": r"["}, False, "expect.stdout_not_regex '[' is not a valid regular expression"),
        ({"allow_warnings": "yes"}, False, "expect.allow_warnings must be true or false"),
        ({"exit_code": 0}, True, ""),
        ({"stdout_contain": "alpha"}, False, "unknown expect key(s) stdout_contain"),
    ],
)
def test_command_validation(
    environment: EnvironmentManager, workspace: Workspace, expect: dict[str, Any], ok: bool, reason: str
) -> None:
    task = _task("command_executor", script="printf 'alpha\\nbeta\\ngamma\\n'; echo warn >&2", expect=expect)
    validation = validate_output(task, _run(environment, workspace, task))
    assert validation.ok is ok
    assert reason in validation.reason


def test_code_validation_uses_the_same_checks(environment: EnvironmentManager, workspace: Workspace) -> None:
    task = _task("code_executor", code="print(sum(range(10)))", expect={"stdout_regex": r"^45$"})
    result = CodeExecutor(environment).execute(task, workspace)
    assert validate_output(task, result) == Validation(True, "output meets the expectations")
    wrong = _task("code_executor", code="print(sum(range(10)))", expect={"stdout_regex": r"^46$"})
    assert not validate_output(wrong, result).ok


def test_a_failed_execution_is_never_valid(environment: EnvironmentManager, workspace: Workspace) -> None:
    task = _task("command_executor", argv=["false"])
    validation = validate_output(task, _run(environment, workspace, task))
    assert not validation.ok and "the execution failed" in validation.reason


# --- file_writer --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expect", "ok", "reason"),
    [
        ({}, True, ""),
        ({"content": "key = value\n"}, True, ""),
        ({"content": "key = other\n"}, False, "does not hold the expected content"),
        ({"sha256": hashlib.sha256(b"key = value\n").hexdigest().upper()}, True, ""),
        ({"sha256": "0" * 64}, False, "has SHA-256"),
        ({"contains": "= value"}, True, ""),
        ({"exists": False}, False, "exists, expected it not to"),
    ],
)
def test_file_validation_checks_what_the_executor_read_back(
    workspace: Workspace, expect: dict[str, Any], ok: bool, reason: str
) -> None:
    task = _task("file_writer", path="conf/app.ini", content="key = value\n", expect=expect)
    result = FileWriter().execute(task, workspace)
    validation = validate_output(task, result)
    assert validation.ok is ok
    assert reason in validation.reason


def test_file_validation_needs_no_access_to_the_workspace(workspace: Workspace) -> None:
    # The evaluator may run on another host: it checks what the executor read back, not the disk.
    task = _task("file_writer", path="conf/app.ini", content="key = value\n", expect={"contains": "value"})
    result = FileWriter().execute(task, workspace)
    shutil.rmtree(workspace.root)
    assert validate_output(task, result).ok


def test_a_big_file_is_checked_whole_through_its_digest(workspace: Workspace) -> None:
    content = "x" * (READ_BACK_TEXT_BYTES + 10) + "tail"
    task = _task("file_writer", path="big.txt", content=content, expect={"content": content})
    result = FileWriter().execute(task, workspace)
    assert result.output["text_truncated"] and len(result.output["text"]) == READ_BACK_TEXT_BYTES
    assert validate_output(task, result).ok
    other = _task("file_writer", path="big.txt", content=content, expect={"content": content[:-1]})
    assert "does not hold the expected content" in validate_output(other, result).reason
    tail = _task("file_writer", path="big.txt", content=content, expect={"contains": "tail"})
    assert "(its first megabyte)" in validate_output(tail, result).reason


def test_a_result_without_read_back_evidence_fails_validation() -> None:
    task = _task("file_writer", path="a.txt", content="x")
    result = ExecutionResult(ok=True, feedback={"status": "success"}, output={"path": "a.txt"})
    validation = validate_output(task, result)
    assert not validation.ok and "does not say what was read back" in validation.reason


# --- api_caller ---------------------------------------------------------------------------------


def _api_result(status: int, document: Any, body: str | None = None) -> ExecutionResult:
    output = {"status_code": status, "body": body if body is not None else str(document), "json": document}
    return ExecutionResult(
        ok=True, feedback={"status": "success", "notes": "", "stdout": "", "stderr": ""}, output=output
    )


DOCUMENT = {"name": "librarian", "count": 2, "items": [{"id": 1, "tags": ["a"]}, {"id": 2, "tags": []}]}


@pytest.mark.parametrize(
    ("expect", "ok", "reason"),
    [
        ({}, True, ""),
        ({"status": 200}, True, ""),
        ({"status": [201, 202]}, False, "HTTP status 200, expected [201, 202]"),
        ({"json": {"name": "librarian"}}, True, ""),
        ({"json": {"count": 2.0}}, True, ""),
        ({"json": {"count": True}}, False, "/count is 2, expected True"),
        ({"json": {"items": [{"id": 1}, {"id": 2}]}}, True, ""),
        ({"json": {"items": [{"id": 1}]}}, False, "expected an array of 1"),
        ({"json": {"missing": 1}}, False, "/missing is missing"),
        ({"json_pointer": {"/items/1/id": 2, "/items/0/tags/0": "a"}}, True, ""),
        ({"json_pointer": {"/items/5/id": 2}}, False, "nothing at '5'"),
        ({"json_schema": {"type": "object", "required": ["name", "count"]}}, True, ""),
        (
            {"json_schema": {"properties": {"count": {"type": "string"}}}},
            False,
            "breaks the schema at /count",
        ),
        ({"json_schema": {"type": "nonsense"}}, False, "not a valid JSON Schema"),
        ({"body_contains": "librarian"}, True, ""),
        ({"status_code": 200}, False, "unknown expect key(s) status_code"),
    ],
)
def test_api_validation(expect: dict[str, Any], ok: bool, reason: str) -> None:
    validation = validate_output(
        _task("api_caller", url="http://x", expect=expect), _api_result(200, DOCUMENT)
    )
    assert validation.ok is ok, validation.reason
    assert reason in validation.reason


def test_api_json_checks_need_a_json_body() -> None:
    task = _task("api_caller", url="http://x", expect={"json": {"a": 1}})
    validation = validate_output(task, _api_result(200, None, body="<html>oops</html>"))
    assert not validation.ok and "not a JSON document" in validation.reason


def test_api_default_expects_a_2xx_status() -> None:
    task = _task("api_caller", url="http://x")
    assert validate_output(task, _api_result(204, None, body="")).ok
    assert not validate_output(task, _api_result(302, None, body="")).ok


def test_json_helpers() -> None:
    assert resolve_pointer({"a/b": {"~k": [0, 7]}}, "/a~1b/~0k/1") == 7
    assert resolve_pointer(DOCUMENT, "") is DOCUMENT
    assert json_mismatch({"a": [1, {"b": None}]}, {"a": [1, {"b": None, "c": 3}], "d": 4}) is None
    assert json_mismatch({"a": "1"}, {"a": 1}) == "/a is 1, expected '1'"


# --- other executor types -----------------------------------------------------------------------


def test_a_new_executor_type_gets_its_own_validator(rewards: Rewards) -> None:
    result = ExecutionResult(ok=True, feedback={"status": "success"}, output={"rows": 3})
    plain = _task("sql_executor")
    assert validate_output(plain, result).ok
    checked = _task("sql_executor", expect={"rows": 4})
    assert "has no validator" in validate_output(checked, result).reason

    def rows(expect: Any, result: ExecutionResult) -> Validation:
        return Validation(result.output["rows"] == expect["rows"], f"{result.output['rows']} rows")

    evaluation = evaluate(checked, result, retries=0, rewards=rewards, validators={"sql_executor": rows})
    assert evaluation.status is TaskStatus.FAILED and evaluation.reward == -7.0
    assert evaluation.feedback["error_message"] == "3 rows"


# --- warnings on success --------------------------------------------------------------------------

IGNORED = (
    "printf 'sorted 2 files\\n'; "
    "echo 'W0501: The following deprecated CLI flags were used and ignored: --recursive!' >&2"
)


def test_a_success_that_warns_it_ignored_a_flag_is_a_failure(
    rewards: Rewards, environment: EnvironmentManager, workspace: Workspace
) -> None:
    check = WarningCheck(default_trigger_rules())
    task = _task("command_executor", script=IGNORED)
    result = _run(environment, workspace, task)
    assert result.ok  # exit code 0
    evaluation = evaluate(task, result, retries=1, rewards=rewards, warning_check=check)
    assert evaluation.status is TaskStatus.FAILED
    assert evaluation.reward == pytest.approx(-4.25)
    feedback = evaluation.feedback
    assert feedback["error_type"] == "IgnoredWarning"
    assert "used and ignored: --recursive!" in feedback["error_message"]
    details = feedback["details"]
    assert details["rule_id"] == "ignored-warning" and details["exit_code"] == 0 and details["succeeded"]
    assert details["stdout"] == "sorted 2 files\n" and "--recursive" in details["stderr"]
    # Without a warning check (or with the task's own opt-out) it is the success it always was.
    assert evaluate(task, result, retries=0, rewards=rewards).status is TaskStatus.SUCCESS
    allowed = _task("command_executor", script=IGNORED, expect={"allow_warnings": True})
    assert (
        evaluate(allowed, result, retries=0, rewards=rewards, warning_check=check).status
        is TaskStatus.SUCCESS
    )


def test_a_warning_rule_can_be_switched_on_for_deprecations(
    rewards: Rewards, environment: EnvironmentManager, workspace: Workspace, tmp_path: Path
) -> None:
    """Only "ignored" warnings fail a task by default; a user file turns other rules on for success."""
    task = _task(
        "code_executor",
        code="import sys\nprint(4)\nsys.stderr.write('DeprecationWarning: f is deprecated, use g\\n')",
    )
    result = CodeExecutor(environment).execute(task, workspace)
    shipped = WarningCheck(default_trigger_rules())
    assert (
        evaluate(task, result, retries=0, rewards=rewards, warning_check=shipped).status is TaskStatus.SUCCESS
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {id: deprecated, on_success: true}\n", encoding="utf-8")
    strict = WarningCheck(load_trigger_rules([rules]))
    evaluation = evaluate(task, result, retries=0, rewards=rewards, warning_check=strict)
    assert evaluation.status is TaskStatus.FAILED
    assert evaluation.feedback["details"]["rule_id"] == "deprecated"
