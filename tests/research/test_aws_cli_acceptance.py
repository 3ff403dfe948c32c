"""Issue 3's acceptance, for real: the AWS CLI's own help, walked, then researched through the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from librarian.cli.main import app

pytestmark = pytest.mark.slow


def research(home: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["--home", str(home), "research", *args, "--json"])
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def installed_aws_version() -> str:
    aws = Path(sys.executable).parent / "aws"
    output = subprocess.run([str(aws), "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"aws-cli/(\S+)", output)
    assert match, output
    return match.group(1)


def test_unknown_option_error_finds_put_object_with_confidence(aws_cli_home: Path) -> None:
    answer = research(
        aws_cli_home,
        "how to upload a file to s3 with tags",
        "--sdk",
        "aws-cli",
        "--error",
        "Unknown options: --tagging,compliance=strict",
    )
    top = answer["snippets"][0]
    assert top["entity_name"] == "s3api put-object"
    assert "--tagging" in top["content"]
    assert top["sdk_version"] == installed_aws_version() == answer["resolved_version"]
    assert answer["confidence_score"] >= 0.7
    # The commands that take a tag *structure* are offered, but after the one that takes the value given.
    names = [s["entity_name"] for s in answer["snippets"]]
    assert "s3api put-object-tagging" in names or "s3api put-bucket-tagging" in names


def test_a_version_not_indexed_is_named_and_the_indexing_command_suggested(aws_cli_home: Path) -> None:
    answer = research(aws_cli_home, "upload a file", "--sdk", "aws", "--version", "9.9.9")
    assert answer["resolved_version"] == installed_aws_version()
    assert "9.9.9" in answer["version_note"] and answer["resolved_version"] in answer["version_note"]
    assert any("librarian ingest-cli" in s for s in answer["fallback_suggestions"])


def test_an_unknown_sdk_gets_the_closest_names_and_no_crash(aws_cli_home: Path) -> None:
    answer = research(aws_cli_home, "upload a file", "--sdk", "aws-clii")
    assert answer["error"] is True and answer["snippets"] == []
    assert any("aws-cli" in s for s in answer["fallback_suggestions"])
