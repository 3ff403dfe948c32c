"""The evaluator: checks a task's output against its ``expect`` block and assigns the reward.

Each executor type has a validator (:data:`VALIDATORS`, extended with :func:`register_validator`).
Checks, all optional, in the payload's ``"expect"``:

- ``command_executor`` / ``code_executor``: ``exit_code`` (default 0), ``stdout_contains`` (a string or
  a list of strings), ``stdout_regex`` (searched, multi-line), ``stderr_contains``, ``stderr_regex``,
  ``stdout_not_regex`` and ``stderr_not_regex`` (the output must *not* match), and ``allow_warnings``
  (default false: see below);
- ``file_writer``: ``exists`` (default true), ``content`` (the whole text), ``contains``, ``sha256``;
  checked against what the executor read back from disk right after writing (its ``sha256`` and
  ``text``), so the evaluator may run on a host that cannot see the workspace;
- ``api_caller``: ``status`` (an int or a list; default any 2xx), ``json`` (a subset the body must
  contain), ``json_pointer`` (``{"/items/0/name": "x"}``, RFC 6901), ``json_schema``, ``body_contains``.

An unknown key fails validation rather than passing silently, so a misspelt check is noticed.

**Warnings.** A command or code task that exits as expected but warns that part of it was ignored
("Ignored unknown option --x", "flags were used and ignored") did not do what it said. With a
*warning check* (the trigger rules marked ``on_success``, :class:`librarian.correction.triggers.WarningCheck`,
which the workers pass in), such a run is judged failed with ``error_type="IgnoredWarning"``, so the
self-correcting loop gets to fix the command; ``expect.allow_warnings: true`` opts a task out. A task
that expects a non-zero exit code (a linter reporting findings) is also failed when its output says
its arguments were rejected (an unknown option, a removed command), since the code cannot say.

Rewards come from :class:`Rewards` (built from ``Settings.runtime_reward_*``): success, success after
at least one retry, output that fails validation, and failure plus a per-retry amount.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jsonschema

from librarian.config import Settings
from librarian.errors import InvalidInputError
from librarian.runtime.contracts import ExecutionResult, TaskSpec, TaskStatus


@dataclass(frozen=True)
class Rewards:
    """The reward of each outcome; configuration, see ``Settings.runtime_reward_*``."""

    success: float
    success_after_retry: float
    invalid_output: float
    failure: float
    failure_per_retry: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Rewards:
        """The rewards configured in ``settings``."""
        return cls(
            success=settings.runtime_reward_success,
            success_after_retry=settings.runtime_reward_success_after_retry,
            invalid_output=settings.runtime_reward_invalid_output,
            failure=settings.runtime_reward_failure,
            failure_per_retry=settings.runtime_reward_failure_per_retry,
        )

    def for_success(self, retries: int) -> float:
        """Reward of a validated success; a success that needed a retry earns ``success_after_retry``."""
        return self.success_after_retry if retries > 0 else self.success

    def for_failure(self, retries: int) -> float:
        """Reward of a failed execution: ``failure + failure_per_retry * retries``."""
        return self.failure + self.failure_per_retry * retries


@dataclass(frozen=True)
class Validation:
    """Whether the output met the task's expectations, and why not."""

    ok: bool
    reason: str


@dataclass(frozen=True)
class Evaluation:
    """The verdict on one attempt: the task's new status, its reward and the feedback to store."""

    status: TaskStatus
    reward: float
    feedback: dict[str, Any]
    validation: Validation | None = None


class WarningHit(Protocol):
    """What a warning check found: the rule and the line it matched."""

    @property
    def rule_id(self) -> str | None: ...

    @property
    def matched_text(self) -> str: ...


WarningCheck = Callable[[Sequence[str], str, str, int], WarningHit | None]
"""``check(argv, stderr, stdout, exit_code)``: what a successful run printed that makes it a failure."""

Validator = Callable[[Mapping[str, Any], ExecutionResult], Validation]
_PASSED = Validation(True, "output meets the expectations")
# Executor types whose output is a program's: the ones a warning check reads.
_PROCESS_EXECUTORS = frozenset({"command_executor", "code_executor"})


