"""Package introspection against real installed distributions and small fabricated ones."""

from __future__ import annotations

import importlib.metadata
import os
import time
import venv
from pathlib import Path

import pytest

from librarian.errors import NotFoundError
from librarian.ingest.chunking import chunk_document
from librarian.ingest.sources.pypackage import (
    PackageIntrospection,
    introspect_distribution,
    package_documents,
)

MYPKG = {
    "mypkg/__init__.py": '''"""A tiny package."""
import os
from collections import OrderedDict

from mypkg.core import Widget, make_widget
from mypkg.helpers import helper_public


def top(x: int, y: str = "a") -> str:
    """Join things."""
    return y * x


def _private() -> None:
    """Never documented."""


class _Hidden:
    """Never documented."""
''',
    "mypkg/core.py": '''import functools


class Widget:
    """A widget that can grow."""

    def __init__(self, size: int) -> None:
        self.size = size

    def grow(self, by: int = 1) -> int:
        """Grow the widget."""
        return self.size + by

    def _shrink(self) -> None:
        """Never documented."""

    @property
    def area(self) -> int:
        """Area in square units."""
        return self.size**2

    @functools.cached_property
    def weight(self) -> int:
        """Weight in grams."""
        return 1

    @classmethod
    def default(cls, size: int = 3) -> "Widget":
        """Build a default widget."""
        return cls(size)

    @staticmethod
    def unit() -> int:
        """One."""
        return 1


def make_widget(size: int) -> Widget:
    """Make a widget."""
    return Widget(size)
''',
    "mypkg/helpers.py": '''__all__ = ["helper_public"]


def helper_public() -> None:
    """Listed in __all__."""


def helper_unlisted() -> None:
    """Public name, but not in __all__."""
''',
    "mypkg/broken.py": 'raise ImportError("no backend for mypkg.broken")\n',
    "mypkg/exits.py": "raise SystemExit(3)\n",
    # Writes to stdout both through Python and straight to file descriptor 1.
    "mypkg/noisy.py": 'import os\nprint("{not a record")\nos.write(1, b"{nor this\\n")\n\n\n'
    'def loud() -> None:\n    """Printed on import."""\n',
    "mypkg/zeta.py": 'def after_broken() -> None:\n    """Comes after the broken modules."""\n',
    "mypkg/_internal.py": 'raise RuntimeError("private module imported")\n',
    "mypkg/tests/__init__.py": 'raise RuntimeError("test package imported")\n',
    "mypkg/core_test.py": 'raise RuntimeError("test module imported")\n',
}


def make_distribution(site: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """Write ``files`` under ``site`` with a dist-info, as ``pip install --target`` would."""
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(f"{name}\n")
    record = [*files, f"{info.name}/METADATA", f"{info.name}/top_level.txt", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in record))
    return site


@pytest.fixture(scope="module")
def mypkg_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_distribution(tmp_path_factory.mktemp("site"), "mypkg", "1.2.3", MYPKG)


@pytest.fixture(scope="module")
def mypkg(mypkg_site: Path) -> PackageIntrospection:
    return introspect_distribution("mypkg", paths=[str(mypkg_site)], timeout=60)


def installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not installed("requests"), reason="requests is not installed")
def test_requests_session_get_is_documented_under_its_shortest_public_path() -> None:
    result = introspect_distribution("requests")

    assert result.version == importlib.metadata.version("requests")
    get = next(obj for obj in result.objects if obj.qualname == "requests.Session.get")
    assert get.kind == "method"
    assert get.parent == "requests.Session"
    assert get.module == "requests.sessions"
    assert "requests.sessions.Session.get" in get.aliases
    assert get.signature is not None and get.signature.startswith("(url")
    assert get.parameters[0] == "url"
    assert get.docstring is not None and "GET request" in get.docstring
    assert get.source_file == "requests/sessions.py"
    assert "requests.sessions.Session.get" not in {obj.qualname for obj in result.objects}
    assert not any(part.startswith("_") for obj in result.objects for part in obj.qualname.split("."))
    assert not result.problems


