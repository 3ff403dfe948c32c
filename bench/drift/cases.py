"""Drift cases: real API changes between two released versions of a tool or a library, one YAML file each.

A case says which version the task runs (``environment.install``), which version the task was
written for (``environment.baseline``), the workflow task itself (a command line or Python code),
the files it needs, how the drifted version fails (``error_contains``), one known-good correction
(``fixed``, used only to verify the case, never shown to the loop) and a ``check`` that decides
success by the result (the file really formatted, the JSON really printed, the value really
computed). The format is in ``bench/drift/README.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["CATEGORIES", "DriftCase", "load_cases"]

CATEGORIES = (
    "seed",
    "option_to_value",
    "subcommand_required",
    "option_now_default",
    "warning_only",
    "renamed_option",
    "renamed_subcommand",
    "python_attribute",
    "python_use_instead",
    "python_keyword",
    "python_import",
    "two_step",
)
CASES = Path(__file__).parent / "cases"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Environment(_Model):
    """Where the task runs: a virtualenv (pip) or an npm prefix, with exact pins."""

    manager: Literal["pip", "npm"]
    install: list[str] = Field(min_length=1)
    baseline: list[str] = Field(default_factory=list)
    # Variables the task gets; ``{s3}`` is replaced by the S3 server's URL when the case uses one.
    env: dict[str, str] = Field(default_factory=dict)


class Docs(_Model):
    """How the documentation is indexed: the CLI help walk of ``command``, or ``distribution``'s API."""

    connector: Literal["cli", "package"]
    command: str | None = None
    distribution: str | None = None
    scopes: list[str] = Field(default_factory=list)


class Task(_Model):
    """The workflow task as an agent would have written it for the baseline version."""

    description: str
    executor_type: Literal["command_executor", "code_executor"]
    payload: dict[str, Any]


class Fixed(_Model):
    """A known-good correction for the drifted version (verification only)."""

    argv: list[str] | None = None
    code: str | None = None


class DriftCase(_Model):
    """One case (see the module docs)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    category: str
    tool: str
    environment: Environment
    docs: Docs
    files: dict[str, str] = Field(default_factory=dict)
    task: Task
    error_contains: list[str] = Field(default_factory=list)
    fixed: Fixed
    check: str
    notes: str = ""
    services: list[Literal["s3"]] = Field(default_factory=list)
    # Commands run before the task, in order (creating what the task works on, such as a bucket).
    setup: list[list[str]] = Field(default_factory=list)
    # ``edit``: the known fix is what the loop makes (command-line edits, syntax-tree edits of an
    # attribute, a call, a keyword, an import); ``rewrite``: it restructures code or composes new
    # values, which only a person or an LLM does. Both are run; the goals are about ``edit``.
    scope: Literal["edit", "rewrite"] = "edit"
    quick: bool = False

    @property
    def path(self) -> Path:
        """The case file."""
        return CASES / f"{self.id}.yaml"


def load_cases(ids: list[str] | None = None, directory: Path = CASES) -> list[DriftCase]:
    """Every case in ``directory`` (or those named), sorted by id.

    Raises:
        ValueError: a file is not a valid case (the message names the file and the field), or an id
            that was asked for does not exist.
    """
    cases = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            case = DriftCase.model_validate(data)
        except (yaml.YAMLError, ValidationError) as exc:
            raise ValueError(f"{path}: not a valid drift case: {exc}") from exc
        if case.id != path.stem:
            raise ValueError(f"{path}: id {case.id!r} does not match the file name")
        if case.category not in CATEGORIES:
            raise ValueError(f"{path}: category {case.category!r} is not one of {', '.join(CATEGORIES)}")
        cases.append(case)
    if ids:
        known = {case.id for case in cases}
        missing = [i for i in ids if i not in known]
        if missing:
            raise ValueError(f"no such case(s): {', '.join(missing)}")
        cases = [case for case in cases if case.id in ids]
    return cases