def validate_output(
    task: TaskSpec, result: ExecutionResult, validators: Mapping[str, Validator] | None = None
) -> Validation:
    """Check a successful execution's output against ``task.payload["expect"]``.

    Args:
        task: the task, whose payload may hold ``expect``.
        result: what the executor returned.
        validators: per executor type; default :data:`VALIDATORS`.

    Returns:
        ``Validation(ok, reason)``; a failed execution is never valid.
    """
    if not result.ok:
        return Validation(False, f"the execution failed: {result.feedback.get('error_message', '')}")
    expect = task.payload.get("expect") or {}
    if not isinstance(expect, Mapping):
        return Validation(False, f"payload field 'expect' must be an object, got {type(expect).__name__}")
    validator = (VALIDATORS if validators is None else validators).get(task.executor_type)
    if validator is None:
        if expect:
            return Validation(False, f"executor type {task.executor_type!r} has no validator for 'expect'")
        return _PASSED
    return validator(expect, result)


def evaluate(
    task: TaskSpec,
    result: ExecutionResult,
    retries: int,
    *,
    rewards: Rewards,
    validators: Mapping[str, Validator] | None = None,
    warning_check: WarningCheck | None = None,
) -> Evaluation:
    """Judge one attempt: validate a successful execution, then assign status, reward and feedback.

    A successful execution whose output fails validation counts as failed, with
    ``error_type="ValidationError"`` and the invalid-output reward; one whose output carries a warning
    ``warning_check`` names (see the module docs) counts as failed with ``error_type="IgnoredWarning"``.

    Args:
        task: the task attempted.
        result: the executor's result.
        retries: how many times this task had been retried before this attempt (0 on the first).
        rewards: the reward table, usually ``Rewards.from_settings(settings)``.
        validators: per executor type; default :data:`VALIDATORS`.
        warning_check: finds a warning that fails a successful command or code task; ``None`` checks none.

    Raises:
        InvalidInputError: ``retries`` is negative.
    """
    if retries < 0:
        raise InvalidInputError(f"retries must not be negative, got {retries}")
    if not result.ok:
        feedback = {**result.feedback, "status": TaskStatus.FAILED.value}
        return Evaluation(TaskStatus.FAILED, rewards.for_failure(retries), feedback)
    validation = validate_output(task, result, validators)
    if validation.ok:
        warned = _warning(task, result, warning_check)
        if warned is not None:
            return Evaluation(TaskStatus.FAILED, rewards.for_failure(retries), warned, validation)
        feedback = {**result.feedback, "status": TaskStatus.SUCCESS.value}
        return Evaluation(TaskStatus.SUCCESS, rewards.for_success(retries), feedback, validation)
    feedback = {
        "status": TaskStatus.FAILED.value,
        "error_type": "ValidationError",
        "error_message": validation.reason,
        "traceback": "",
        "details": {
            "expect": task.payload.get("expect"),
            "notes": result.feedback.get("notes", ""),
            "stdout": result.feedback.get("stdout", ""),
            "stderr": result.feedback.get("stderr", ""),
        },
    }
    return Evaluation(TaskStatus.FAILED, rewards.invalid_output, feedback, validation)


def _warning(task: TaskSpec, result: ExecutionResult, check: WarningCheck | None) -> dict[str, Any] | None:
    """The failure feedback of a successful run that warned it ignored something, or ``None``."""
    if check is None or task.executor_type not in _PROCESS_EXECUTORS:
        return None
    expect = task.payload.get("expect") or {}
    if isinstance(expect, Mapping) and expect.get("allow_warnings") is True:
        return None
    output = result.output
    stdout, stderr = str(output.get("stdout", "")), str(output.get("stderr", ""))
    argv = task.payload.get("argv")
    program = [str(item) for item in argv] if isinstance(argv, list) and argv else [task.executor_type]
    code = output.get("exit_code")
    hit = check(program, stderr, stdout, code if isinstance(code, int) else 0)
    if hit is None:
        return None
    return {
        "status": TaskStatus.FAILED.value,
        "error_type": "IgnoredWarning",
        "error_message": (
            f"exited with code {output.get('exit_code')} but warned that part of it was ignored "
            f"(trigger rule {hit.rule_id}): {hit.matched_text}"
        ),
        "traceback": "",
        "details": {
            "exit_code": output.get("exit_code"),
            "stdout": stdout,
            "stderr": stderr,
            "argv": program,
            "warning": hit.matched_text,
            "rule_id": hit.rule_id,
            "succeeded": True,
        },
    }


