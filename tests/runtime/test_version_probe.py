"""Version detection with real tools run inside the sandbox."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from librarian.runtime.contracts import Workspace
from librarian.runtime.sandbox import EnvironmentManager
from librarian.runtime.task_env import task_environment
from librarian.runtime.version_probe import detect_version, parse_version
from tests.skipping import unavailable
from tests.venvs import add_distribution, add_script, make_venv


@pytest.fixture
def environment(tmp_path: Path) -> EnvironmentManager:
    return EnvironmentManager(tmp_path / "ws")


@pytest.fixture
def workspace(environment: EnvironmentManager) -> Workspace:
    return environment.workspace_for("wf-probe")


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("aws-cli/1.45.11 Python/3.11.9 Linux/6.8.0 botocore/1.37.11", "1.45.11"),
        ("git version 2.43.0", "2.43.0"),
        ("pip 24.0 from /venv/lib/python3.11/site-packages/pip (python 3.11)", "24.0"),
        ("Python 3.11.9", "3.11.9"),
        ("v20.11.1", "20.11.1"),
        ("OpenSSH_9.6p1 Ubuntu-3ubuntu13, OpenSSL 3.0.13", "9.6p1"),
        ("terraform 1.8.0-rc1", "1.8.0-rc1"),
        ("usage: tool [options]", None),
    ],
)
def test_parse_version(text: str, version: str | None) -> None:
    assert parse_version(text) == version


def test_git_version_matches_git_itself(environment: EnvironmentManager, workspace: Workspace) -> None:
    found = detect_version("git", environment, workspace)
    direct = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout
    assert found is not None
    assert found.tool == "git"
    assert found.version == re.search(r"\d+\.\d+\.\d+", direct).group()  # type: ignore[union-attr]
    assert found.raw.startswith("git version")


def test_pip_through_the_interpreter(environment: EnvironmentManager, workspace: Workspace) -> None:
    from importlib.metadata import version

    found = detect_version(f"{sys.executable} -m pip", environment, workspace)
    assert found is not None
    assert found.version == version("pip")
    assert found.raw.startswith("pip ")


def test_a_python_distribution_without_a_command(
    environment: EnvironmentManager, workspace: Workspace
) -> None:
    from importlib.metadata import version

    found = detect_version("pydantic", environment, workspace)  # a library: no `pydantic` program
    assert found is not None and found.version == version("pydantic")


def test_aws_cli(environment: EnvironmentManager, workspace: Workspace) -> None:
    aws = Path(sys.executable).parent / "aws"
    if not aws.exists():
        unavailable(f"{aws} is not installed (the 'demo' extra provides it)")
    from importlib.metadata import version

    found = detect_version("aws", environment, workspace)
    assert found is not None
    assert found.version == version("awscli")
    assert found.raw.startswith("aws-cli/")


def test_a_missing_tool_has_no_version(environment: EnvironmentManager, workspace: Workspace) -> None:
    assert detect_version("no-such-tool-xyz", environment, workspace) is None


def test_the_version_is_read_in_the_tasks_environment(
    environment: EnvironmentManager, workspace: Workspace, tmp_path: Path
) -> None:
    """A tool and a library installed only in the task's virtualenv are found there, at their version."""
    venv = make_venv(tmp_path / "env")
    add_distribution(venv, "pinnedlib", "3.4.5", {"pinnedlib/__init__.py": ""})
    add_script(venv, "pinnedtool", "print('pinnedtool 7.1.0')\n")
    task_env = task_environment({"venv": str(venv)}, workspace.root, environment.path)
    tool = detect_version("pinnedtool", environment, workspace, task_env=task_env)
    assert tool is not None and tool.version == "7.1.0"
    library = detect_version("pinnedlib", environment, workspace, task_env=task_env)
    assert library is not None and library.version == "3.4.5"
    # The runtime's own environment has neither.
    assert detect_version("pinnedtool", environment, workspace) is None
    assert detect_version("pinnedlib", environment, workspace) is None


def test_a_console_script_that_prints_no_version_is_read_from_its_distribution(
    environment: EnvironmentManager, workspace: Workspace, tmp_path: Path
) -> None:
    venv = make_venv(tmp_path / "env")
    add_distribution(
        venv, "docwriter", "0.19.2", {"docwriter/__init__.py": ""}, {"rst2page": "docwriter:main"}
    )
    add_script(
        venv, "rst2page", "import sys\nprint('usage: rst2page SOURCE', file=sys.stderr)\nsys.exit(2)\n"
    )
    task_env = task_environment({"venv": str(venv)}, workspace.root, environment.path)
    found = detect_version("rst2page", environment, workspace, task_env=task_env)
    assert found is not None and found.version == "0.19.2" and found.raw.startswith("docwriter")


def test_an_npm_program_that_prints_no_version_is_read_from_its_package(
    environment: EnvironmentManager, workspace: Workspace, tmp_path: Path
) -> None:
    """``node_modules/.bin/TOOL`` links into the package that installed it; its package.json says which."""
    modules = tmp_path / "project" / "node_modules"
    package = modules / "schema-cli"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(
        '{"name": "schema-cli", "version": "5.0.0", "bin": {"schema": "./dist/index.js"}}', encoding="utf-8"
    )
    # A dependency's own package.json on the way up must not be mistaken for the program's.
    (package / "dist" / "package.json").write_text('{"name": "inner", "version": "9.9.9"}', encoding="utf-8")
    program = package / "dist" / "index.js"
    program.write_text("#!/bin/sh\necho 'error: parameter --version is unknown' >&2\nexit 2\n", "utf-8")
    program.chmod(0o755)
    (modules / ".bin").mkdir()
    (modules / ".bin" / "schema").symlink_to("../schema-cli/dist/index.js")
    task_env = task_environment(
        {"env": {"PATH": f"{modules / '.bin'}:{environment.path}"}}, workspace.root, environment.path
    )
    found = detect_version("schema", environment, workspace, task_env=task_env)
    assert found is not None and (found.version, found.raw) == ("5.0.0", "schema-cli 5.0.0")
    # A program no package.json claims has no version.
    (package / "package.json").write_text('{"name": "schema-cli", "version": "5.0.0"}', encoding="utf-8")
    assert detect_version("schema", environment, workspace, task_env=task_env) is None
