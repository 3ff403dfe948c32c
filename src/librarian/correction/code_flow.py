"""What the loop does that is particular to a failed *code* task (Python source run by ``code_executor``).

The loop (:mod:`~librarian.correction.loop`) is the same for commands and code; this module supplies
the code side:

- reading the task's code and its traceback (:mod:`~librarian.correction.pycode.failure`);
- identifying what the failure is about through the code's imports and aliases: the module or class
  that lost a name, the function that no longer takes a keyword (:func:`identify`);
- finding, in the task's own interpreter, which distribution provides that module and at which
  version (:func:`detect_version`), so the docs of *that* version are researched;
- indexing that distribution's installed API on demand with the package connector;
- candidate syntax-tree edits (:mod:`~librarian.correction.pycode.candidates`), and learned edits
  applied to this code.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from librarian.correction.models import CorrectionAttempt
from librarian.correction.on_demand import DocsOnDemand, OnDemand
from librarian.correction.options import CorrectionOption
from librarian.correction.problem import Problem, problem_signature
from librarian.correction.pycode.api import ApiIndex, probe_api
from librarian.correction.pycode.candidates import (
    CodeScene,
    code_candidates,
    members_of,
    signature_parameters,
    word_substitutions,
)
from librarian.correction.pycode.edits import apply_edits, describe
from librarian.correction.pycode.failure import PythonError, parse_python_error
from librarian.correction.pycode.forwarded import documented_keywords, forwarded_class, takes_any_keyword
from librarian.correction.pycode.methods import method_value_reads
from librarian.correction.pycode.source import (
    BUILTIN_VALUES,
    imported_modules,
    imports,
    local_types,
    qualified,
    returned_by,
)
from librarian.correction.state import LoopRun, StepRecorder
from librarian.correction.strategies import learned_fix_confidence
from librarian.errors import InvalidInputError
from librarian.research.error_signature import normalize_error
from librarian.runtime.correctors import FailedTask
from librarian.runtime.sandbox import EnvironmentManager
from librarian.runtime.version_probe import ToolVersion

__all__ = [
    "CODE_EXECUTOR",
    "CodeFailure",
    "CodeKind",
    "broader_query",
    "candidates",
    "code_failure",
    "detect_version",
    "ensure_docs",
    "identify",
    "learned_options",
    "problem",
    "research_query",
]

CODE_EXECUTOR = "code_executor"
_PROBE_TIMEOUT = 60.0

# Runs in the task's interpreter: which distribution provides each top-level module, its version,
# and the top-level modules of the distributions it requires. Python 3.8+, standard library only.
_DISTRIBUTIONS = r"""
import importlib.metadata as md, json, re, sys
modules = json.loads(sys.argv[1])
if hasattr(md, "packages_distributions"):
    providers = md.packages_distributions()
else:
    providers = {}
    for dist in md.distributions():
        for top in (dist.read_text("top_level.txt") or "").split():
            providers.setdefault(top, []).append(dist.metadata["Name"])
tops = {}
for top, names in providers.items():
    for name in names:
        tops.setdefault(re.sub(r"[-_.]+", "-", name).lower(), []).append(top)
out = {}
for module in modules:
    names = providers.get(module) or []
    if not names:
        continue
    name = names[0]
    try:
        version = md.version(name)
    except Exception:
        continue
    required = []
    for requirement in md.requires(name) or []:
        if "extra ==" in requirement:
            continue
        wanted = re.split(r"[\s;<>=!~\[(]", requirement, 1)[0]
        required += tops.get(re.sub(r"[-_.]+", "-", wanted).lower(), [])
    out[module] = {"distribution": name, "version": version, "requires": sorted(set(required))}
