"""The runbook format: the design's example validates, every problem is named with its step and field,
templates never turn a value into shell code, conditions and extraction are safe and exact."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from librarian.runbooks.conditions import ConditionError, evaluate
from librarian.runbooks.dry_run import dry_run
from librarian.runbooks.extract import ExtractError, extract
from librarian.runbooks.format import RunbookInvalidError, load_runbook, parse_runbook_text
from librarian.runbooks.templates import TemplateError, render_command, render_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "runbooks"


def test_the_designs_kubernetes_example_validates_and_dry_runs() -> None:
    runbook = load_runbook(EXAMPLES / "kubernetes-pod-crash.yaml")

    assert runbook.required_variables == ["pod_name"]
    plan = dry_run(runbook, {"pod_name": "web-1"}, assume={"exit_code": 137})
    assert [visit["step"] for visit in plan["path"]] == [1, 2, 3, 4, 5, 10]
    other = dry_run(runbook, {"pod_name": "web-1"}, assume={"exit_code": "1"})
    assert [visit["step"] for visit in other["path"]] == [1, 2, 3, 4, 6, 7, 10]
    first = plan["steps"][0]["execution"]
    assert first == {"argv": ["kubectl", "get", "pod", "web-1", "-n", "production", "-o", "yaml"]}
    events = plan["steps"][6]["execution"]["argv"]
    assert events[-1] == "--sort-by=.lastTimestamp"


def test_every_example_runbook_validates() -> None:
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert len(files) >= 4
    for file in files:
        load_runbook(file)


BROKEN = """
name: broken
steps:
  - step: 1
    title: first
    action_type: bash
    command: echo {{x}}
    on_success: 7
  - step: 2
    title: orphan
    action_type: conditional
    condition: "__import__('os').system('id')"
    if_true: 1
    if_false: 3
  - step: 3
    title: looping
    action_type: bash
    command: echo loop
    on_success: 3
  - step: 4
    title: wrong kind
    action_type: manual
    prompt: do it
    command: rm -rf /
    on_failure: somewhere
"""


def test_every_problem_is_reported_with_its_step_and_field(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)

    with pytest.raises(RunbookInvalidError) as caught:
        load_runbook(path)

    problems = caught.value.problems
    assert str(path) in caught.value.message
    assert any("step 4" in p and "on_failure" in p and "'somewhere'" in p for p in problems), problems


def test_graph_problems_are_found_after_the_schema_passes() -> None:
    text = BROKEN.replace("    on_failure: somewhere\n", "    final_step: true\n")
    with pytest.raises(RunbookInvalidError) as caught:
        parse_runbook_text(text, origin="broken.yaml")
    problems = caught.value.problems
    assert any("step 1" in p and "on_success" in p and "no step 7" in p for p in problems), problems
    assert any("step 2" in p and "field condition" in p and "only the functions" in p for p in problems), (
        problems
    )
    assert any("step 4" in p and "field command" in p and "manual" in p for p in problems), problems


def test_unreachable_steps_unbounded_loops_and_a_missing_final_step_are_refused() -> None:
    text = """
name: graph
steps:
  - {step: 1, title: a, action_type: bash, command: "true", on_success: 2}
  - {step: 2, title: b, action_type: bash, command: "true", on_success: 1}
  - {step: 3, title: c, action_type: bash, command: "true"}
