"""Python functions as tools: the public functions of a module, or the entry points of a group.

``{"module": "package.module"}`` lists every public function the module defines (its ``__all__``
when it has one) that has a docstring; ``"functions": [...]`` picks some by name instead.
``{"entry_point_group": "librarian.tools"}`` lists every entry point of that group in the installed
distributions; each names a function (``pkg.mod:func``) or a module (all its documented functions).
``"path"`` adds directories to search for the modules, here and when the tools are called.

The module is imported in this process to read its functions' signatures (importing runs its
top-level code: quarantine covers calls, not this). The type hints become the input schema through
pydantic (``TypeAdapter(function).json_schema()``), the docstring's first paragraph the description,
and a Google-style ``Args:`` section the parameters' descriptions. Calls run out of process
(:mod:`librarian.discovery.callers.python`), so the binding records where the module was found.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from pydantic import TypeAdapter
from pydantic.errors import PydanticUndefinedAnnotation, PydanticUserError

from librarian.discovery.registry import may_run_programs
from librarian.discovery.sync import Listing
from librarian.errors import ForbiddenError, InvalidInputError
from librarian.knowledge.access import Principal

if TYPE_CHECKING:
    from librarian.app import Librarian

__all__ = ["argument_docs", "function_manifest", "list_python_functions"]

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ARGS_HEADER = re.compile(r"^(\s*)(?:Args|Arguments|Parameters|Keyword Args|Keyword Arguments):\s*$")
_ARG_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
# Modules this importer reloaded or imported, by file modification time: a sync re-reads a module
# that changed on disk instead of the copy imported at the first sync.
_SEEN: dict[str, int] = {}


def list_python_functions(spec: Mapping[str, Any], lib: Librarian, principal: Principal) -> Listing:
    """The tools of a Python module (``spec["module"]``) or entry-point group (``spec["entry_point_group"]``).

    Raises:
        ForbiddenError: the caller is not the server's operator (importing a module runs its code here).
        InvalidInputError: neither or both keys, a module that cannot be imported (naming it and
            why), or a named function the module lacks.
    """
    if not may_run_programs(principal):
        raise ForbiddenError(
            "importing Python tools is for the server's operator: importing a module runs its code here",
            hint="run `librarian tools import python ...` on the server's data directory",
        )
    module_name, group = spec.get("module"), spec.get("entry_point_group")
    if (module_name is None) == (group is None):
        raise InvalidInputError(
            "python source: give exactly one of 'module' and 'entry_point_group'",
            hint='e.g. {"module": "mytools.weather"} or {"entry_point_group": "librarian.tools"}',
        )
    paths = _paths(spec.get("path"))
    network = spec.get("network", False)
    if not isinstance(network, bool):
        raise InvalidInputError("python source: 'network' must be true or false")
    listing = Listing()
    with _search_path(paths):
        if module_name is not None:
            if not isinstance(module_name, str) or not _MODULE_NAME.fullmatch(module_name):
                raise InvalidInputError(f"python source: module {module_name!r} is not a module name")
            module = _import(module_name)
            listing.version = _text(getattr(module, "__version__", None))
            wanted = spec.get("functions")
            if wanted is not None and (
                not isinstance(wanted, list) or not all(isinstance(name, str) for name in wanted)
            ):
                raise InvalidInputError(f"python source {module_name}: 'functions' must be a list of names")
            targets = _named(module, wanted, listing.errors) if wanted else _documented(module)
        else:
            if not isinstance(group, str) or not group.strip():
                raise InvalidInputError("python source: 'entry_point_group' must be a group name")
            targets = _entry_point_targets(group, listing)
    for name, function in targets:
        try:
            manifest = function_manifest(function, name, paths=paths, network=network)
        except InvalidInputError as exc:
            listing.errors.append(exc.message)
            continue
        manifest["version"] = listing.version
        listing.manifests.append(manifest)
    return listing


def function_manifest(
    function: Callable[..., Any], name: str, *, paths: Sequence[str] = (), network: bool = False
) -> dict[str, Any]:
    """The tool manifest of ``function``, named ``module:function`` (``module.function`` is its ``toolId``).

    Raises:
        InvalidInputError: the signature cannot be passed JSON by name (``*args``, positional-only
            parameters, a type pydantic cannot describe); the message names the function and why.
    """
    module_name, _, function_name = name.rpartition(":")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"function {_dotted(name)}: its signature cannot be read: {exc}; skipped"
        ) from exc
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.VAR_POSITIONAL):
            raise InvalidInputError(
                f"function {_dotted(name)}: parameter {parameter.name!r} cannot be passed by name; skipped"
            )
    try:
        # A function is a valid TypeAdapter argument (its arguments schema); the stubs say types only.
        schema = TypeAdapter[Any](cast(Any, function)).json_schema()
    except (PydanticUserError, PydanticUndefinedAnnotation) as exc:
        raise InvalidInputError(
            f"function {_dotted(name)}: its type hints cannot become a JSON Schema: {exc.message}; skipped"
        ) from exc
    if schema.get("type") != "object":
        raise InvalidInputError(
            f"function {_dotted(name)}: its parameters do not make a JSON object; skipped"
        )
    doc = inspect.getdoc(function) or ""
    described = argument_docs(doc)
    properties = schema.get("properties") or {}
    for parameter, prop in properties.items():
        if isinstance(prop, dict):
            prop.pop("title", None)
            if parameter in described:
                prop["description"] = described[parameter]
    if signature.parameters and not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
        schema["additionalProperties"] = False
    summary = doc.split("\n\n", 1)[0].strip()
    binding: dict[str, Any] = {"module": module_name, "function": function_name}
    root = _module_root(module_name)
    search = list(dict.fromkeys([*paths, *([root] if root else [])]))
    if search:
        binding["path"] = search
    if network:
        binding["network"] = True
    return {
        "toolId": _dotted(name),
        "name": function_name.rsplit(".", 1)[-1],
        "type": "python",
        "description": " ".join(summary.split()) or f"The Python function {_dotted(name)}.",
        "inputSchema": schema,
        "binding": binding,
    }


def argument_docs(doc: str) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section of ``doc``.

    Example:
        >>> argument_docs("Add.\\n\\nArgs:\\n  a (int): the first.\\n  b: the second,\\n    continued.")
        {'a': 'the first.', 'b': 'the second, continued.'}
    """
    found: dict[str, str] = {}
    lines = doc.splitlines()
    for index, line in enumerate(lines):
        header = _ARGS_HEADER.match(line)
        if header is None:
            continue
        base = len(header[1])
        entry_indent: int | None = None
        current: str | None = None
        for body in lines[index + 1 :]:
            if not body.strip():
                continue
            indent = len(body) - len(body.lstrip())
            if indent <= base:
                break
            entry_indent = indent if entry_indent is None else entry_indent
            match = _ARG_ENTRY.match(body.strip()) if indent == entry_indent else None
            if match is not None:
                current = match[1]
                found[current] = match[2].strip()
            elif current is not None and indent > entry_indent:
                found[current] = f"{found[current]} {body.strip()}".strip()
    return found


