"""Where a failed correction leaves the task: a chain that made progress, or a setback with blame."""

from __future__ import annotations

from typing import Any

from librarian.correction.code_flow import CodeKind
from librarian.correction.command_flow import CommandKind
from librarian.correction.models import CorrectionAttempt
from librarian.correction.stages import find_stage
from librarian.research.scrub import scrub

KIND = CommandKind()
UNKNOWN_FORMAT = "error: unexpected argument '--format' found"
REMOVED = "error: `tool <path>` has been removed. Use `tool check <path>` instead."


def attempt(
    number: int, failed: list[str], corrected: list[str], error: str, **more: Any
) -> CorrectionAttempt:
    return CorrectionAttempt(
        id=number,
        failed_argv=failed,
        corrected_argv=corrected,
        error_text=error,
        exit_code=2,
        depth=more.pop("depth", 0),
        chain_parent_id=more.pop("chain_parent_id", None),
        blamed=more.pop("blamed", None),
        **more,
    )


def stage(attempts: list[CorrectionAttempt], argv: list[str], stderr: str, **limits: int) -> Any:
    return find_stage(
        attempts,
        KIND,
        argv,
        stderr,
        "",
        2,
        is_drift=lambda output, code: "error:" in output,
        max_chain=limits.get("max_chain", 3),
        max_alternatives=limits.get("max_alternatives", 3),
    )


def test_the_first_failure_is_corrected_as_it_is() -> None:
    found = stage([], ["tool", "a.py"], REMOVED)
    assert (found.relation, found.subject, found.depth, found.tried) == ("first", ["tool", "a.py"], 0, [])


def test_a_correction_that_meets_a_new_error_is_continued_from_where_it_stands() -> None:
    first = attempt(
        1, ["tool", "--format", "json", "a.py"], ["tool", "check", "--format", "json", "a.py"], REMOVED
    )
    found = stage([first], ["tool", "check", "--format", "json", "a.py"], UNKNOWN_FORMAT)
    assert found.relation == "chain" and found.parent is first and found.depth == 1
    assert found.subject == ["tool", "check", "--format", "json", "a.py"]


def test_the_same_error_again_is_a_setback_to_the_command_it_corrected() -> None:
    first = attempt(1, ["tool", "--old"], ["tool", "--new"], "error: unknown option '--old'")
    found = stage([first], ["tool", "--new"], "error: unknown option '--new'")
    assert found.relation == "setback" and found.subject == ["tool", "--old"]
    # `--new` was brought in by the correction and is what the tool now rejects: it is blamed.
    assert found.newly_blamed == (1, ("--new",)) and "--new" in found.blamed
    assert found.tried == [["tool", "--new"]]


def test_the_same_kind_of_error_about_another_name_the_task_had_is_progress() -> None:
    """Two flags of the command were removed: the second one's error is the next step, not a setback."""
    first = attempt(
        1, ["tool", "--old", "--gone"], ["tool", "--new", "--gone"], "error: unknown option '--old'"
    )
    found = stage([first], ["tool", "--new", "--gone"], "error: unknown option '--gone'")
    assert found.relation == "chain" and found.subject == ["tool", "--new", "--gone"]
    again = stage([first], ["tool", "--new", "--gone"], "error: unknown option '--old'")
    assert again.relation == "setback"
    # The stored error text is scrubbed: a secret in quotes is the same error, not another name.
    raw = "error: unknown option '--old' for key 'AKIAIOSFODNN7EXAMPLE'"
    stored = attempt(1, ["tool", "--old"], ["tool", "--new"], scrub(raw))
    assert stage([stored], ["tool", "--new"], raw).relation == "setback"


def test_a_chain_stops_at_its_depth_limit() -> None:
    first = attempt(1, ["tool", "a"], ["tool", "b"], REMOVED)
    found = stage([first], ["tool", "b"], UNKNOWN_FORMAT, max_chain=1)
    assert found.relation == "setback" and "deep" in found.note


def test_a_spent_stage_hands_back_and_then_everything_is_spent() -> None:
    tries = [attempt(n, ["tool", "x"], ["tool", f"y{n}"], "error: x") for n in (1, 2)]
    found = stage(tries, ["tool", "y2"], "error: x", max_alternatives=2)
    assert found.exhausted and found.tried == [["tool", "y1"], ["tool", "y2"]]


def test_the_same_python_error_raised_by_the_next_statement_is_progress() -> None:
    """Both fields passed a removed keyword: the correction of the first gets the run to the second."""
    kind = CodeKind()

    def traceback(script: str, line: int, statement: str) -> str:
        return (
            "Traceback (most recent call last):\n"
            f'  File "/ws/.librarian/code/{script}.py", line {line}, in <module>\n'
            f"    {statement}\n"
            '  File "/venv/lib/python3.11/site-packages/lib/fields.py", line 190, in __init__\n'
            "    super().__init__(**kwargs)\n"
            "TypeError: Field.__init__() got an unexpected keyword argument 'missing'\n"
        )

    # Double quotes, as the real case had them: the names the error quotes are then the same too.
    original = 'role = Str(missing="viewer")\nactive = Bool(missing=True)\n'
    corrected = 'role = Str(load_default="viewer")\nactive = Bool(missing=True)\n'
    first = CorrectionAttempt(
        id=1,
        kind="code",
        failed_code=original,
        corrected_code=corrected,
        error_text=traceback("t-1", 1, 'role = Str(missing="viewer")'),
        exit_code=1,
        depth=0,
    )

    def found_after(statement: str, line: int) -> Any:
        return find_stage(
            [first],
            kind,
            corrected,
            traceback("t-2", line, statement),
            "",
            1,
            is_drift=lambda output, code: "TypeError" in output,
            max_chain=3,
            max_alternatives=3,
        )

    moved_on = found_after("active = Bool(missing=True)", 2)
    assert moved_on.relation == "chain" and moved_on.subject == corrected and moved_on.depth == 1
    # The same statement failing the same way again is a setback: the correction did not take.
    assert found_after('role = Str(missing="viewer")', 1).relation == "setback"