def register_validator(executor_type: str, validator: Validator) -> None:
    """Give a new executor type its output checks (replacing any earlier ones)."""
    VALIDATORS[executor_type] = validator


def validate_process(expect: Mapping[str, Any], result: ExecutionResult) -> Validation:
    """Checks of a command or code run: exit code, output texts, patterns that must (not) match."""
    problem = _unknown_keys(expect, _PROCESS_KEYS)
    output = result.output
    stdout, stderr = str(output.get("stdout", "")), str(output.get("stderr", ""))
    expected_code = expect.get("exit_code", 0)
    if problem is None and output.get("exit_code") != expected_code:
        problem = f"exit code {output.get('exit_code')}, expected {expected_code}"
    if problem is None and not isinstance(expect.get("allow_warnings", False), bool):
        problem = "expect.allow_warnings must be true or false"
    problem = problem or _contains("stdout", stdout, expect.get("stdout_contains"))
    problem = problem or _contains("stderr", stderr, expect.get("stderr_contains"))
    for key, name, text, wanted in (
        ("stdout_regex", "stdout", stdout, True),
        ("stderr_regex", "stderr", stderr, True),
        ("stdout_not_regex", "stdout", stdout, False),
        ("stderr_not_regex", "stderr", stderr, False),
    ):
        problem = problem or _pattern(key, name, text, expect.get(key), wanted)
    return _PASSED if problem is None else Validation(False, problem)


_PROCESS_KEYS = {
    "exit_code",
    "stdout_contains",
    "stdout_regex",
    "stdout_not_regex",
    "stderr_contains",
    "stderr_regex",
    "stderr_not_regex",
    "allow_warnings",
}


def _pattern(key: str, name: str, text: str, pattern: Any, wanted: bool) -> str | None:
    """Why ``text`` fails ``expect.<key>`` (it must match ``pattern``, or must not), or ``None``."""
    if pattern is None:
        return None
    try:
        found = re.search(str(pattern), text, re.MULTILINE)
    except re.error as exc:
        return f"expect.{key} {pattern!r} is not a valid regular expression: {exc}"
    if wanted and found is None:
        return f"{name} does not match the pattern {pattern!r}: {_excerpt(text)}"
    if not wanted and found is not None:
        line = text[text.rfind("\n", 0, found.start()) + 1 :].split("\n", 1)[0]
        return f"{name} matches {pattern!r}, which it must not: {_excerpt(line)}"
    return None


def validate_file(expect: Mapping[str, Any], result: ExecutionResult) -> Validation:
    """Checks of a written file on the executor's read-back: existence, whole content, substrings, SHA-256.

    The text in the result may be cut (a file over 1 MB); ``content`` is then compared through the
    SHA-256 of the whole file, and ``contains`` searches the part that was kept.
    """
    problem = _unknown_keys(expect, {"exists", "content", "contains", "sha256"})
    if problem is not None:
        return Validation(False, problem)
    output = result.output
    name = output.get("path", "?")
    digest, text = output.get("sha256"), output.get("text")
    if not isinstance(digest, str) or not isinstance(text, str):
        return Validation(False, f"the result for {name} does not say what was read back (sha256 and text)")
    if not expect.get("exists", True):
        return Validation(False, f"{name} exists, expected it not to")
    cut = bool(output.get("text_truncated"))
    if "content" in expect:
        wanted = str(expect["content"])
        if cut:
            encoding = str(output.get("encoding") or "utf-8")
            same = hashlib.sha256(wanted.encode(encoding, errors="replace")).hexdigest() == digest
        else:
            same = text == wanted
        if not same:
            return Validation(False, f"{name} does not hold the expected content: {_excerpt(text)}")
    if "sha256" in expect and str(expect["sha256"]).lower() != digest:
        return Validation(False, f"{name} has SHA-256 {digest}, expected {expect['sha256']}")
    problem = _contains(str(name) + (" (its first megabyte)" if cut else ""), text, expect.get("contains"))
    return _PASSED if problem is None else Validation(False, problem)


