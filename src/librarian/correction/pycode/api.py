"""The installed API of a Python distribution: its indexed pages, and what the task's interpreter says.

The package connector indexes one page per public object (its qualified name, kind, signature,
parameters and docstring) at the installed version; :class:`ApiIndex` answers from those pages
which names a module or class has, which objects carry a given name anywhere in the distribution,
and what a function's parameters and docstring are. Constants (``numpy.nan``) are not pages, so
:func:`probe_api` asks the task's own interpreter too: the public names of a module or class, a
callable's signature, and which of a list of modules provide a name. The probe runs in the sandbox,
in the task's environment, like the task itself.

Example:
    >>> entry = ApiEntry("pkg.prod", "function", "(a, axis=None)", ("a", "axis"), "Return the product.")
    >>> index = ApiIndex([entry])
    >>> [e.qualname for e in index.members("pkg")], index.get("pkg.prod").parameters
    (['pkg.prod'], ('a', 'axis'))
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from librarian.correction.tool_docs import DocPage
from librarian.errors import InvalidInputError
from librarian.runtime.contracts import Workspace
from librarian.runtime.sandbox import EnvironmentManager

__all__ = ["ApiEntry", "ApiIndex", "Probe", "probe_api"]

_FENCE = re.compile(r"```[^\n]*\n.*?```", re.DOTALL)
_PROBE_TIMEOUT = 60.0

# Runs in the task's interpreter (any Python 3.8+, standard library only); prints one JSON object.
_PROBE = r"""
import importlib, inspect, json, sys
ask = json.loads(sys.argv[1])
def resolve(path):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)
out = {"members": {}, "signatures": {}, "providers": {}, "docs": {}, "lineage": {}}
for path in ask.get("members", []):
    try:
        out["members"][path] = sorted(n for n in dir(resolve(path)) if not n.startswith("_"))
    except Exception:
        out["members"][path] = None
for path in ask.get("signatures", []):
    try:
        target = resolve(path)
        out["signatures"][path] = str(inspect.signature(target))
        out["docs"][path] = (inspect.getdoc(target) or "")[:60000]
        if inspect.isclass(target):
            bases = [b for b in target.__mro__[1:] if b.__module__ != "builtins" and b.__doc__]
            out["lineage"][path] = "\n\n".join(inspect.cleandoc(b.__doc__) for b in bases)[:60000]
    except Exception:
        out["signatures"][path] = None
name = ask.get("provider_name")
for module in ask.get("provider_modules", []):
    try:
        if hasattr(importlib.import_module(module), name):
            out["providers"][module] = True
    except Exception:
        pass
print(json.dumps(out))
"""


@dataclass(frozen=True)
class ApiEntry:
    """One public object: its qualified name, kind, signature, parameter names and docstring."""

    qualname: str
    kind: str
    signature: str | None = None
    parameters: tuple[str, ...] = ()
    doc: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The last part of the qualified name."""
        return self.qualname.rsplit(".", 1)[-1]


class ApiIndex:
    """The documented objects of a distribution by qualified name (aliases included)."""

    def __init__(self, entries: Iterable[ApiEntry]) -> None:
        self._by_name: dict[str, ApiEntry] = {}
        for entry in entries:
            for path in (entry.qualname, *entry.aliases):
                self._by_name.setdefault(path, entry)

    @classmethod
    def from_pages(cls, pages: Sequence[DocPage]) -> ApiIndex:
        """The entries of the package connector's pages (other pages are skipped)."""
        entries = []
        for page in pages:
            attributes = page.attributes
            kind = attributes.get("kind")
            if not isinstance(kind, str):
                continue
            parameters = attributes.get("parameters") or []
            aliases = attributes.get("aliases") or []
            entries.append(
                ApiEntry(
                    qualname=page.entity_name,
                    kind=kind,
                    signature=attributes.get("signature")
                    if isinstance(attributes.get("signature"), str)
                    else None,
                    parameters=tuple(str(p) for p in parameters),
                    doc=_docstring(page.content),
                    aliases=tuple(str(a) for a in aliases),
                )
            )
        return cls(entries)

    def get(self, path: str) -> ApiEntry | None:
        """The object documented at ``path`` (its own name or an alias)."""
        return self._by_name.get(path)

    def members(self, parent: str) -> list[ApiEntry]:
        """The objects documented directly under ``parent`` (a module or a class), by name."""
        prefix = parent + "."
        found = {
            path: entry
            for path, entry in self._by_name.items()
            if path.startswith(prefix) and "." not in path[len(prefix) :]
        }
        return [found[path] for path in sorted(found)]

    def named(self, name: str) -> list[str]:
        """Every documented path whose last part is ``name``."""
        return sorted(path for path in self._by_name if path.rsplit(".", 1)[-1] == name)

    def classes_named(self, name: str) -> list[str]:
        """Documented classes called ``name`` (a ``'Name' object`` error's owner), by qualified name."""
        return sorted(
            {e.qualname for path, e in self._by_name.items() if e.kind == "class" and e.name == name}
        )

    def __len__(self) -> int:
        return len(self._by_name)


@dataclass(frozen=True)
class Probe:
    """What the task's interpreter said (see :func:`probe_api`)."""

    members: dict[str, list[str] | None] = field(default_factory=dict)
    signatures: dict[str, str | None] = field(default_factory=dict)
    docs: dict[str, str] = field(default_factory=dict)
    providers: tuple[str, ...] = ()
    # For a class: the docstrings of its base classes, where a parameter it inherits is documented
    # (and its history: ".. versionchanged:: Replace ``missing`` with ``load_default``").
    lineage: dict[str, str] = field(default_factory=dict)


def probe_api(
    environment: EnvironmentManager,
    workspace: Workspace,
    python: str,
    overrides: dict[str, str],
    *,
    members: Sequence[str] = (),
    signatures: Sequence[str] = (),
    provider_name: str = "",
    provider_modules: Sequence[str] = (),
) -> Probe:
    """Ask the task's interpreter about its installed API (an empty answer when it cannot say).

    Args:
        environment, workspace: the sandbox and the task's workspace.
        python: the task's interpreter; overrides: the task's environment variables.
        members: modules or classes whose public names to list.
        signatures: callables whose signature (and docstring) to read.
        provider_name, provider_modules: which of these modules have an attribute of that name.
    """
    ask: dict[str, Any] = {
        "members": list(members),
        "signatures": list(signatures),
        "provider_name": provider_name,
        "provider_modules": list(provider_modules),
    }
    try:
        outcome = environment.run(
            [python, "-I", "-c", _PROBE, json.dumps(ask)],
            workspace,
            env_overrides=overrides,
            timeout_seconds=_PROBE_TIMEOUT,
        )
    except InvalidInputError:
        return Probe()
    if outcome.exit_code != 0:
        return Probe()
    try:
        data = json.loads(outcome.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return Probe()
    return Probe(
        members={k: v for k, v in (data.get("members") or {}).items()},
        signatures={k: v for k, v in (data.get("signatures") or {}).items()},
        docs={k: str(v) for k, v in (data.get("docs") or {}).items()},
        providers=tuple(sorted(data.get("providers") or {})),
        lineage={k: str(v) for k, v in (data.get("lineage") or {}).items()},
    )


def _docstring(content: str) -> str:
    """The docstring part of a package page (the heading and the signature block left out)."""
    text = _FENCE.sub("", content, count=1)
    lines = [line for line in text.splitlines() if not line.startswith("# ")]
    return "\n".join(lines).strip()
