"""Rule-based triggers: decide which failed commands are correctable API drift, and classify the rest.

The rules live in YAML (``default_triggers.yaml`` ships with the package; users add their own files).
Each rule names a category (``api_drift``, ``missing_tool``, ``transient``, ``logic``), an exit
condition and regular expressions matched against the command's output. Rules are tried by priority;
the first one that matches classifies the failure, and a failure no rule matches is ``logic``.

Example:
    >>> rules = load_trigger_rules()
    >>> error = "error: unknown option `colour'"
    >>> failure = classify_failure(["tool", "run", "--colour"], 2, error, rules=rules)
    >>> failure.category, failure.rule_id, failure.correctable
    ('api_drift', 'unknown-option', True)
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast

import yaml
from jsonschema import Draft202012Validator

from librarian.errors import InvalidInputError, NotFoundError
from librarian.safe_yaml import compose_yaml

__all__ = [
    "CATEGORIES",
    "FailureCategory",
    "FailureClass",
    "TriggerRule",
    "WarningCheck",
    "classify_failure",
    "default_trigger_rules",
    "load_trigger_rules",
]

FailureCategory = Literal["api_drift", "missing_tool", "transient", "logic"]
CATEGORIES: tuple[FailureCategory, ...] = ("api_drift", "missing_tool", "transient", "logic")
_DEFAULT_RESOURCE = "default_triggers.yaml"
_MATCHED_TEXT_LIMIT = 300

_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "category"],
    "properties": {
        "id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$"},
        "description": {"type": "string"},
        "category": {"enum": list(CATEGORIES)},
        "correctable": {"type": "boolean"},
        "priority": {"type": "integer"},
        "exit": {
            "oneOf": [
                {"enum": ["nonzero", "any"]},
                {"type": "array", "items": {"type": "integer"}, "minItems": 1},
            ]
        },
        "stream": {"enum": ["stderr", "stdout", "both"]},
        "patterns": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "enabled": {"type": "boolean"},
        "on_success": {"type": "boolean"},
    },
}
# A user file may give only some fields of a rule it overrides, so ids are all that is required there.
_FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["rules"],
    "properties": {
        "version": {"const": 1},
        "rules": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id"],
                "properties": {"id": _RULE_SCHEMA["properties"]["id"]},
            },
        },
    },
}


@dataclass(frozen=True)
class TriggerRule:
    """One trigger condition.

    Attributes:
        id: unique name, used to override the rule from another file and recorded with the failure.
        category: the failure class the rule assigns.
        correctable: whether the loop should try to correct a failure this rule matches.
        priority: rules run by ascending priority, then in load order.
        exit: ``"nonzero"``, ``"any"`` or the exit codes the rule applies to.
        stream: where the patterns are searched: ``stderr``, ``stdout`` or ``both``.
        patterns: regular expressions (case-insensitive, multi-line); ``{program}`` stands for the
            failed command's executable. No pattern means the exit condition alone decides.
        enabled: a disabled rule never matches.
        on_success: the rule also fires on a run that *succeeded* (its expected exit code): a warning
            on the output that something asked for was ignored means the task did not do what it
            said, so the evaluator fails it and the loop corrects it (see :func:`warning_check`).
        description: what the rule is for.
        origin: the file and line the rule (or its last override) came from.
    """

    id: str
    category: FailureCategory
    correctable: bool
    priority: int = 100
    exit: str | tuple[int, ...] = "nonzero"
    stream: str = "both"
    patterns: tuple[str, ...] = ()
    enabled: bool = True
    on_success: bool = False
    description: str = ""
    origin: str = ""

    def exit_applies(self, exit_code: int) -> bool:
        """Whether ``exit_code`` satisfies the rule's exit condition."""
        if self.exit == "any":
            return True
        if self.exit == "nonzero":
            return exit_code != 0
        return exit_code in cast(tuple[int, ...], self.exit)

    def search(self, program: str, stderr: str, stdout: str) -> re.Match[str] | None:
        """The first pattern match in the rule's stream(s), or ``None``."""
        texts = {"stderr": (stderr,), "stdout": (stdout,), "both": (stderr, stdout)}[self.stream]
        for pattern in self.patterns:
            compiled = _compile(pattern, program)
            for text in texts:
                match = compiled.search(text)
                if match:
                    return match
        return None