"""
    with pytest.raises(RunbookInvalidError) as caught:
        parse_runbook_text(text)
    problems = " | ".join(caught.value.problems)
    assert "step 3 ('c'): unreachable" in problems
    assert "no step has final_step" in problems
    assert "a loop with no bound" in problems and "1 -> 2 -> 1" in problems

    bounded = text.replace("on_success: 1}", "on_success: 1, max_visits: 3}").replace(
        'command: "true"}', 'command: "true", final_step: true}'
    )
    with pytest.raises(RunbookInvalidError) as still:
        parse_runbook_text(bounded)
    assert all("loop" not in p for p in still.value.problems)


def test_a_value_fills_one_argument_and_never_becomes_shell_code(tmp_path: Path) -> None:
    hostile = "; touch PWNED; $(touch PWNED2) `touch PWNED3` ' \" \\"
    plain = render_command("printf %s {{v}}", {"v": hostile})
    assert plain.argv == ["printf", "%s", hostile]

    for template in (
        "printf '%s|' {{v}} | cat",
        "printf '%s|' \"{{v}}\" | cat",
        "printf '%s|' 'pre{{v}}post' | cat",
        "printf '%s|' x{{v}}y > out.txt && cat out.txt",
    ):
        command = render_command(template, {"v": hostile})
        assert command.script is not None
        result = subprocess.run(
            ["/bin/sh", "-c", command.script],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", **command.env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert hostile in result.stdout, (template, result.stdout)
        assert not list(tmp_path.glob("PWNED*")), template


def test_templates_refuse_what_they_cannot_render() -> None:
    with pytest.raises(TemplateError, match="no value"):
        render_text("hello {{missing}}", {})
    with pytest.raises(TemplateError, match="not a variable name"):
        render_text("{{ a | upper }}", {"a": 1})
    with pytest.raises(TemplateError, match="quote"):
        render_command("echo 'unclosed {{a}} | cat", {"a": 1})
    assert render_command("echo {{a}} \\\n  --flag", {"a": "x y"}).argv == ["echo", "x y", "--flag"]
    assert shlex.split(render_command("echo {{n}}", {"n": 3.0}).display) == ["echo", "3"]


@pytest.mark.parametrize(
    ("condition", "values", "expected"),
    [
        ("{{exit_code}} == 137", {"exit_code": "137"}, True),
        ("{{exit_code}} == 137", {"exit_code": 1}, False),
        ("restarts > 3 and not contains(log, 'ready')", {"restarts": "5", "log": "starting"}, True),
        ("matches(status, '^(Pending|CrashLoop)')", {"status": "CrashLoopBackOff"}, True),
        ("{{flag}} == true or {{n}} >= 2.5", {"flag": "false", "n": "2.5"}, True),
        ("'ok' in {{text}}", {"text": "all ok"}, True),
        ("lower({{name}}) != 'prod'", {"name": "PROD"}, False),
    ],
)
def test_conditions(condition: str, values: dict[str, object], expected: bool) -> None:
    assert evaluate(condition, values) is expected


@pytest.mark.parametrize(
    "condition",
    [
        "().__class__.__bases__",
        "__import__('os')",
        "[x for x in range(3)]",
        "open('/etc/passwd')",
        "x.upper()",
        "lambda: 1",
    ],
)
def test_conditions_refuse_anything_but_expressions(condition: str) -> None:
    with pytest.raises(ConditionError):
        evaluate(condition, {"x": "a"})


def test_a_value_cannot_change_what_a_condition_does() -> None:
    assert evaluate("{{v}} == 'x'", {"v": "x' or 'a' == 'a"}) is False
    with pytest.raises(ConditionError, match="inside quotes"):
        evaluate("'{{v}}' == 'x'", {"v": "x"})
    with pytest.raises(ConditionError, match="no such value"):
        evaluate("{{absent}} > 1", {})


def test_extraction_by_jsonpath_yaml_and_regex() -> None:
    pod_yaml = (
        "status:\n  containerStatuses:\n    - restartCount: 4\n"
        "      lastState:\n        terminated:\n          exitCode: 137\n"
    )
    values = extract(
        pod_yaml,
        {
            "exit_code": ".status.containerStatuses[0].lastState.terminated.exitCode",
            "restarts": "$.status.containerStatuses[0].restartCount",
        },
    )
    assert values == {"exit_code": 137, "restarts": 4}
    psql = " count \n-------\n    12\n(1 row)\n"
    assert extract(psql, {"n": "regex:^\\s+(\\d+)\\s*$"}) == {"n": "12"}
    assert extract("db main ok", {"db": {"regex": "db (?P<name>\\w+)", "group": "name"}}) == {"db": "main"}
    with pytest.raises(ExtractError, match=r"extract\.n"):
        extract("nothing here", {"n": "regex:(\\d+)"})
