"""Candidate syntax-tree edits for one Python failure, ranked by what the error and the installed API say.

For each kind of failure (:class:`~librarian.correction.pycode.failure.PythonError`):

- **a name gone from a module or class** -- the replacement the message names ("Use `np.prod`
  instead", a builtin such as ``float``, a method such as ``.items``), Python's "Did you mean", and
  the module's (or class's) documented members whose name is clearly related (one contains the other,
  or they share their meaning words) or whose docstring mentions the old name;
- **a name that cannot be imported** -- the same name documented elsewhere in the distribution (the
  name moved), a module the message says it moved to, a dependency that provides it, or a related
  name in the same module;
- **an unexpected keyword** -- the parameter the message names, a parameter of the installed
  signature with a related name, the old keyword's meaning as a value the new parameter's docstring
  lists (``use_aliases=True`` -> ``language='alias'``), or dropping it;
- **a bound method used as a value** -- the attribute read on the failing line that the installed
  API documents as a method taking no argument is called (:mod:`.methods`).

Every candidate is checked against the installed API (the new name must exist there) and applied
with :func:`~librarian.correction.pycode.edits.apply_edits`; one that changes nothing is dropped.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from librarian.correction.matching import singular
from librarian.correction.names import name_similarity
from librarian.correction.pycode.api import ApiIndex, Probe
from librarian.correction.pycode.edits import apply_edits, describe
from librarian.correction.pycode.failure import PythonError
from librarian.correction.pycode.forwarded import extra_positionals, reads_like
from librarian.correction.pycode.keyword_values import keyword_from_false, keyword_to_value, typed_values
from librarian.correction.pycode.methods import method_value_edits
from librarian.correction.pycode.source import (
    BUILTIN_VALUES,
    CONVERSIONS,
    imports,
    qualified,
    signature_function,
)
from librarian.correction.pycode.succession import succession_pairs

__all__ = [
    "CodeCandidate",
    "CodeScene",
    "abbreviates",
    "code_candidates",
    "keyword_only_parameters",
    "members_of",
    "related",
    "signature_parameters",
    "substituted",
    "word_substitutions",
]

_CAP = 0.95
_CONFIRMED = 1.08
_UNCONFIRMED = 0.7
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class CodeCandidate:
    """Corrected code, the edits that made it, a confidence and the evidence."""

    code: str
    edits: list[dict[str, Any]]
    confidence: float
    rationale: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class CodeScene:
    """Everything known about the failure.

    Attributes:
        code: the task's code; error: what its traceback says.
        base: the dotted path of the module or class the error is about (through the imports).
        callee: for a keyword error, the dotted path of the function called.
        api: the installed API's pages; probe: what the task's interpreter said.
        members: public names of ``base`` (pages and probe together).
        parameters: for a keyword error, the callee's parameter names.
        callee_doc: the callee's docstring.
        lineage_doc: for a class callee, the docstrings of its base classes.
        output: what the task printed on stderr (warnings before the traceback included).
        providers: modules the probe found providing an imported name.
        documented_keywords: for a ``**kwargs`` callee, the keywords its docs (or the class they send
            the reader to) list.
        intent: the task's own description (which of a parameter's listed values it asks for).
        substitutions: words that earlier corrections in this chain renamed (``whitelist`` ->
            ``allowed``): a name holding one is likely renamed the same way.
    """

    code: str
    error: PythonError
    base: str = ""
    callee: str = ""
    api: ApiIndex = field(default_factory=lambda: ApiIndex([]))
    probe: Probe = field(default_factory=Probe)
    members: dict[str, str] = field(default_factory=dict)
    parameters: tuple[str, ...] = ()
    callee_doc: str = ""
    lineage_doc: str = ""
    output: str = ""
    providers: tuple[str, ...] = ()
    signature: str | None = None
    researched: tuple[str, ...] = ()
    documented_keywords: tuple[str, ...] = ()
    intent: str = ""
    substitutions: tuple[tuple[str, str], ...] = ()

    def research_bonus(self, path: str) -> float:
        """A little more for what research ranked high for the task's words (breaks near ties)."""
        if path not in self.researched:
            return 0.0
        return 0.06 / (1 + self.researched.index(path))


