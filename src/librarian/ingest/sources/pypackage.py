"""An installed Python distribution, documented by introspection: one document per public API object.

Importing a package runs its code, so nothing is imported here. A child interpreter (the target
environment's ``python``) imports the distribution's modules and streams one JSON record per line;
this process validates every record and builds the result. The child runs with ``-I`` (no
``PYTHON*`` variables, no user site, no current directory on ``sys.path``) and ``-B`` (no
bytecode written into the target environment), a scrubbed environment, stdin closed, an empty
temporary working directory, its own process group, a wall-clock timeout and a cap on output.
Because the records stream, a module that hangs or kills the interpreter costs only the modules
after it: what was already received is kept and the culprit is reported as a problem.

Document URLs are ``pypi://{distribution}/{version}/{qualified name}``, the distribution name
normalised as PyPI does (``Foo_Bar`` -> ``foo-bar``), so a chunk names exactly the installed version.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from librarian.errors import InvalidInputError, NotFoundError, TaskFailedError
from librarian.ingest.parsed import ParsedDocument, Section
from librarian.ingest.sources.base import SourceDocument, SourceProblem

# Variables a well-behaved import may need; everything else (tokens, cloud keys) stays behind.
_KEPT_ENVIRONMENT = ("PATH", "HOME", "LANG", "PYTHONPATH")
_MAX_OUTPUT_BYTES = 64 * 1024 * 1024
_DOC_CHARS = 6000
_MAX_MODULE_DEPTH = 8
_MAX_ALIASES = 10
_STDERR_TAIL_CHARS = 2000
_DOTTED_NAME = r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$"

# Runs in the target interpreter; kept to Python 3.8 syntax and the standard library because that
# interpreter may be older than ours and has only the target distribution's dependencies.
_CHILD = r"""
import functools, importlib, importlib.metadata as metadata, inspect, json, os, pkgutil, sys

CONFIG = json.loads(sys.argv[1])
# The protocol gets a private copy of stdout; whatever imported code prints lands on stderr.
OUT = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr
sys.path[0:0] = CONFIG["paths"]
ROOTS = sorted({os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)}, key=len, reverse=True)
SEEN = {}  # id -> object: holding every documented object keeps its id() unique for the whole run

class Full(Exception):
    pass

def emit(record_type, **fields):
    OUT.write(json.dumps(dict(fields, type=record_type), ensure_ascii=True, default=str) + "\n")
    OUT.flush()

def trim(text, limit):
    return text[:limit].rstrip() + "\n[...]" if text and len(text) > limit else text

def failure(exc):
    return trim("%s: %s" % (type(exc).__name__, exc), 500)

def is_test(name):
    return name in ("test", "tests", "conftest") or name.endswith("_test") or name.startswith("test_")

def source_file(obj):
    try:
        path = os.path.realpath(inspect.getsourcefile(obj) or inspect.getfile(obj))
    except (TypeError, OSError):
        return None
    root = next((r for r in ROOTS if path.startswith(r + os.sep)), None)
    return os.path.relpath(path, root).replace(os.sep, "/") if root else None

def describe(obj, kind, target):
    signature, parameters = None, []
    if kind not in ("module", "property"):
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):  # builtins without a text signature
            sig = None
        if sig is not None:
            params = list(sig.parameters.values())
            bound = params and params[0].kind <= params[0].POSITIONAL_OR_KEYWORD
            if kind in ("method", "classmethod") and bound:
                params = params[1:]  # self and cls are implied by the access path
                sig = sig.replace(parameters=params)
            signature, parameters = trim(str(sig), 2000), [p.name for p in params]
    doc = inspect.getdoc(obj if kind == "property" else target)
    return {"kind": kind, "signature": signature, "parameters": parameters,
            "doc": trim(doc, CONFIG["doc_chars"]), "source_file": source_file(target)}

def member_kind(value):
    if isinstance(value, (staticmethod, classmethod)):
        return type(value).__name__, value.__func__
    if isinstance(value, (property, functools.cached_property)):
        return "property", getattr(value, "fget", None) or getattr(value, "func", None)
    if inspect.isclass(value):
        return "class", value
    return ("method", value) if inspect.isroutine(value) else (None, None)