def validate_api(expect: Mapping[str, Any], result: ExecutionResult) -> Validation:
    """Checks of an HTTP answer: status, JSON subset, JSON pointers, JSON Schema, body text."""
    problem = _unknown_keys(expect, {"status", "json", "json_pointer", "json_schema", "body_contains"})
    if problem is not None:
        return Validation(False, problem)
    output = result.output
    status = output.get("status_code")
    expected = expect.get("status")
    allowed = expected if isinstance(expected, list) else [expected]
    if (expected is None and not (isinstance(status, int) and 200 <= status < 300)) or (
        expected is not None and status not in allowed
    ):
        return Validation(False, f"HTTP status {status}, expected {expected or 'a 2xx status'}")
    body = str(output.get("body", ""))
    if (problem := _contains("the body", body, expect.get("body_contains"))) is not None:
        return Validation(False, problem)
    wants_json = any(key in expect for key in ("json", "json_pointer", "json_schema"))
    document = output.get("json")
    if wants_json and document is None:
        return Validation(False, f"the answer is not a JSON document: {_excerpt(body)}")
    if "json" in expect and (mismatch := json_mismatch(expect["json"], document)) is not None:
        return Validation(False, f"the JSON body does not match: {mismatch}")
    for pointer, wanted in dict(expect.get("json_pointer") or {}).items():
        try:
            found = resolve_pointer(document, str(pointer))
        except LookupError as exc:
            return Validation(False, f"JSON pointer {pointer!r}: {exc}")
        if (mismatch := json_mismatch(wanted, found, str(pointer))) is not None:
            return Validation(False, f"JSON pointer {pointer!r}: {mismatch}")
    if "json_schema" in expect:
        try:
            validator = jsonschema.Draft202012Validator(expect["json_schema"])
            validator.check_schema(expect["json_schema"])
        except jsonschema.SchemaError as exc:
            return Validation(False, f"expect.json_schema is not a valid JSON Schema: {exc.message}")
        error = next(iter(validator.iter_errors(document)), None)
        if error is not None:
            where = "/" + "/".join(map(str, error.absolute_path))
            return Validation(False, f"the JSON body breaks the schema at {where}: {error.message}")
    return _PASSED


def json_mismatch(expected: Any, actual: Any, path: str = "") -> str | None:
    """Where ``actual`` fails to contain ``expected``, or None when it does.

    Objects match when every expected key is present and matches (extra keys are fine); arrays match
    element by element and must have the same length; other values must be equal (``true`` is not
    ``1``).
    """
    here = path or "/"
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{here} is {_kind(actual)}, expected an object"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}/{key} is missing"
            if (problem := json_mismatch(value, actual[key], f"{path}/{key}")) is not None:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{here} is {_kind(actual)}, expected an array of {len(expected)}"
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            if (problem := json_mismatch(want, got, f"{path}/{index}")) is not None:
                return problem
        return None
    if type(expected) is not type(actual) and not (_is_number(expected) and _is_number(actual)):
        return f"{here} is {actual!r}, expected {expected!r}"
    return None if expected == actual else f"{here} is {actual!r}, expected {expected!r}"


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at an RFC 6901 JSON pointer (``""`` is the whole document).

    Raises:
        LookupError: the pointer is malformed or leads nowhere.
    """
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise LookupError("a JSON pointer starts with '/'")
    value = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdecimal() and int(token) < len(value):
            value = value[int(token)]
        else:
            raise LookupError(f"nothing at {token!r}")
    return value


def _unknown_keys(expect: Mapping[str, Any], known: set[str]) -> str | None:
    unknown = sorted(set(expect) - known)
    if not unknown:
        return None
    return f"unknown expect key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"


def _contains(what: str, text: str, wanted: Any) -> str | None:
    if wanted is None:
        return None
    for needle in wanted if isinstance(wanted, list) else [wanted]:
        if str(needle) not in text:
            return f"{what} does not contain {str(needle)!r}: {_excerpt(text)}"
    return None


def _excerpt(text: str, limit: int = 300) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


VALIDATORS: dict[str, Validator] = {
    "command_executor": validate_process,
    "code_executor": validate_process,
    "file_writer": validate_file,
    "api_caller": validate_api,
}
