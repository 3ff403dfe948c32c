"""Environments for running real tools in correction tests: no user config, no network credentials."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Tools installed with Librarian (aws) come first, as in the task sandbox.
BIN = Path(sys.executable).parent


def aws_env(home: Path) -> dict[str, str]:
    """Fake credentials and no config: the AWS CLI fails on its arguments before any network call."""
    return {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "1",
    }


def git_env(home: Path) -> dict[str, str]:
    """A git with no system or global configuration and a fixed identity."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