def document(obj, path, name, kind, target, owner, depth, home):
    if id(obj) in SEEN:
        emit("alias", id=id(obj), path=path)
        return
    if len(SEEN) >= CONFIG["max_objects"]:
        raise Full()
    SEEN[id(obj)] = obj
    module = getattr(target, "__module__", None)
    try:
        facts = describe(obj, kind, target)
    except Exception as exc:  # a broken __signature__ or __doc__ must not end the run
        emit("problem", path=path, reason="cannot inspect: " + failure(exc))
        return
    emit("object", id=id(obj), path=path, name=name, owner=owner,
         module=module if isinstance(module, str) else home, **facts)
    for attr, value in list(vars(obj).items()) if kind == "class" and depth < 3 else ():
        member, member_target = member_kind(value)
        if member and not attr.startswith("_"):
            document(value, path + "." + attr, attr, member, member_target, id(obj), depth + 1, home)

def document_members(module, name, roots):
    exported = getattr(module, "__all__", None)
    explicit = isinstance(exported, (list, tuple)) and all(isinstance(n, str) for n in exported)
    for attr in list(exported) if explicit else sorted(n for n in vars(module) if not n.startswith("_")):
        try:
            value = getattr(module, attr)
        except AttributeError:  # __all__ often lists names that exist only for type checkers
            continue
        except Exception as exc:  # a lazy attribute whose loading fails
            emit("problem", path=name + "." + attr, reason="cannot read: " + failure(exc))
            continue
        # Submodules are walked on their own; plain data has no signature or docstring of its own.
        kind = "class" if inspect.isclass(value) else "function" if inspect.isroutine(value) else None
        origin = getattr(value, "__module__", None) or ""
        # Without __all__, API is what a module defines or what a package re-exports from its own
        # distribution, not every helper it happens to import.
        public = explicit or origin == name or (hasattr(module, "__path__") and origin.split(".")[0] in roots)
        if kind and public:
            document(value, name + "." + attr, attr, kind, value, None, 0, name)

def walk(name, roots, level=0):
    emit("module", path=name)
    try:
        module = importlib.import_module(name)
    except BaseException as exc:  # SystemExit too: a module that fails to import is only skipped
        emit("problem", path=name, reason="import failed: " + failure(exc))
        return
    document(module, name, name.rpartition(".")[2], "module", module, None, 0, name)
    document_members(module, name, roots)
    if hasattr(module, "__path__") and name.count(".") < CONFIG["max_depth"] and level < CONFIG["levels"]:
        for child in sorted(info.name for info in pkgutil.iter_modules(module.__path__)):
            if not child.startswith("_") and not is_test(child):
                walk(name + "." + child, roots, level + 1)

def top_level(dist):
    # What packages_distributions() infers, restricted to one distribution (and Python 3.8-safe).
    names = set((dist.read_text("top_level.txt") or "").split())
    for file in () if names else dist.files or ():
        head = file.parts[0]
        if head != ".." and not head.endswith((".dist-info", ".egg-info", ".data")):
            if len(file.parts) > 1 or head.endswith(".py"):
                names.add(head if len(file.parts) > 1 else head[:-3])
    return sorted(n for n in names if n.isidentifier() and not n.startswith("_") and not is_test(n))

def main():
    try:
        dist = metadata.distribution(CONFIG["dist"])
    except metadata.PackageNotFoundError:
        emit("fatal", reason="distribution %r is not installed for %s" % (CONFIG["dist"], sys.executable))
        return
    emit("meta", name=dist.metadata.get("Name") or CONFIG["dist"], version=dist.version or "unknown")
    tops = CONFIG["modules"] or top_level(dist)
    if not tops:
        emit("problem", path=CONFIG["dist"], reason="no importable top-level module found")
    try:
        for name in tops:
            walk(name, {n.split(".")[0] for n in tops})
    except Full:
        emit("problem", path=CONFIG["dist"], reason="stopped at max_objects=%d" % CONFIG["max_objects"])
    emit("done")