def related(old: str, new: str) -> float:
    """How clearly two Python names are related, 0..1: one contains the other, or they share words.

    Example:
        >>> related("iteritems", "items"), related("product", "prod"), related("sparse", "sparse_output")
        (0.85, 0.85, 0.85)
        >>> related("from_numpy_matrix", "from_numpy_array") > 0.5
        True
    """
    a, b = old.lower(), new.lower()
    if a == b:
        return 0.0
    similarity = name_similarity(a.replace("_", "-"), b.replace("_", "-"))
    shorter, longer = sorted((a.replace("_", ""), b.replace("_", "")), key=len)
    contained = len(shorter) >= 3 and (longer.startswith(shorter) or longer.endswith(shorter))
    # A new name that keeps a word of three is not the old one shortened (DEFAULT_METHOD_LIST -> DEFAULT).
    contained = contained and 2 * len(_words(b)) >= len(_words(a))
    ratio = difflib.SequenceMatcher(None, a, b).ratio()
    abbreviated = abbreviates(a, b) or abbreviates(b, a)
    return max(
        0.85 if contained else 0.0,
        0.8 if abbreviated else 0.0,
        similarity if similarity < 1.0 else 0.95,
        0.9 * ratio if ratio >= 0.8 else 0.0,
    )


def _words(name: str) -> list[str]:
    """The words of a snake_case (or UPPER_CASE) name, plurals made singular."""
    return [singular(word) for word in name.split("_") if word]


def substituted(old: str, new: str, substitutions: Sequence[tuple[str, str]]) -> bool:
    """Whether ``new`` is ``old`` with a word renamed as this correction chain renamed it before
    (``method_whitelist`` -> ``allowed_methods`` after ``DEFAULT_METHOD_WHITELIST`` ->
    ``DEFAULT_ALLOWED_METHODS``): the same words, in any order.

    Example:
        >>> substituted("method_whitelist", "allowed_methods", [("whitelist", "allowed")])
        True
    """
    renamed = dict(substitutions)
    words = [renamed.get(word, word) for word in _words(old)]
    return words != _words(old) and sorted(words) == sorted(_words(new))


def word_substitutions(old: str, new: str) -> list[tuple[str, str]]:
    """The one word a rename replaced (``DEFAULT_METHOD_WHITELIST`` -> ``DEFAULT_ALLOWED_METHODS``:
    ``whitelist`` -> ``allowed``), or nothing when it changed more or less than one word."""
    before, after = _words(old), _words(new)
    removed = [word for word in before if word not in after]
    added = [word for word in after if word not in before]
    return [(removed[0], added[0])] if len(removed) == 1 and len(added) == 1 else []


def abbreviates(short: str, long: str) -> bool:
    """Whether ``short`` abbreviates ``long`` word by word: each word of ``long`` (split on ``_``)
    contributes a piece of ``short`` that starts with its first letter and keeps its letters in order.

    Example:
        >>> abbreviates("cumtrapz", "cumulative_trapezoid"), abbreviates("trapz", "trapezoid")
        (True, True)
        >>> abbreviates("msort", "sort"), abbreviates("prod", "product_sum")
        (False, False)
    """
    words = [w for w in long.split("_") if w]
    if len(short) < 4 or not words or len(short) >= len(long.replace("_", "")) or "_" in short:
        return False

    def fits(rest: str, index: int) -> bool:
        if index == len(words):
            return not rest
        word = words[index]
        if not rest or rest[0] != word[0]:
            return False
        # The longest piece first: a piece is a subsequence of its word, starting where it starts.
        for end in range(len(rest), 0, -1):
            if _subsequence(rest[:end], word) and fits(rest[end:], index + 1):
                return True
        return False

    return fits(short, 0)


def _subsequence(piece: str, word: str) -> bool:
    letters = iter(word)
    return all(char in letters for char in piece)


def code_candidates(scene: CodeScene, *, limit: int = 6) -> list[CodeCandidate]:
    """Candidates for ``scene``'s failure, best first (see the module docs)."""
    found: dict[str, CodeCandidate] = {}
    for edit, prior, reason, confirmed in _edits(scene):
        new_code, changed = apply_edits(scene.code, [edit])
        if not changed or new_code == scene.code:
            continue
        confidence = round(min(_CAP, prior * (_CONFIRMED if confirmed else _UNCONFIRMED)), 4)
        edit = {**edit, "summary": describe(edit)}
        candidate = CodeCandidate(
            code=new_code,
            edits=[edit],
            confidence=confidence,
            rationale=reason
            + (" The installed API has it." if confirmed else " The installed API could not confirm it."),
            evidence={"edit": edit, "confirmed": confirmed, "error": scene.error.summary},
        )
        if new_code not in found or candidate.confidence > found[new_code].confidence:
            found[new_code] = candidate
    return sorted(found.values(), key=lambda c: -c.confidence)[:limit]