@dataclass(frozen=True)
class FailureClass:
    """How a failure was classified.

    Attributes:
        category: ``api_drift``, ``missing_tool``, ``transient`` or ``logic``.
        rule_id: the rule that matched, ``None`` when none did.
        correctable: whether the correction loop should run (API drift by default).
        matched_text: the output line the rule matched (trimmed), empty when the exit code decided.
    """

    category: FailureCategory
    rule_id: str | None
    correctable: bool
    matched_text: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form, as stored with the failure."""
        return {
            "category": self.category,
            "rule_id": self.rule_id,
            "correctable": self.correctable,
            "matched_text": self.matched_text,
        }


def classify_failure(
    argv_or_command: Sequence[str] | str,
    exit_code: int,
    stderr: str,
    stdout: str = "",
    *,
    rules: Sequence[TriggerRule] | None = None,
    succeeded: bool = False,
) -> FailureClass:
    """Classify a finished command by the first trigger rule that matches it.

    Args:
        argv_or_command: the command as an argument list, or as a shell command line.
        exit_code: its exit status.
        stderr: its standard error.
        stdout: its standard output (some tools print errors there).
        rules: the rules to apply, as :func:`load_trigger_rules` returns them; the shipped defaults
            when ``None``.
        succeeded: the command exited as expected (it was failed for a warning on its output): only
            the rules that fire on success (``on_success``) apply, whatever their exit condition.

    Returns:
        The class of the first enabled rule (by priority) whose exit condition holds and whose
        patterns match; ``logic`` and not correctable when none does.
    """
    active = default_trigger_rules() if rules is None else rules
    program = _program(argv_or_command)
    ordered = sorted(enumerate(active), key=lambda item: (item[1].priority, item[0]))
    for _, rule in ordered:
        if not rule.enabled:
            continue
        if succeeded and not (rule.on_success and rule.patterns):
            continue
        if not succeeded and not rule.exit_applies(exit_code):
            continue
        if not rule.patterns:
            return FailureClass(rule.category, rule.id, rule.correctable, "")
        match = rule.search(program, stderr, stdout)
        if match:
            return FailureClass(rule.category, rule.id, rule.correctable, _line_of_match(match))
    return FailureClass("logic", None, False, "")


class WarningCheck:
    """Finds, on the output of a run that *succeeded*, a warning an ``on_success`` rule names.

    The evaluator calls it on every successful command and code task: a tool that exits 0 after
    saying it ignored a flag did not do what the task asked, so the task counts as failed (and the
    self-correcting loop gets to fix the command). A task whose expected exit code is not 0 (a
    linter that reports findings with 1) cannot tell "ran and found something" from "refused its
    arguments" by the code, so for it every correctable drift rule is looked for.

    Example:
        >>> check = WarningCheck(default_trigger_rules())
        >>> check(["tool", "--old"], "warning: option --old was ignored", "").rule_id
        'ignored-warning'
        >>> check(["tool"], "", "all good") is None
        True
    """

    def __init__(self, rules: Sequence[TriggerRule]) -> None:
        self.rules = [rule for rule in rules if rule.enabled and rule.on_success and rule.patterns]
        self.drift = [rule for rule in rules if rule.enabled and rule.correctable and rule.patterns]

    def __call__(
        self, argv: Sequence[str] | str, stderr: str, stdout: str, exit_code: int = 0
    ) -> FailureClass | None:
        """The class of the first rule that makes this success a failure, or ``None``.

        Args:
            argv: the command; stderr, stdout: its output.
            exit_code: the exit code it ended with (the one the task expects).
        """
        if not (stderr or stdout):
            return None
        if exit_code != 0:
            found = classify_failure(argv, exit_code, stderr, stdout, rules=self.drift)
            if found.rule_id is not None and found.correctable:
                return found
        if not self.rules:
            return None
        found = classify_failure(argv, 0, stderr, stdout, rules=self.rules, succeeded=True)
        return found if found.rule_id is not None else None


def default_trigger_rules() -> list[TriggerRule]:
    """The rules shipped with Librarian (``default_triggers.yaml``), parsed once per process."""
    return list(_default_rules())


@lru_cache(maxsize=1)
def _default_rules() -> tuple[TriggerRule, ...]:
    text = resources.files("librarian.correction").joinpath(_DEFAULT_RESOURCE).read_text("utf-8")
    return tuple(_merge({}, _parse_rules(text, f"<librarian>/{_DEFAULT_RESOURCE}")).values())


def load_trigger_rules(
    paths: Iterable[str | os.PathLike[str]] = (), *, defaults: bool = True
) -> list[TriggerRule]:
    """The default rules merged with users' rule files, in order.

    A rule whose ``id`` is new is added; a rule repeating an existing ``id`` overrides only the fields
    it gives (``{id: deprecated, enabled: false}`` switches the shipped deprecation rule off).

    Args:
        paths: YAML files in the format of ``default_triggers.yaml``, applied in order.
        defaults: start from the shipped rules (``False`` uses only ``paths``).

    Raises:
        NotFoundError: a file does not exist.
        InvalidInputError: a file is not valid YAML, breaks the format, or holds a pattern that is not
            a valid regular expression; the message names the file and line.
    """
    merged: dict[str, TriggerRule] = {rule.id: rule for rule in _default_rules()} if defaults else {}
    for raw_path in paths:
        path = Path(raw_path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise NotFoundError(f"trigger rule file {path} does not exist") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read trigger rule file {path}: {exc}") from exc
        merged = _merge(merged, _parse_rules(text, str(path)))
    return list(merged.values())


@dataclass(frozen=True)
class _RawRule:
    fields: dict[str, Any]
    origin: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.origin} at line {self.line}"


def _parse_rules(text: str, origin: str) -> list[_RawRule]:
    data, node = compose_yaml(text, origin)
    if data is None:
        data = {"rules": []}
    error = next(iter(Draft202012Validator(_FILE_SCHEMA).iter_errors(data)), None)
    if error is not None:
        raise _schema_error(origin, node, list(error.absolute_path), error.message)
    rule_nodes = _child(node, "rules")
    raw: list[_RawRule] = []
    for index, fields in enumerate(data["rules"]):
        item = _child(rule_nodes, index)
        raw.append(_RawRule(dict(fields), origin, item.start_mark.line + 1 if item is not None else 0))
    return raw


def _merge(into: Mapping[str, TriggerRule], raw_rules: list[_RawRule]) -> dict[str, TriggerRule]:
    merged = dict(into)
    for raw in raw_rules:
        previous = merged.get(raw.fields["id"])
        # An override gives only the fields it changes; the rest come from the rule it overrides.
        fields: dict[str, Any] = _rule_fields(previous) if previous else {}
        fields.update(raw.fields)
        error = next(iter(Draft202012Validator(_RULE_SCHEMA).iter_errors(fields)), None)
        if error is not None:
            field_name = ".".join(str(p) for p in error.absolute_path) or "rule"
            raise InvalidInputError(
                f"{raw.where}: trigger rule {fields['id']!r}, field {field_name}: {error.message}"
            )
        if not fields.get("patterns") and not isinstance(fields.get("exit"), list):
            # Without patterns and exit codes a rule would claim every failure.
            raise InvalidInputError(
                f"{raw.where}: trigger rule {fields['id']!r} needs patterns or a list of exit codes"
            )
        for number, pattern in enumerate(fields.get("patterns", [])):
            try:
                _compile(pattern, "program")
            except re.error as exc:
                raise InvalidInputError(
                    f"{raw.where}: trigger rule {fields['id']!r}, patterns[{number}] "
                    f"is not a valid regular expression: {exc}"
                ) from exc
        merged[fields["id"]] = _build(fields, raw.where)
    return merged


def _rule_fields(rule: TriggerRule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "category": rule.category,
        "correctable": rule.correctable,
        "priority": rule.priority,
        "exit": rule.exit if isinstance(rule.exit, str) else list(rule.exit),
        "stream": rule.stream,
        "patterns": list(rule.patterns),
        "enabled": rule.enabled,
        "on_success": rule.on_success,
        "description": rule.description,
    }


def _build(fields: Mapping[str, Any], where: str) -> TriggerRule:
    category = cast(FailureCategory, fields["category"])
    exit_condition = fields.get("exit", "nonzero")
    return TriggerRule(
        id=fields["id"],
        category=category,
        correctable=fields.get("correctable", category == "api_drift"),
        priority=fields.get("priority", 100),
        exit=exit_condition if isinstance(exit_condition, str) else tuple(exit_condition),
        stream=fields.get("stream", "both"),
        patterns=tuple(fields.get("patterns", ())),
        enabled=fields.get("enabled", True),
        on_success=fields.get("on_success", False),
        description=fields.get("description", ""),
        origin=where,
    )


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode) and isinstance(key, str):
        return next((value for k, value in node.value if getattr(k, "value", None) == key), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return cast(yaml.Node, node.value[key])
    return None


def _schema_error(
    origin: str, root: yaml.Node | None, path: list[str | int], message: str
) -> InvalidInputError:
    node, found = root, root
    for key in path:
        node = _child(node, key)
        if node is None:
            break
        found = node
    line = f" at line {found.start_mark.line + 1}" if found is not None else ""
    where = "/".join(str(p) for p in path) or "document"
    return InvalidInputError(f"{origin}{line}: {where}: {message}")


@lru_cache(maxsize=1024)
def _compile(pattern: str, program: str) -> re.Pattern[str]:
    # str.format would trip over regex braces such as {0,20}, so only the one placeholder is replaced.
    return re.compile(pattern.replace("{program}", program), re.IGNORECASE | re.MULTILINE)


def _program(argv_or_command: Sequence[str] | str) -> str:
    """An alternation matching the executable as written and by its base name, regex-escaped."""
    if isinstance(argv_or_command, str):
        try:
            words = shlex.split(argv_or_command)
        except ValueError:
            words = argv_or_command.split()
    else:
        words = list(argv_or_command)
    if not words:
        return "(?!)"  # matches nothing: no executable to name
    first = words[0]
    spellings = dict.fromkeys([first, os.path.basename(first)])
    return "(?:" + "|".join(re.escape(s) for s in spellings if s) + ")"


def _line_of_match(match: re.Match[str]) -> str:
    text = match.string
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    line = text[start : end if end != -1 else len(text)].strip()
    return line[:_MATCHED_TEXT_LIMIT]