@pytest.mark.skipif(not installed("rich"), reason="rich is not installed")
def test_rich_console_print_is_documented_with_its_parameters() -> None:
    result = introspect_distribution("rich")

    assert result.version == importlib.metadata.version("rich")
    names = {obj.qualname: obj for obj in result.objects}
    assert "objects" in names["rich.console.Console.print"].parameters
    assert names["rich.console.Console"].kind == "class"
    assert not any(".tests" in name or "._" in name for name in names)


def test_version_comes_from_the_target_interpreter(mypkg: PackageIntrospection) -> None:
    # The test process cannot see mypkg at all, so the version can only come from the child.
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("mypkg")
    assert (mypkg.distribution, mypkg.version) == ("mypkg", "1.2.3")


def test_reexports_use_the_shortest_path_and_members_are_described(mypkg: PackageIntrospection) -> None:
    objects = {obj.qualname: obj for obj in mypkg.objects}

    widget = objects["mypkg.Widget"]
    assert (widget.kind, widget.module, widget.parent) == ("class", "mypkg.core", "mypkg")
    assert widget.aliases == ("mypkg.core.Widget",)
    assert widget.signature == "(size: int) -> None"
    assert widget.source_file == "mypkg/core.py"
    grow = objects["mypkg.Widget.grow"]
    assert (grow.kind, grow.signature, grow.parameters) == ("method", "(by: int = 1) -> int", ("by",))
    assert grow.docstring == "Grow the widget."
    assert grow.parent == "mypkg.Widget"
    assert grow.aliases == ("mypkg.core.Widget.grow",)
    assert objects["mypkg.Widget.default"].kind == "classmethod"
    assert objects["mypkg.Widget.default"].parameters == ("size",)
    assert objects["mypkg.Widget.unit"].kind == "staticmethod"
    assert objects["mypkg.Widget.area"].kind == "property"
    assert objects["mypkg.Widget.area"].docstring == "Area in square units."
    assert objects["mypkg.Widget.weight"].kind == "property"
    assert objects["mypkg.top"].parameters == ("x", "y")
    assert objects["mypkg.helper_public"].aliases == ("mypkg.helpers.helper_public",)
    assert objects["mypkg"].kind == "module"
    assert objects["mypkg.core"].docstring is None


def test_private_imported_and_unlisted_names_are_excluded(mypkg: PackageIntrospection) -> None:
    names = {obj.qualname for obj in mypkg.objects} | {a for obj in mypkg.objects for a in obj.aliases}

    for excluded in (
        "mypkg._private",
        "mypkg._Hidden",
        "mypkg.Widget._shrink",
        "mypkg.Widget.__init__",
        "mypkg.os",
        "mypkg.OrderedDict",
        "mypkg.core.functools",
        "mypkg.helpers.helper_unlisted",  # not in helpers.__all__
    ):
        assert excluded not in names
    assert not any("_internal" in name or "tests" in name or "core_test" in name for name in names)
    # Private and test modules are never even imported: importing them raises.
    assert not any("imported" in problem.reason for problem in mypkg.problems)


def test_failing_imports_are_reported_and_later_modules_still_documented(
    mypkg: PackageIntrospection,
) -> None:
    problems = {problem.path: problem.reason for problem in mypkg.problems}

    assert "ImportError: no backend for mypkg.broken" in problems["mypkg.broken"]
    assert "SystemExit" in problems["mypkg.exits"]
    names = {obj.qualname for obj in mypkg.objects}
    assert {"mypkg.zeta.after_broken", "mypkg.noisy.loud"} <= names
    # noisy.py prints to stdout on import; that must not corrupt the protocol.
    assert set(problems) == {"mypkg.broken", "mypkg.exits"}


def test_max_objects_bounds_the_result_and_is_reported(mypkg_site: Path) -> None:
    result = introspect_distribution("mypkg", paths=[str(mypkg_site)], max_objects=3)

    assert len(result.objects) == 3
    assert any("max_objects=3" in problem.reason for problem in result.problems)