# -- edits by kind of failure ------------------------------------------------------------------------

_Edit = tuple[dict[str, Any], float, str, bool]


def _edits(scene: CodeScene) -> Iterator[_Edit]:
    kind = scene.error.kind
    if kind == "attribute" and scene.error.owner in BUILTIN_VALUES:
        yield from _conversion_edits(scene)
    elif kind == "attribute":
        yield from _attribute_edits(scene)
    elif kind == "import_name":
        yield from _import_edits(scene)
    elif kind == "keyword":
        yield from _keyword_edits(scene)
    elif kind == "missing_argument":
        yield from _missing_argument_edits(scene)
    elif kind == "positional":
        yield from _positional_edits(scene)
    elif kind == "method_value":
        yield from method_value_edits(scene.code, scene.error.line, scene.api, scene.base.split(".")[0])
    yield from _stated_rename_edits(scene)


def _conversion_edits(scene: CodeScene) -> Iterator[_Edit]:
    """Text where bytes were, or the reverse: the call returns the converted value now, so the
    conversion (``.decode()`` of what is text already) goes. Confirmed by a return annotation."""
    owner, method, callee = scene.error.owner, scene.error.name, scene.callee
    if not callee or CONVERSIONS.get(owner) != method:
        return
    returns = (scene.signature or "").rpartition("->")[2]
    annotated = re.search(rf"\b{owner}\b", returns) is not None
    yield (
        {"op": "drop_conversion", "callee": callee, "method": method},
        0.85,
        f"`{callee}(...)` returns {owner} now"
        + (f" (its signature says `->{returns.strip()}`)" if annotated else " (the error says so)")
        + f", so `.{method}(...)` of its result goes: the value is converted already.",
        annotated,
    )


def _stated_rename_edits(scene: CodeScene) -> Iterator[_Edit]:
    """A setting the output says was renamed ("'orm_mode' has been renamed to 'from_attributes'"),
    whatever the exception: libraries often warn about the rename and then fail on what it broke."""
    for old, new in succession_pairs(scene.output).items():
        named = re.search(rf"\b{re.escape(new)}\b", scene.error.message) is not None
        yield (
            {"op": "rename_setting", "old": old, "new": new},
            0.85,
            f"The output says `{old}` has been renamed to `{new}`.",
            named or bool(scene.api.named(new)),
        )


def _attribute_edits(scene: CodeScene) -> Iterator[_Edit]:
    error, old = scene.error, scene.error.name
    if not scene.base or not old:
        return
    where = {"base": scene.base} if _is_module(scene) else {"owner_type": scene.base}
    for replacement in error.replacements:
        yield from _replacement_edit(scene, where, replacement)
    for suggestion in error.suggestions:
        if suggestion.startswith("_") or suggestion == old:
            continue
        score = related(old, suggestion)
        yield (
            {"op": "rename_attribute", **where, "old": old, "new": suggestion},
            0.45 + 0.35 * score,
            f"Python suggests `{suggestion}` for `{old}` (a spelling match).",
            suggestion in scene.members,
        )
    sibling = _only_sibling(old, scene.members)
    for member, doc in scene.members.items():
        if member == old:
            continue
        mentions = _mentions(doc, old)
        evidenced = mentions or substituted(old, member, scene.substitutions)
        score = max(related(old, member), 0.9 if evidenced else 0.0, 0.7 if member == sibling else 0.0)
        if score < 0.5:
            continue
        why = (
            f"the docstring of `{scene.base}.{member}` mentions `{old}`"
            if mentions
            else f"`{scene.base}.{member}` is the documented member closest to `{old}` ({score:.2f})"
        )
        yield (
            {"op": "rename_attribute", **where, "old": old, "new": member},
            0.45 + 0.4 * score + scene.research_bonus(f"{scene.base}.{member}"),
            f"`{old}` is gone from `{scene.base}`; {why}.",
            True,
        )