main()
OUT.flush()
os._exit(0)  # threads or atexit hooks started by imported code must not outlive the report
"""


@dataclass(frozen=True)
class ApiObject:
    """One public API object of a distribution.

    Attributes:
        qualname: the shortest public import path, e.g. ``requests.Session.get``.
        kind: ``module``, ``class``, ``function``, ``method``, ``classmethod``, ``staticmethod``
            or ``property``.
        module: the module that defines the object, e.g. ``requests.sessions``.
        signature: ``inspect.signature`` as text, without ``self``/``cls``; None when unknown.
        parameters: the signature's parameter names.
        docstring: ``inspect.getdoc``, trimmed to the documentation budget.
        source_file: the defining file relative to its ``sys.path`` entry (site-packages), if known.
        parent: the namespace holding ``qualname`` (``requests.Session``); None for top-level modules.
        aliases: the object's other public paths, e.g. ``requests.sessions.Session.get``.
    """

    qualname: str
    kind: str
    module: str
    signature: str | None
    parameters: tuple[str, ...]
    docstring: str | None
    source_file: str | None
    parent: str | None
    aliases: tuple[str, ...] = ()


@dataclass
class PackageIntrospection:
    """What introspecting one distribution found, and what went wrong along the way."""

    distribution: str
    version: str
    objects: list[ApiObject] = field(default_factory=list)
    problems: list[SourceProblem] = field(default_factory=list)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Meta(_Record):
    type: Literal["meta"]
    name: str
    version: str


class _Note(_Record):
    """``module`` marks the module being imported; ``fatal`` means the distribution is missing."""

    type: Literal["module", "problem", "fatal", "done"]
    path: str = ""
    reason: str = ""


class _Object(_Record):
    type: Literal["object"]
    id: int
    path: Annotated[str, Field(pattern=_DOTTED_NAME)]
    name: str
    owner: int | None
    kind: Literal["module", "class", "function", "method", "classmethod", "staticmethod", "property"]
    module: str
    signature: str | None
    parameters: list[str]
    doc: str | None
    source_file: str | None


class _Alias(_Record):
    type: Literal["alias"]
    id: int
    path: Annotated[str, Field(pattern=_DOTTED_NAME)]


_RECORDS: TypeAdapter[_Meta | _Note | _Object | _Alias] = TypeAdapter(
    Annotated[_Meta | _Note | _Object | _Alias, Field(discriminator="type")]
)


@dataclass
class _ChildRun:
    lines: list[bytes] = field(default_factory=list)
    stderr_tail: str = ""
    returncode: int | None = None
    timed_out: bool = False
    overflowed: bool = False


def introspect_distribution(
    dist: str,
    *,
    python: str = sys.executable,
    timeout: float = 120.0,
    max_objects: int = 5000,
    modules: Sequence[str] | None = None,
    paths: Sequence[str] = (),
    doc_chars: int = _DOC_CHARS,
    max_output_bytes: int = _MAX_OUTPUT_BYTES,
    levels: int | None = None,
) -> PackageIntrospection:
    """Import ``dist`` in a child interpreter and describe its public API.

    Modules are the distribution's top-level packages (``top_level.txt``, else inferred from
    ``RECORD``) walked recursively; names starting with ``_`` and test packages are skipped,
    ``__all__`` is respected where defined, and without it a module contributes what it defines
    (a package also what it re-exports from the distribution). Module-level data is not documented.

    Args:
        dist: the distribution name as installed, e.g. ``requests``.
        python: the interpreter of the environment to document (its site-packages are used).
        timeout: wall-clock seconds for the whole run; on expiry the child is killed, what it
            reported is kept and the module it was importing is reported as a problem.
        max_objects: stop after this many objects (modules included).
        modules: walk these modules instead of the distribution's top-level ones.
        paths: directories put first on the child's ``sys.path``, e.g. a ``pip install --target``
            directory; the entries of ``PYTHONPATH``, when set, follow them.
        doc_chars: docstrings longer than this are cut.
        max_output_bytes: cap on the child's output; beyond it the child is killed.
        levels: how many levels of submodules below each walked module are walked (0: the
            modules themselves only, with their classes and functions; ``None``: all).

    Returns:
        The version read with ``importlib.metadata`` in the child, the objects in walk order and
        problems (modules that failed to import, timeouts, limits reached).

    Raises:
        InvalidInputError: a limit is not positive, or the interpreter cannot be started.
        NotFoundError: the interpreter does not exist, or ``dist`` is not installed for it.
        TaskFailedError: the child died or timed out before reporting the distribution's version.

    Example:
        >>> result = introspect_distribution("requests")  # doctest: +SKIP
        >>> get = next(o for o in result.objects if o.qualname == "requests.Session.get")
        >>> get.kind, get.parent, get.aliases
        ('method', 'requests.Session', ('requests.sessions.Session.get',))
    """
    if timeout <= 0 or max_objects < 1 or doc_chars < 1 or max_output_bytes < 1 or (levels or 0) < 0:
        raise InvalidInputError(
            "timeout, max_objects, doc_chars and max_output_bytes must be positive, levels not negative"
        )
    interpreter = shutil.which(python)
    if interpreter is None:
        raise NotFoundError(f"Python interpreter {python!r} not found", hint="pass an executable path")
    env = {name: os.environ[name] for name in _KEPT_ENVIRONMENT if name in os.environ}
    # -I ignores PYTHONPATH, so its entries travel in the configuration instead.
    search_path = [*paths, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    config = dict(dist=dist, modules=list(modules or []), paths=search_path, doc_chars=doc_chars)
    config |= dict(max_objects=max_objects, max_depth=_MAX_MODULE_DEPTH)
    config |= dict(levels=_MAX_MODULE_DEPTH if levels is None else levels)
    argv = [interpreter, "-I", "-B", "-c", _CHILD, json.dumps(config)]
    run = _run_child(argv, env, timeout, max_output_bytes)
    return _assemble(dist, interpreter, run, timeout, max_objects, doc_chars)


def package_documents(result: PackageIntrospection) -> list[SourceDocument]:
    """One ``SourceDocument`` per object: Markdown with the signature in a code block, then the docstring.

    ``path`` is the qualified name and ``url`` is ``pypi://{distribution}/{version}/{qualified name}``;
    ``metadata`` holds ``kind``, ``signature``, ``module``, ``parameters``, ``aliases``,
    ``source_file``, ``distribution`` and ``version``.
    """
    distribution = re.sub(r"[-_.]+", "-", result.distribution).lower()
    version = quote(result.version, safe="+!")
    documents = []
    for obj in result.objects:
        body = _render(obj, result)
        metadata = {key: getattr(obj, key) for key in ("kind", "signature", "module", "source_file")}
        metadata |= {"parameters": list(obj.parameters), "aliases": list(obj.aliases)}
        metadata |= {"distribution": result.distribution, "version": result.version}
        documents.append(
            SourceDocument(
                path=obj.qualname,
                url=f"pypi://{distribution}/{version}/{obj.qualname}",
                text=f"# {obj.qualname}\n\n{body}",
                parsed=ParsedDocument(
                    title=obj.qualname,
                    sections=[Section((result.distribution, obj.qualname), body, obj.kind)],
                ),
                metadata=metadata,
            )
        )
    return documents


def _render(obj: ApiObject, result: PackageIntrospection) -> str:
    if obj.kind == "module":
        code = f"import {obj.qualname}"
    elif obj.kind == "property":
        code = f"{obj.qualname}  # property"
    else:
        prefix = "class " if obj.kind == "class" else ""
        code = f"{prefix}{obj.qualname}{obj.signature or ('' if obj.kind == 'class' else '(...)')}"
    parts = [f"```python\n{code}\n```", obj.docstring or "(no docstring)"]
    facts = f"{obj.kind.capitalize()} in `{obj.module}`, {result.distribution} {result.version}."
    if obj.aliases:
        facts += " Also importable as " + ", ".join(f"`{alias}`" for alias in obj.aliases) + "."
    if obj.source_file:
        facts += f" Source: `{obj.source_file}`."
    return "\n\n".join([*parts, facts])


def _run_child(argv: list[str], env: dict[str, str], timeout: float, limit: int) -> _ChildRun:
    run = _ChildRun()
    with tempfile.TemporaryDirectory(prefix="librarian-pypackage-") as cwd:
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,  # one kill reaches whatever the imported code spawned
            )
        except OSError as exc:
            raise InvalidInputError(
                f"cannot start {argv[0]}: {exc}", hint="pass a Python interpreter"
            ) from exc
        readers = [
            threading.Thread(target=_read_stdout, args=(process, run, limit), daemon=True),
            threading.Thread(target=_read_stderr, args=(process, run), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            run.returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            run.timed_out = True
        finally:
            if process.poll() is None:
                _kill(process)
            run.returncode = process.wait()
        for reader in readers:
            # A grandchild that escaped the process group may hold the pipes open; do not wait on it.
            reader.join(timeout=5)
    return run


def _read_stdout(process: subprocess.Popen[bytes], run: _ChildRun, limit: int) -> None:
    assert process.stdout is not None
    budget = limit
    while line := process.stdout.readline(budget + 1):
        budget -= len(line)
        if budget < 0:
            run.overflowed = True
            _kill(process)
            return
        run.lines.append(line)


def _read_stderr(process: subprocess.Popen[bytes], run: _ChildRun) -> None:
    assert process.stderr is not None
    while chunk := process.stderr.read(4096):
        run.stderr_tail = (run.stderr_tail + chunk.decode("utf-8", "replace"))[-_STDERR_TAIL_CHARS:]


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except ProcessLookupError:
        pass  # already gone


def _assemble(
    dist: str, python: str, run: _ChildRun, timeout: float, max_objects: int, doc_chars: int
) -> PackageIntrospection:
    meta: _Meta | None = None
    records: dict[int, _Object] = {}
    direct: dict[int, set[str]] = {}
    problems: list[SourceProblem] = []
    current, done, malformed = dist, False, 0
    for line in run.lines:
        try:
            record = _RECORDS.validate_json(line)
        except ValidationError:
            malformed += 1
            continue
        if isinstance(record, _Meta):
            meta = meta or record
        elif isinstance(record, _Object | _Alias):
            if isinstance(record, _Object):
                records.setdefault(record.id, record)
            direct.setdefault(record.id, set()).add(record.path)
        elif record.type == "fatal":
            raise NotFoundError(record.reason, hint=f"install {dist} for {python}, or pass another python")
        elif record.type == "module":
            current = record.path
        elif record.type == "problem":
            problems.append(SourceProblem(record.path, record.reason))
        else:
            done = True
    stderr = f"; stderr ends with: {run.stderr_tail.strip()[-500:]}" if run.stderr_tail.strip() else ""
    reason = "" if done else f"the child interpreter exited with code {run.returncode} in {current}{stderr}"
    if run.timed_out or run.overflowed:
        limit = f"timed out after {timeout:g}s" if run.timed_out else "output limit reached"
        reason = (
            f"{limit} while importing or inspecting {current}; the child was killed, later modules skipped"
        )
    if meta is None:
        raise TaskFailedError(f"could not introspect {dist} with {python}: {reason or 'no report'}")
    if reason:
        problems.append(SourceProblem(current, reason))
    if malformed:
        problems.append(SourceProblem(dist, f"{malformed} malformed record(s) from the child ignored"))
    result = PackageIntrospection(meta.name, meta.version, problems=problems)
    resolved: dict[int, set[str]] = {}

    def paths_of(key: int, visiting: frozenset[int]) -> set[str]:
        # A class member is reachable under every path of its class; the owner chain is acyclic
        # for honest output, and ``visiting`` keeps dishonest output from recursing forever.
        if key not in resolved:
            found = set(direct.get(key, ()))
            owner = records[key].owner
            if owner is not None and owner in records and owner not in visiting and len(visiting) < 8:
                found |= {f"{p}.{records[key].name}" for p in paths_of(owner, visiting | {key})}
            resolved[key] = found
        return resolved[key]

    taken: set[str] = set()
    for key, record in records.items():
        if len(result.objects) >= max_objects:
            break
        ranked = sorted(paths_of(key, frozenset()), key=lambda p: (p.count("."), len(p), p))
        free = [p for p in ranked if p not in taken]
        if not free:
            continue
        taken.add(free[0])
        doc = record.doc[:doc_chars] if record.doc else None
        result.objects.append(
            ApiObject(
                qualname=free[0],
                kind=record.kind,
                module=record.module,
                signature=record.signature,
                parameters=tuple(record.parameters),
                docstring=doc,
                source_file=record.source_file,
                parent=free[0].rpartition(".")[0] or None,
                aliases=tuple(p for p in ranked if p != free[0])[:_MAX_ALIASES],
            )
        )
    return result