print(json.dumps(out))
"""


@dataclass(frozen=True)
class CodeFailure:
    """A failed code task as the loop reads it.

    Attributes:
        code: the task's source; exit_code, stderr, stdout: how it ran; succeeded: it exited as
            expected but warned. error: what the traceback says. base: the module or class the error is
            about (a dotted path through the code's imports). callee: for a keyword error, the
            function called. top: the top-level module of ``base``. requires: top-level modules of the
            distributions that one depends on (filled by :func:`detect_version`).
    """

    code: str
    exit_code: int | None
    stderr: str
    stdout: str
    succeeded: bool
    error: PythonError | None = None
    base: str = ""
    callee: str = ""
    top: str = ""
    requires: tuple[str, ...] = ()


def code_failure(failed: FailedTask) -> CodeFailure | None:
    """The failed code of a ``code_executor`` task, or ``None``."""
    code = failed.payload.get("code")
    if failed.executor_type != CODE_EXECUTOR or not isinstance(code, str) or not code.strip():
        return None
    notes = failed.feedback_notes or {}
    details = notes.get("details") if isinstance(notes.get("details"), dict) else {}
    assert isinstance(details, dict)
    stderr = str(details.get("stderr") or notes.get("traceback") or notes.get("error_message") or "")
    exit_code = details.get("exit_code")
    return CodeFailure(
        code,
        exit_code if isinstance(exit_code, int) else None,
        stderr,
        str(details.get("stdout") or ""),
        bool(details.get("succeeded")),
        parse_python_error(stderr),
    )


class CodeKind:
    """How chains and setbacks read code (:class:`~librarian.correction.stages.SubjectKind`)."""

    def failed(self, attempt: CorrectionAttempt) -> str:
        """The code the attempt corrected."""
        return attempt.failed_code or ""

    def corrected(self, attempt: CorrectionAttempt) -> str:
        """The code it ran instead."""
        return attempt.corrected_code or ""

    def key(self, subject: Any) -> str:
        """The code itself."""
        return str(subject)

    def introduced(self, before: Any, after: Any) -> set[str]:
        """Names (attributes, keywords, imports) ``after`` uses that ``before`` does not."""
        return _names(str(after)) - _names(str(before))

    def named(self, output: str, subject: Any) -> set[str]:
        """The name the traceback is about."""
        error = parse_python_error(output)
        return {error.name} if error is not None and error.name else set()


def identify(run: LoopRun, environment: EnvironmentManager) -> None:
    """Trace the failure to a module or class (and a callee) through the code's imports."""
    code = str(run.subject)
    failure = run.details if isinstance(run.details, CodeFailure) else None
    error = parse_python_error(run.stderr) or (failure.error if failure else None)
    base, callee = "", ""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        tree = None
    if error is not None and tree is not None:
        error = _as_import_error(tree, error)
        names = imports(tree)
        if error.kind in ("attribute", "import_name") and error.owner_is_module:
            # A library's own message may name the module by the code's alias (`np.NaN`).
            base = names.get(error.owner, error.owner)
        elif error.kind == "attribute" and error.owner in BUILTIN_VALUES:
            # A builtin value (text where bytes were, a dict where an object was): the library call
            # that returned it changed.
            callee = returned_by(tree, names, error.name, error.line) or ""
            base = callee.rpartition(".")[0]
        elif error.kind == "attribute":
            base = _owner_class(tree, names, error)
        elif error.kind in ("keyword", "missing_argument", "positional"):
            callee = _callee(tree, names, error)
            base = callee.rpartition(".")[0]
        elif error.kind == "method_value":
            reads = method_value_reads(tree, error.line)
            if reads:
                attribute, owner = reads[0]
                error = replace(error, name=attribute, owner=owner)
                base = owner.split(".")[0]
    top = (base or callee).split(".")[0]
    if not top and tree is not None:
        # The library the failure is about, not the standard library the script also imports.
        modules = imported_modules(tree)
        third_party = [m for m in modules if m not in sys.stdlib_module_names]
        top = (third_party or modules or [""])[0]
    run.details = CodeFailure(
        code,
        run.exit_code,
        run.stderr,
        run.stdout,
        run.succeeded,
        error,
        base,
        callee,
        top,
    )
    run.tool = top or "python"
    try:
        python = run.task_env.interpreter(environment.path, "python3")
    except InvalidInputError:
        python = "python3"
    run.program = (python,)


def detect_version(run: LoopRun, environment: EnvironmentManager, step: StepRecorder) -> None:
    """Which distribution provides the failing module in the task's interpreter, and its version."""
    failure = _failure(run)
    if failure is None or not failure.top or run.workspace is None:
        step("version", "the failure names no installed module", {"version": None})
        return
    try:
        outcome = environment.run(
            [run.program[0], "-I", "-c", _DISTRIBUTIONS, json.dumps([failure.top])],
            run.workspace,
            env_overrides=run.task_env.overrides,
            timeout_seconds=_PROBE_TIMEOUT,
        )
        found = (
            json.loads(outcome.stdout.strip().splitlines()[-1]).get(failure.top)
            if outcome.exit_code == 0
            else None
        )
    except (InvalidInputError, ValueError, IndexError):
        found = None
    if not found:
        step(
            "version",
            f"no installed distribution provides `{failure.top}` in the task's environment",
            {"version": None},
        )
        return
    run.tool = str(found["distribution"])
    run.version = ToolVersion(
        run.tool, str(found["version"]), f"{run.tool} {found['version']} (module {failure.top})"
    )
    run.details = replace(failure, requires=tuple(found.get("requires") or ()))
    step(
        "version",
        f"`{failure.top}` is {run.tool} {found['version']} in the task's interpreter ({run.program[0]})",
        {"version": found["version"], "distribution": run.tool, "module": failure.top},
    )


def problem(run: LoopRun) -> Problem:
    """The problem signature of a code failure: the distribution, its version, the error, the API name."""
    failure = _failure(run)
    error = failure.error if failure else None
    version = run.version.version if run.version else None
    line = (
        f"{error.error_type}: {error.message.splitlines()[0] if error.message else ''}"
        if error
        else run.stderr[-300:]
    )
    normalized = normalize_error(line)
    target = ""
    if failure is not None and error is not None:
        target = f"{failure.callee or failure.base}.{error.name}" if error.name else failure.base
    intent = f"python {error.kind if error else 'other'} {target}".strip()
    return Problem(
        tool=run.tool,
        program=("python",),
        version=version,
        normalized_error=normalized,
        intent=intent,
        signature=problem_signature(run.tool, version, normalized, intent),
    )


def ensure_docs(run: LoopRun, on_demand: DocsOnDemand) -> OnDemand:
    """Index the failing module's installed API (in the task's interpreter) when it is not indexed.

    The module the failure is about; for a name that cannot be imported also its submodules one
    level down and the distribution's top-level package (names move within a distribution).
    """
    version = run.version.version if run.version else None
    failure = _failure(run)
    if run.version is None or failure is None:
        return OnDemand(run.tool, None, False, summary="the distribution is unknown")
    module = _module_of(failure)
    importing = failure.error is not None and failure.error.kind == "import_name"
    modules = list(dict.fromkeys([module, failure.top] if importing else [module]))
    return on_demand.package(run.tool, version, run.program[0], modules=modules, levels=1 if importing else 0)


def research_query(run: LoopRun, query: str) -> str:
    """The task's words with the API name the error is about."""
    failure = _failure(run)
    if failure is None or failure.error is None:
        return query
    name = f"{failure.callee or failure.base}.{failure.error.name}".strip(".")
    return f"{name} {query}".strip()


def broader_query(run: LoopRun) -> str:
    """The API name and what replaces it, without the task's own words."""
    failure = _failure(run)
    if failure is None or failure.error is None:
        return run.context.goal
    return f"{failure.base} {failure.error.name} removed replacement instead".strip()


def candidates(
    run: LoopRun, snippets: Sequence[dict[str, Any]], environment: EnvironmentManager
) -> list[CorrectionOption]:
    """Syntax-tree edits of the code for its failure, from the error, the docs and the interpreter."""
    failure = _failure(run)
    if failure is None or failure.error is None or run.workspace is None:
        return []
    error = failure.error
    api = ApiIndex.from_pages(run.pages)
    providers: tuple[str, ...] = ()
    ask_members = [failure.base] if failure.base else []
    probe = probe_api(
        environment,
        run.workspace,
        run.program[0],
        run.task_env.overrides,
        members=ask_members,
        signatures=[failure.callee] if failure.callee else [],
        provider_name=error.name if error.kind == "import_name" else "",
        provider_modules=_provider_modules(failure, error),
    )
    providers = probe.providers
    entry = _callee_entry(api, failure.callee, error.owner) if failure.callee else None
    signature = (entry.signature if entry else None) or probe.signatures.get(failure.callee)
    # The indexed page may hold only the start of a long docstring; the interpreter has all of it.
    callee_doc = max((entry.doc if entry else ""), probe.docs.get(failure.callee, ""), key=len)
    keywords: tuple[str, ...] = ()
    if error.kind == "positional" and takes_any_keyword(signature):
        keywords = tuple(documented_keywords(callee_doc))
        target = forwarded_class(callee_doc) if not keywords else None
        if target:  # "**kwargs: Any arguments accepted by the Markdown class": its __init__ lists them
            initializer = f"{target}.__init__"
            forwarded = probe_api(
                environment, run.workspace, run.program[0], run.task_env.overrides, signatures=[initializer]
            )
            keywords = tuple(documented_keywords(forwarded.docs.get(initializer, "")))
    scene = CodeScene(
        code=str(run.subject),
        error=error,
        base=failure.base,
        callee=failure.callee,
        api=api,
        probe=probe,
        members=members_of(failure.base, api, probe) if failure.base else {},
        parameters=(entry.parameters if entry and entry.parameters else signature_parameters(signature)),
        callee_doc=callee_doc,
        lineage_doc=probe.lineage.get(failure.callee, "") if failure.callee else "",
        output=failure.stderr,
        documented_keywords=keywords,
        intent=run.context.goal,
        substitutions=_chain_substitutions(run),
        providers=providers,
        signature=signature,
        researched=tuple(dict.fromkeys(str(s.get("entity_name")) for s in snippets if s.get("entity_name"))),
    )
    return [
        CorrectionOption(
            argv=[],
            strategy="code_edit",
            source="research",
            confidence=candidate.confidence,
            rationale=candidate.rationale,
            evidence={**candidate.evidence, "entity_name": _entity(failure, candidate.edits)},
            code=candidate.code,
            edits=candidate.edits,
        )
        for candidate in code_candidates(scene)
    ]


def _chain_substitutions(run: LoopRun) -> tuple[tuple[str, str], ...]:
    """The words the correction this stage corrects further renamed (a chain's earlier step)."""
    parent = run.stage.parent if run.stage is not None else None
    pairs: list[tuple[str, str]] = []
    for edit in (parent.edits or []) if parent is not None else []:
        if edit.get("op") in ("rename_attribute", "rename_keyword") and edit.get("old") and edit.get("new"):
            pairs += word_substitutions(str(edit["old"]), str(edit["new"]))
    return tuple(pairs)


def learned_options(run: LoopRun, entries: list[dict[str, Any]], source: str) -> list[CorrectionOption]:
    """Stored code fixes (lists of edits) applied to this task's code."""
    options = []
    code = str(run.subject)
    for entry in entries:
        edits = [dict(e) for e in entry.get("fixed_argv_template") or [] if isinstance(e, dict)]
        if not edits:
            continue
        fixed, changed = apply_edits(code, edits)
        if not changed or fixed == code:
            continue
        successes, failures = int(entry.get("successes") or 0), int(entry.get("failures") or 0)
        fix_id = entry.get("id")
        options.append(
            CorrectionOption(
                argv=[],
                strategy="chain" if entry.get("strategy") == "chain" else "learned_fix",
                source=source,
                confidence=round(learned_fix_confidence(successes, failures), 4),
                rationale=(
                    f"A verified fix for this problem ({successes} successes, {failures} failures): "
                    + "; ".join(describe(e) for e in edits)
                    + "."
                ),
                evidence={"id": fix_id, "successes": successes, "failures": failures},
                fix_id=fix_id if isinstance(fix_id, int) else None,
                code=fixed,
                edits=[{**e, "summary": describe(e)} for e in edits],
            )
        )
    return options


# -- helpers -----------------------------------------------------------------------------------------


def _failure(run: LoopRun) -> CodeFailure | None:
    return run.details if isinstance(run.details, CodeFailure) else None


def _names(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            found.add(node.arg)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def _as_import_error(tree: ast.AST, error: PythonError) -> PythonError:
    """A library's own "`X` has been moved" raised by ``from m import X`` is an import error of ``m``."""
    if error.kind == "import_name" or not error.name:
        return error
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and any(alias.name == error.name for alias in node.names)
            and (error.line is None or node.lineno <= error.line <= (node.end_lineno or node.lineno))
        ):
            return replace(error, kind="import_name", owner=node.module, owner_is_module=True)
    return error


def _owner_class(tree: ast.AST, names: dict[str, str], error: PythonError) -> str:
    """The dotted path of the class an ``'X' object has no attribute`` error is about."""
    types = local_types(tree, names)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr != error.name:
            continue
        if error.line is not None and getattr(node, "lineno", None) != error.line:
            continue
        held = qualified(node.value, names)
        if held is not None:
            return held  # a class or module reached through the imports
        if isinstance(node.value, ast.Name) and node.value.id in types:
            return _class_path(types[node.value.id], error.owner)
    # The class itself imported by name (`from pkg.mod import Cls`), however the object was made.
    return names.get(error.owner, error.owner)


def _class_path(made_by: str, owner: str, *, inherited: bool = False) -> str:
    """The class path: the call that made the object when it is the class itself, else its module +
    the error's owner (``arrow.get`` made an ``Arrow``). With ``inherited`` (a method's keyword
    error, which may name the base class the method comes from: ``NDFrame.to_csv`` for a
    ``DataFrame``), a class that made the object is taken as it is."""
    last = made_by.rsplit(".", 1)[-1]
    if last == owner or (inherited and last[:1].isupper()):
        return made_by
    return f"{made_by.split('.')[0]}.{owner}"


def _callee(tree: ast.AST, names: dict[str, str], error: PythonError) -> str:
    """The dotted path of the function called with the rejected keyword."""
    types = local_types(tree, names)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if error.line is not None and getattr(node, "lineno", None) != error.line:
            continue
        if error.kind == "keyword" and not any(k.arg == error.name for k in node.keywords):
            continue
        path = qualified(node.func, names)
        if path is not None:
            return path
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            held = types.get(node.func.value.id)
            if held is not None:
                owner = error.owner.split(".")[0]
                return f"{_class_path(held, owner, inherited=True)}.{node.func.attr}"
    return error.owner


def _module_of(failure: CodeFailure) -> str:
    """The module the failure is about: the base when it is a module, else the module holding the class
    or function (its path without the capitalised and final parts)."""
    error = failure.error
    if error is not None and error.owner_is_module and failure.base:
        return failure.base
    parts = (failure.base or failure.callee).split(".")
    if failure.callee and not failure.base:
        parts = parts[:-1]
    while len(parts) > 1 and parts[-1][:1].isupper():
        parts = parts[:-1]
    return ".".join(parts) or failure.top


def _provider_modules(failure: CodeFailure, error: PythonError) -> list[str]:
    """Where a name that cannot be imported might come from now: where the error says it moved, and the
    distributions the failing one depends on."""
    if error.kind != "import_name":
        return []
    moved = [error.moved_to.replace("-", "_")] if error.moved_to else []
    return list(dict.fromkeys([*moved, *failure.requires]))


def _callee_entry(api: ApiIndex, callee: str, owner: str) -> Any:
    """The documented callee: its own path, else a documented method of that name on the named class."""
    entry = api.get(callee)
    if entry is not None:
        return entry
    method = callee.rsplit(".", 1)[-1]
    hint = owner.rsplit(".", 1)[0] if "." in owner else ""
    paths = api.named(method)
    preferred = [p for p in paths if hint and f".{hint}." in f".{p}"] or paths
    return api.get(preferred[0]) if preferred else None


def _entity(failure: CodeFailure, edits: list[dict[str, Any]]) -> str | None:
    for edit in edits:
        if edit.get("op") == "rename_attribute" and edit.get("base"):
            return f"{edit['base']}.{edit['new']}"
        if edit.get("op") == "move_import":
            return f"{edit['new_module']}.{edit['name']}"
    return failure.callee or None