def _replacement_edit(scene: CodeScene, where: dict[str, str], replacement: str) -> Iterator[_Edit]:
    """The expression a message says to use: a member, a method, a builtin, or a path elsewhere."""
    old = scene.error.name
    text = replacement.lstrip(".")
    names = imports(_parse(scene.code))
    head, _, rest = text.partition(".")
    resolved = f"{names[head]}.{rest}" if head in names and rest else text
    said = f"the error says to use `{replacement}` instead of `{old}`."
    if "." not in text and (text in scene.members or replacement.startswith(".") or not _is_module(scene)):
        yield (
            {"op": "rename_attribute", **where, "old": old, "new": text},
            0.88,
            said.capitalize(),
            text in scene.members,
        )
    elif "." in text and resolved.rpartition(".")[0] == scene.base:
        new = resolved.rpartition(".")[2]
        yield (
            {"op": "rename_attribute", **where, "old": old, "new": new},
            0.88,
            said.capitalize(),
            new in scene.members or not scene.members,
        )
    elif _is_module(scene):
        builtin = "." not in text and text in _BUILTINS
        needed = "" if builtin or head in names else head
        yield (
            {
                "op": "replace_expression",
                "base": scene.base,
                "old": old,
                "expression": text,
                "import": needed,
            },
            0.85,
            said.capitalize(),
            builtin or head in names,
        )


def _import_edits(scene: CodeScene) -> Iterator[_Edit]:
    error, name, module = scene.error, scene.error.name, scene.error.owner
    for replacement in error.replacements:
        target = replacement.rpartition(".")[0]
        if target and replacement.endswith("." + name):
            yield (
                {"op": "move_import", "module": module, "name": name, "new_module": target},
                0.88,
                f"The error says to use `{replacement}`.",
                True,
            )
    if error.moved_to:
        target = error.moved_to.replace("-", "_")
        yield (
            {"op": "move_import", "module": module, "name": name, "new_module": target},
            0.7,
            f"The error says `{name}` moved to `{error.moved_to}`.",
            target in scene.providers,
        )
    top = module.split(".")[0]
    for path in scene.api.named(name):
        home = path.rpartition(".")[0]
        if home == module or not home:
            continue
        inside = home.split(".")[0] == top
        # The very name elsewhere in the distribution: it moved. That outranks a member whose
        # docstring merely mentions it (an example may import it from its new home).
        yield (
            {"op": "move_import", "module": module, "name": name, "new_module": home},
            0.85 if inside else 0.7,
            f"`{name}` is documented as `{path}` in the installed version.",
            True,
        )
    for provider in scene.providers:
        # The very name, provided by a dependency: the object moved there. A merely related name
        # left in the module (`escape` -> `select_autoescape`) is weaker evidence.
        yield (
            {"op": "move_import", "module": module, "name": name, "new_module": provider},
            0.82,
            f"`{provider}`, which `{top}` depends on, provides `{name}`.",
            True,
        )
    sibling = _only_sibling(name, scene.members)
    for member, doc in scene.members.items():
        score = max(
            related(name, member), 0.9 if _mentions(doc, name) else 0.0, 0.7 if member == sibling else 0.0
        )
        if score >= 0.5:
            yield (
                {"op": "rename_attribute", "base": module, "old": name, "new": member},
                0.45 + 0.4 * score,
                f"`{name}` is gone from `{module}`; `{member}` is the documented name closest to it "
                f"({score:.2f}).",
                True,
            )


def _keyword_edits(scene: CodeScene) -> Iterator[_Edit]:
    error, old = scene.error, scene.error.name
    callee = scene.callee or error.owner
    if not callee:
        return
    params = [p for p in scene.parameters if p not in ("self", "args", "kwargs")]
    for replacement in error.replacements:
        new = replacement.rsplit(".", 1)[-1]
        yield (
            {"op": "rename_keyword", "callee": callee, "old": old, "new": new},
            0.88,
            f"The error says to use `{new}` instead of `{old}`.",
            new in params or not params,
        )
    # "Replace ``missing`` with ``load_default``": the callee's docs, or a class it inherits its
    # parameters from, state the rename.
    stated = {**succession_pairs(scene.lineage_doc), **succession_pairs(scene.callee_doc)}
    successor = stated.get(old)
    # A class that passes ``**kwargs`` on to its base takes what the base documents.
    inherited = "kwargs" in scene.parameters and bool(_parameter_doc(scene.lineage_doc, successor or ""))
    if successor and (successor in params or inherited or not params):
        yield (
            {"op": "rename_keyword", "callee": callee, "old": old, "new": successor},
            0.88,
            f"The docs of `{callee}` (or of a class it inherits from) say `{old}` was replaced by "
            f"`{successor}`.",
            successor in params or inherited,
        )
    value = _keyword_value(scene.code, callee, old)
    for param in params:
        description = _parameter_doc(scene.callee_doc, param)
        evidenced = _mentions(description, old) or substituted(old, param, scene.substitutions)
        score = max(related(old, param), 0.9 if evidenced else 0.0)
        # A flag's True or False passed on to a parameter that lists named values is no longer one.
        listed = value in ("True", "False") and len(typed_values(description)) >= 2
        if score >= 0.5:
            yield (
                {"op": "rename_keyword", "callee": callee, "old": old, "new": param},
                (0.45 + 0.4 * score) * (0.6 if listed else 1.0),
                f"`{callee}` has no `{old}` in the installed version; `{param}` is its parameter "
                f"closest to it ({score:.2f}).",
                True,
            )
        if value in ("True", None):
            yield from keyword_to_value(callee, old, param, description)
        elif value == "False" and score >= 0.5:
            yield from keyword_from_false(callee, old, param, description, scene.intent)
    has_params = bool(params)
    yield (
        {"op": "drop_keyword", "callee": callee, "name": old},
        0.5 if has_params else 0.4,
        f"`{callee}` takes no `{old}` in the installed version; without it the default applies.",
        has_params,
    )