def test_a_module_hanging_on_import_is_killed_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "hang.pid"
    files = {
        "slowpkg/__init__.py": "",
        "slowpkg/fast.py": 'def quick() -> None:\n    """Imports at once."""\n',
        "slowpkg/hang.py": f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(600)\n",
    }
    site = make_distribution(tmp_path / "site", "slowpkg", "0.1", files)

    started = time.monotonic()
    result = introspect_distribution("slowpkg", paths=[str(site)], timeout=5)

    assert time.monotonic() - started < 30
    assert "slowpkg.fast.quick" in {obj.qualname for obj in result.objects}
    [problem] = result.problems
    assert problem.path == "slowpkg.hang"
    assert "timed out after 5s" in problem.reason
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_the_child_sees_no_secrets_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"envpkg/__init__.py": 'import os\n\n__doc__ = " ".join(sorted(os.environ))\n'}
    site = make_distribution(tmp_path / "site", "envpkg", "0.1", files)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    # Found through PYTHONPATH alone, which -I would ignore unless it is passed on deliberately.
    monkeypatch.setenv("PYTHONPATH", str(site))

    result = introspect_distribution("envpkg")

    [module] = [obj for obj in result.objects if obj.qualname == "envpkg"]
    assert module.docstring is not None
    visible = set(module.docstring.split())
    assert "PATH" in visible
    assert visible <= {"PATH", "HOME", "LANG", "PYTHONPATH", "LC_CTYPE"}


def test_another_interpreter_documents_its_own_environment(tmp_path: Path) -> None:
    venv.create(tmp_path / "env", with_pip=False, symlinks=os.name == "posix")
    python = tmp_path / "env" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    [site] = (tmp_path / "env" / "lib").glob("python3*/site-packages")
    make_distribution(site, "otherpkg", "4.5.6", {"otherpkg/__init__.py": "def hello() -> None: ...\n"})

    result = introspect_distribution("otherpkg", python=str(python))

    assert result.version == "4.5.6"
    assert "otherpkg.hello" in {obj.qualname for obj in result.objects}
    if installed("requests"):  # the test environment's packages are not the target's
        with pytest.raises(NotFoundError, match="requests"):
            introspect_distribution("requests", python=str(python))


def test_missing_distribution_and_interpreter_raise_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="not installed"):
        introspect_distribution("no-such-distribution-xyz")
    with pytest.raises(NotFoundError, match="interpreter"):
        introspect_distribution("requests", python=str(tmp_path / "no-python"))


def test_output_limit_kills_the_child_and_keeps_what_arrived(mypkg_site: Path) -> None:
    result = introspect_distribution("mypkg", paths=[str(mypkg_site)], max_output_bytes=1500)

    assert 0 < len(result.objects) < 10
    assert any("output limit" in problem.reason for problem in result.problems)


def test_package_documents_render_one_document_per_object(mypkg: PackageIntrospection) -> None:
    documents = {document.path: document for document in package_documents(mypkg)}

    assert len(documents) == len(mypkg.objects)
    grow = documents["mypkg.Widget.grow"]
    assert grow.url == "pypi://mypkg/1.2.3/mypkg.Widget.grow"
    assert grow.text.startswith(
        "# mypkg.Widget.grow\n\n```python\nmypkg.Widget.grow(by: int = 1) -> int\n```"
    )
    assert "Grow the widget." in grow.text
    assert "`mypkg.core.Widget.grow`" in grow.text
    assert grow.parsed.title == "mypkg.Widget.grow"
    [section] = grow.parsed.sections
    assert (section.path, section.entity_type) == (("mypkg", "mypkg.Widget.grow"), "method")
    assert not section.text.startswith("#")
    assert grow.metadata["kind"] == "method"
    assert grow.metadata["module"] == "mypkg.core"
    assert grow.metadata["parameters"] == ["by"]
    assert grow.metadata["signature"] == "(by: int = 1) -> int"
    [chunk] = chunk_document(grow.parsed, max_chars=2000)
    assert chunk.entity_type == "method"
    assert documents["mypkg.Widget"].text.startswith("# mypkg.Widget\n\n```python\nclass mypkg.Widget(size")
    assert "import mypkg.core" in documents["mypkg.core"].text
