"""The examples in the correction and research modules' docstrings run and say what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "librarian.correction.choices",
    "librarian.correction.names",
    "librarian.correction.command_tree",
    "librarian.correction.docs_check",
    "librarian.correction.edits",
    "librarian.correction.error_hints",
    "librarian.correction.helpdocs",
    "librarian.correction.replacement",
    "librarian.correction.triggers",
    "librarian.correction.values",
    "librarian.correction.fix_templates",
    "librarian.correction.pycode.api",
    "librarian.correction.pycode.candidates",
    "librarian.correction.pycode.edits",
    "librarian.correction.pycode.failure",
    "librarian.correction.pycode.forwarded",
    "librarian.correction.pycode.keyword_values",
    "librarian.correction.pycode.methods",
    "librarian.correction.pycode.source",
    "librarian.correction.pycode.succession",
    "librarian.research.coverage",
    "librarian.research.error_evidence",
    "librarian.runtime.task_env",
    "librarian.installed",
    "librarian.user_dates",
    "librarian.web.dag",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