def _missing_argument_edits(scene: CodeScene) -> Iterator[_Edit]:
    """A required parameter named after something its module exports (``Loader`` -> ``yaml.Loader``),
    or the plural of a keyword the code passes elsewhere (``algorithm=x`` -> ``algorithms=[x]``)."""
    name, callee = scene.error.name, scene.callee
    yield from _plural_of_passed_keyword(scene)
    module = callee.rpartition(".")[0]
    spelled = _module_spelling(scene.code, callee)
    if not module or spelled is None:
        return
    exported = members_of(module, scene.api, scene.probe)
    for member in exported:
        exact = member == name
        if not exact and not (member.endswith(name) and member[: -len(name)][:1].isupper()):
            continue
        yield (
            {"op": "add_keyword", "callee": callee, "name": name, "value": f"{spelled}.{member}"},
            0.78 if exact else 0.6,
            f"`{callee}` now requires `{name}`; `{module}` exports `{member}`, which it is named after.",
            True,
        )


def _plural_of_passed_keyword(scene: CodeScene) -> Iterator[_Edit]:
    """A required parameter named as the plural of a keyword the code passes to another call of the
    same library: the list of that value. Confirmed when the installed signature has the parameter."""
    name, callee = scene.error.name, scene.callee
    if not callee:
        return
    tree = _parse(scene.code)
    top = callee.split(".")[0]
    names = imports(tree)
    one = singular(name)
    if one == name:
        return  # not a plural
    for node in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        called = qualified(node.func, names)
        if called is None or called.split(".")[0] != top:
            continue
        for keyword in node.keywords:
            if keyword.arg != one:
                continue
            value = f"[{ast.unparse(keyword.value)}]"
            yield (
                {"op": "add_keyword", "callee": callee, "name": name, "value": value},
                0.8,
                f"`{callee}` now requires `{name}`; the code passes `{keyword.arg}=` to `{called}`, so "
                "the list of that value.",
                name in scene.parameters,
            )
            return


def _positional_edits(scene: CodeScene) -> Iterator[_Edit]:
    """Positional arguments beyond what the signature takes become its keyword-only parameters, in
    order; for a ``**kwargs`` callee, the keywords its docs list (the argument must read like one)."""
    callee = scene.callee
    keep = int(scene.error.name) if scene.error.name.isdecimal() else None
    names = keyword_only_parameters(scene.signature)
    if not callee or keep is None:
        return
    if names:
        yield (
            {"op": "positional_to_keyword", "callee": callee, "keep": keep, "names": names},
            0.8,
            f"`{callee}` takes {keep} positional argument(s) now; the next ones are its keyword-only "
            f"parameters {', '.join(names)}.",
            True,
        )
        return
    extra = extra_positionals(scene.code, callee, keep, scene.error.line)
    for name in scene.documented_keywords:
        if not extra or not reads_like(extra[0], name):
            continue
        yield (
            {"op": "positional_to_keyword", "callee": callee, "keep": keep, "names": [name]},
            0.8,
            f"`{callee}` takes {keep} positional argument(s) and `**kwargs` now; its docs list the "
            f"keyword `{name}`, which the argument `{extra[0][:60]}` reads like.",
            True,
        )


# -- helpers -----------------------------------------------------------------------------------------


