"""The drift benchmark's quick cases, end to end: real tools at pinned versions, run twice.

The cases marked ``quick`` in ``bench/drift/cases`` cover each kind of drift the loop handles: a
subcommand now required, a chain of two drifts, a flag that became an option's value (with the flag
it requires), an option whose behaviour became the default, a flag that is only warned about, a
Python keyword that became a listed value, and a Python attribute a docstring names the successor of.
Their environments are installed from PyPI and the npm registry (cached between runs).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench.drift.__main__ import measure, write_json
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


def test_a_run_cut_short_keeps_its_rows_and_reports_them(tmp_path: Path) -> None:
    """The JSON is written after every case; ``--report`` prints the table and totals from it."""
    run = {
        "fixed": True,
        "strategy": "command_edit",
        "depth": 0,
        "research_calls": 1,
        "correction_seconds": [0.4],
        "correction_seconds_with_model_load": [6.0],
        "indexing_seconds": 1.5,
    }
    row = {"id": "a-case", "tool": "tool", "category": "two_step", "scope": "edit", "runs": [run, run]}
    report = tmp_path / "drift.json"
    write_json(report, [row], complete=False)
    assert json.loads(report.read_text())["complete"] is False
    done = subprocess.run(
        [sys.executable, "-m", "bench.drift", "--report", str(report)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert "| a-case | tool | two_step | fixed | command_edit (0) | 1 | 0.40 |" in done.stdout
    assert "**1/1** (100.0 %)" in done.stdout and "p50 **0.4 s**" in done.stdout
