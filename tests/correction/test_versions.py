"""The loop's version probe never runs the workflow's own scripts."""

from __future__ import annotations

import sys
from pathlib import Path

from librarian.correction.versions import VersionCache
from librarian.runtime.sandbox import EnvironmentManager


def test_a_script_in_the_workspace_is_not_run_to_ask_its_version(tmp_path: Path) -> None:
    environment = EnvironmentManager(tmp_path / "workspaces")
    workspace = environment.workspace_for("wf-1")
    script = workspace.root / "deploy.sh"
    script.write_text("#!/bin/sh\ntouch deployed\necho 'deploy 1.0'\n", encoding="utf-8")
    script.chmod(0o755)

    found, cached = VersionCache(environment).detect(["./deploy.sh", "prod"], workspace)

    assert found is None and not cached
    assert not (workspace.root / "deployed").exists()


def test_an_installed_tool_is_probed(tmp_path: Path) -> None:
    environment = EnvironmentManager(tmp_path / "workspaces")
    workspace = environment.workspace_for("wf-2")

    found, _ = VersionCache(environment).detect([sys.executable], workspace)

    assert found is not None and found.version.startswith(f"{sys.version_info.major}.")