def _paths(value: Any) -> list[str]:
    if value is None:
        return []
    entries = [value] if isinstance(value, str) else value
    if not isinstance(entries, list) or not all(isinstance(entry, str) and entry for entry in entries):
        raise InvalidInputError("python source: 'path' must be a directory or a list of directories")
    resolved = [str(Path(entry).expanduser().resolve()) for entry in entries]
    missing = [entry for entry in resolved if not Path(entry).is_dir()]
    if missing:
        raise InvalidInputError(f"python source: 'path' names no directory at {', '.join(missing)}")
    return resolved


@contextmanager
def _search_path(paths: list[str]) -> Iterator[None]:
    """``paths`` ahead on ``sys.path`` while the source is listed."""
    added = [path for path in paths if path not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for path in added:
            if path in sys.path:
                sys.path.remove(path)


def _import(name: str) -> ModuleType:
    """Import ``name`` (again when its file changed since this importer last read it).

    Raises:
        InvalidInputError: it cannot be found or its import fails, naming the module and the cause.
    """
    importlib.invalidate_caches()
    try:
        module = sys.modules.get(name)
        if module is None:
            module = importlib.import_module(name)
        elif _changed(module):
            module = importlib.reload(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        raise InvalidInputError(
            f"python source: no module named {name!r}"
            + (f" (its import needs {missing!r}, which is missing)" if missing != name else ""),
            hint="install it in Librarian's environment, or give the directory that holds it as 'path'",
        ) from exc
    except Exception as exc:  # the module's own code failed: its error is the answer, whatever it is
        raise InvalidInputError(
            f"python source: importing module {name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    _changed(module)
    return module


def _changed(module: ModuleType) -> bool:
    """Whether the module's file changed since it was last seen here (recording it as seen)."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return False
    try:
        stamp = os.stat(file).st_mtime_ns
    except OSError:
        return False
    before = _SEEN.get(module.__name__)
    _SEEN[module.__name__] = stamp
    return before is not None and before != stamp


def _documented(module: ModuleType) -> list[tuple[str, Callable[..., Any]]]:
    """The public functions ``module`` defines (or exports in ``__all__``) that have a docstring."""
    exported = getattr(module, "__all__", None)
    names = [str(n) for n in exported] if isinstance(exported, list | tuple) else sorted(vars(module))
    found: list[tuple[str, Callable[..., Any]]] = []
    for attribute in names:
        value = getattr(module, attribute, None)
        if attribute.startswith("_") or not inspect.isfunction(value) or not inspect.getdoc(value):
            continue
        if exported is None and value.__module__ != module.__name__:
            continue  # imported from elsewhere, not this module's own
        found.append((f"{module.__name__}:{attribute}", value))
    return found


def _named(module: ModuleType, wanted: list[str], errors: list[str]) -> list[tuple[str, Callable[..., Any]]]:
    found = []
    for attribute in dict.fromkeys(wanted):
        value = getattr(module, attribute, None)
        if value is None:
            errors.append(f"python source {module.__name__}: no function {attribute!r} in the module")
        elif not callable(value) or inspect.isclass(value):
            errors.append(f"python source {module.__name__}: {attribute!r} is not a function")
        else:
            found.append((f"{module.__name__}:{attribute}", value))
    return found


def _entry_point_targets(group: str, listing: Listing) -> list[tuple[str, Callable[..., Any]]]:
    """The functions the entry points of ``group`` name (every documented one of a named module)."""
    importlib.invalidate_caches()
    points = sorted(importlib.metadata.entry_points(group=group), key=lambda point: point.name)
    if not points:
        listing.errors.append(f"entry point group {group!r}: no installed distribution declares one")
    versions: set[tuple[str, str]] = set()
    found: list[tuple[str, Callable[..., Any]]] = []
    for point in points:
        where = f"entry point {point.name} = {point.value} (group {group})"
        try:
            target = point.load()
        except Exception as exc:  # the plugin's import failed: reported, the other entry points kept
            listing.errors.append(f"{where}: loading it failed: {type(exc).__name__}: {exc}")
            continue
        if point.dist is not None and point.dist.version:
            versions.add((point.dist.name, point.dist.version))
        if isinstance(target, ModuleType):
            found += _documented(target)
        elif inspect.isfunction(target) or inspect.isbuiltin(target):
            found.append((f"{point.module}:{point.attr}", target))
        else:
            listing.errors.append(f"{where}: names a {type(target).__name__}, not a function or module")
    # One version for the group only when every plugin comes from one distribution.
    listing.version = next(iter(versions))[1] if len(versions) == 1 else None
    return found


def _module_root(module_name: str) -> str | None:
    """The ``sys.path`` directory ``module_name`` was imported from (the child must search it too)."""
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return None
    depth = len(module_name.split(".")) + (1 if Path(file).name.startswith("__init__.") else 0)
    parents = Path(file).resolve().parents
    return str(parents[depth - 1]) if len(parents) >= depth else None


def _dotted(name: str) -> str:
    return name.replace(":", ".")


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