def _only_sibling(name: str, members: dict[str, str]) -> str | None:
    """The one member sharing ``name``'s first word (``soft_unicode``: ``soft_str``), if just one does."""
    head = name.split("_")[0]
    if "_" not in name or len(head) < 3:
        return None
    siblings = [m for m in members if m != name and m.split("_")[0] == head and "_" in m]
    return siblings[0] if len(siblings) == 1 else None


def _is_module(scene: CodeScene) -> bool:
    return scene.error.owner_is_module


_SUCCESSION = re.compile(
    r"(?i)\b(?:replac\w*|renamed|formerly|previously|deprecated|instead|alias\w*|was called|supersed\w*|"
    r"in favou?r of|removed)\b"
)


def _mentions(doc: str, name: str) -> bool:
    """Whether a docstring refers to ``name`` as code: quoted, called, or beside words of succession.

    A plain English word in prose ("the product of the elements", "cross product(s)") is not a
    reference to a removed ``product``; "Replaces ``contextfunction``" and "Previously was
    line_terminator" are.
    """
    if not doc:
        return False
    escaped = re.escape(name)
    # a call, but not prose's plural "product(s)"
    if re.search(rf"[`'\"]{escaped}[`'\"]|(?<![\w])\.?{escaped}\((?!s\))|``{escaped}``", doc):
        return True
    for match in re.finditer(rf"(?<![\w.]){escaped}(?!\w)", doc):
        around = doc[max(0, match.start() - 60) : match.end() + 60]
        if _SUCCESSION.search(around):
            return True
    return False


def _parse(code: str) -> ast.AST:
    try:
        return ast.parse(code)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _keyword_value(code: str, callee: str, keyword: str) -> str | None:
    """The source text of ``keyword``'s value in the first call of ``callee`` that passes it."""
    tree = _parse(code)
    names = imports(tree)
    last = callee.rsplit(".", 1)[-1]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        path = qualified(node.func, names) or (node.func.attr if isinstance(node.func, ast.Attribute) else "")
        if path.rsplit(".", 1)[-1] != last:
            continue
        for item in node.keywords:
            if item.arg == keyword:
                return ast.unparse(item.value)
    return None


def _parameter_doc(doc: str, param: str) -> str:
    """The part of a docstring that documents ``param`` (numpydoc, Google or reST style)."""
    if not doc:
        return ""
    lines = doc.splitlines()
    for index, line in enumerate(lines):
        if re.match(
            rf"^\s*(?::param\s+(?:\w+\s+)?{re.escape(param)}:|{re.escape(param)}\s*(?:\([^)]*\))?\s*:)", line
        ):
            block = [line]
            indent = len(line) - len(line.lstrip())
            for follow in lines[index + 1 : index + 12]:
                if (
                    follow.strip()
                    and len(follow) - len(follow.lstrip()) <= indent
                    and not follow.lstrip().startswith(("-", "*"))
                ):
                    break
                block.append(follow)
            return " ".join(part.strip() for part in block)
    return ""


def members_of(base: str, api: ApiIndex, probe: Probe) -> dict[str, str]:
    """Public names of ``base`` with their docstrings: the documented ones and the probe's."""
    found = {entry.name: entry.doc for entry in api.members(base)}
    for name in probe.members.get(base) or []:
        found.setdefault(name, "")
    return found


def _module_spelling(code: str, callee: str) -> str | None:
    """How the code spells the module of ``callee`` in its call (``yaml`` in ``yaml.load(...)``)."""
    tree = _parse(code)
    names = imports(tree)
    last = callee.rsplit(".", 1)[-1]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == last
            and qualified(node.func, names) == callee
        ):
            return ast.unparse(node.func.value)
    return None


def keyword_only_parameters(signature: str | None) -> list[str]:
    """The keyword-only parameter names of a signature's text (``(y, *, x=None)`` -> ``['x']``)."""
    function = signature_function(signature)
    return [argument.arg for argument in function.args.kwonlyargs] if function is not None else []


def signature_parameters(signature: str | None) -> tuple[str, ...]:
    """Parameter names of a signature's text (``(a, b=1, *, c)`` -> ``('a', 'b', 'c')``)."""
    if not signature:
        return ()
    function = signature_function(signature)
    if function is None:  # not Python syntax (a default printed as `<object at 0x..>`): read the names
        return tuple(re.findall(r"(\w+)\s*(?:=|:|,|\))", signature))
    arguments = function.args
    every: Sequence[ast.arg] = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return tuple(argument.arg for argument in every)
