"""The drift benchmark's quick cases, end to end: real tools at pinned versions, run twice.

The cases marked ``quick`` in ``bench/drift/cases`` cover each kind of drift the loop handles: a
subcommand now required, a chain of two drifts, a flag that became an option's value (with the flag
it requires), an option whose behaviour became the default, a flag that is only warned about, a
Python keyword that became a listed value, and a Python attribute a docstring names the successor of.
Their environments are installed from PyPI and the npm registry (cached between runs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.drift.__main__ import measure
from bench.drift.cases import load_cases
from bench.drift.envs import default_cache


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a fresh machine installs the seven environments first
def test_quick_cases_are_fixed_then_fixed_again_from_what_was_learned(tmp_path: Path) -> None:
    cases = [case for case in load_cases() if case.quick]
    assert {case.category for case in cases} >= {
        "subcommand_required",
        "two_step",
        "option_to_value",
        "option_now_default",
        "warning_only",
        "python_keyword",
        "python_attribute",
    }
    data = tmp_path / "data"
    for case in cases:
        row = measure(case, data, default_cache())
        first, second = row["runs"]
        assert first["fixed"], (case.id, first)
        assert first["research_calls"] >= 1 and first["correction_seconds"], (case.id, first)
        assert second["fixed"] and second["research_calls"] == 0, (case.id, second)
