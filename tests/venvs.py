"""Real virtual environments for tests, built offline: ``python -m venv`` plus hand-written distributions.

A distribution is what ``importlib.metadata`` reads: a ``NAME-VERSION.dist-info`` directory with a
``METADATA`` file (and a ``top_level.txt`` naming its modules), next to the modules themselves in
the environment's ``site-packages``. Writing them directly gives a test a real interpreter with a
real package at a chosen version, without a network or a build backend.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

__all__ = ["add_distribution", "add_script", "make_venv", "site_packages"]


def make_venv(directory: Path) -> Path:
    """A new virtualenv at ``directory`` (no pip: nothing is downloaded); returns the directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    return directory


def site_packages(venv: Path) -> Path:
    """The environment's ``site-packages`` directory."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


def add_distribution(
    venv: Path,
    name: str,
    version: str,
    modules: Mapping[str, str],
    console_scripts: Mapping[str, str] | None = None,
) -> None:
    """Install distribution ``name`` at ``version`` whose modules are ``{"pkg/__init__.py": source}``.

    ``console_scripts`` (``{"tool": "pkg.cli:main"}``) are declared in its entry points; the scripts
    themselves are :func:`add_script`'s business.
    """
    site = site_packages(venv)
    for relative, source in modules.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", "utf-8")
    tops = sorted({relative.split("/")[0].removesuffix(".py") for relative in modules})
    (info / "top_level.txt").write_text("\n".join(tops) + "\n", "utf-8")
    files = [*modules, f"{info.name}/METADATA", f"{info.name}/top_level.txt"]
    if console_scripts:
        lines = "".join(f"{script} = {target}\n" for script, target in console_scripts.items())
        (info / "entry_points.txt").write_text(f"[console_scripts]\n{lines}", "utf-8")
        files.append(f"{info.name}/entry_points.txt")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files), "utf-8")


def add_script(venv: Path, name: str, source: str) -> Path:
    """An executable ``bin/NAME`` run by the environment's interpreter; returns its path."""
    script = venv / "bin" / name
    script.write_text(f"#!{venv / 'bin' / 'python'}\n{textwrap.dedent(source)}", encoding="utf-8")
    script.chmod(0o755)
    return script
