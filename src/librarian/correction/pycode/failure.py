"""What a Python traceback says about a failure caused by an API change.

The last line of a traceback names the exception and the thing it is about, in the phrasings the
interpreter (and libraries imitating it) use:

- ``AttributeError: module 'pkg.mod' has no attribute 'name'`` (a module lost a name),
  ``'Cls' object has no attribute 'name'`` and ``type object 'Cls' has no attribute 'name'`` (a class
  did), or a library's own sentence ("`pkg.name` was removed ... Use `pkg.other` instead");
- ``ImportError: cannot import name 'name' from 'pkg.mod'``; ``ModuleNotFoundError: No module named 'x'``;
- ``TypeError: f() got an unexpected keyword argument 'k'``, ``f() missing 1 required positional
  argument: 'k'`` (or a library's "pass in a value for the "k" argument when calling f()"); a
  library's own "`k` is removed. use `j` instead";
- a bound method used as a value (``unsupported operand type(s) for -: 'method' and 'method'``,
  ``Object of type method is not JSON serializable``): a property that became a method. The error
  names no attribute; the code's line does (``kind`` ``method_value``).

It also finds the line of the task's own code where it happened (the last frame in the task's script),
the replacements the message names ("use X instead", "X has been moved to Y") and Python's "Did you
mean: 'x'?" suggestion. Warnings printed before the traceback ("FutureWarning: ... Use .items
instead") are kept as further hints.

Example:
    >>> text = ('Traceback (most recent call last):\\n'
    ...         '  File "/w/.librarian/code/t.py", line 3, in <module>\\n'
    ...         "AttributeError: module 'pkg' has no attribute 'old'. Did you mean: 'new'?")
    >>> found = parse_python_error(text)
    >>> found.kind, found.owner, found.name, found.line, found.suggestions
    ('attribute', 'pkg', 'old', 3, ('new',))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ErrorKind", "PythonError", "parse_python_error"]

ErrorKind = Literal[
    "attribute",
    "import_name",
    "module",
    "keyword",
    "missing_argument",
    "positional",
    "method_value",
    "other",
]

_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$', re.MULTILINE)
# The exception line: a (possibly dotted) type, a colon, the message (which may span lines).
_EXCEPTION = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Warning))(?::\s?(?P<message>.*))?$", re.MULTILINE
)
_MODULE_ATTRIBUTE = re.compile(r"\bmodule '(?P<owner>[\w.]+)' has no attribute '(?P<name>\w+)'")
_OBJECT_ATTRIBUTE = re.compile(r"'(?P<owner>[\w.]+)' object has no attribute '(?P<name>\w+)'")
_TYPE_ATTRIBUTE = re.compile(r"\btype object '(?P<owner>[\w.]+)' has no attribute '(?P<name>\w+)'")
_IMPORT_NAME = re.compile(r"\bcannot import name '(?P<name>\w+)' from '(?P<owner>[\w.]+)'")
_NO_MODULE = re.compile(r"\bNo module named '(?P<name>[\w.]+)'")
_KEYWORD = re.compile(r"(?P<owner>[\w.]+)\(\) got an unexpected keyword argument '(?P<name>\w+)'")
_MISSING = re.compile(
    r"(?P<owner>[\w.]+)\(\) missing \d+ required (?:positional |keyword-only )?arguments?: '(?P<name>\w+)'"
)
# A library's own words for a now-required argument: "It is required that you pass in a value for the
# "algorithms" argument when calling decode()".
_REQUIRED_VALUE = re.compile(
    r"\ba value for (?:the )?[`'\"](?P<name>\w+)[`'\"] (?:argument|parameter|keyword)\b[^\n]*?"
    r"\bcalling [`'\"]?(?P<owner>[\w.]+)\(\)"
)
# "f() takes 1 positional argument but 2 were given": ``name`` holds how many it takes.
_POSITIONAL = re.compile(
    r"(?P<owner>[\w.]+)\(\) takes (?:from \d+ to )?(?P<name>\d+) positional arguments? "
    r"but \d+ (?:were|was) given"
)
# A bound method where a value was expected: "for -: 'method' and 'int'", "'method' object is not
# subscriptable", "Object of type method is not JSON serializable", "must be real number, not method".
_METHOD_VALUE = re.compile(r"'method'|\bof type '?method'?\b|\bnot '?method'?$")
# A library's own words: "`np.name` was removed ...", "`name` is removed".
_LIBRARY_NAMED = re.compile(r"^`(?P<name>[\w.]+)`\s+(?:was|is|has been)\s+(?:removed|deprecated|moved)")
_DID_YOU_MEAN = re.compile(r"Did you mean:? '(?P<name>[\w.]+)'\??")
_USE_INSTEAD = re.compile(
    r"(?i)\buse\s+(?:`(?P<a>[^`\n]+)`|'(?P<b>[\w.()]+)'|\"(?P<c>[\w.()]+)\"|(?P<d>\.?[A-Za-z_][\w.]*(?:\(\))?))"
    r"(?P<rest>[^.\n]{0,40})"
)
_MOVED_TO = re.compile(
    r"(?i)\bhas been moved to (?:the )?(?:`(?P<a>[^`\n]+)`|'(?P<b>[\w.-]+)'|(?P<c>[\w.-]+))"
)
_WARNING_LINE = re.compile(
    r"^(?:.*: )?(?P<type>\w*(?:Deprecation|Future|Pending\w*|User)Warning): (?P<message>.+)$", re.MULTILINE
)


@dataclass(frozen=True)
class PythonError:
    """One failure of Python code, read from its stderr.

    Attributes:
        error_type: the exception's class name (``AttributeError``).
        message: the exception's message (its first lines).
        kind: ``attribute``, ``import_name``, ``module``, ``keyword``, ``missing_argument``,
            ``positional`` (too many positional arguments; ``name`` is how many it takes),
            ``method_value`` (a bound method used as a value; no name) or ``other``.
        owner: what the name belongs to: a module (``numpy``), a class (``DataFrame``), a function
            (``emojize``), or the module an import was from.
        name: the name the error is about (an attribute, an imported name, a keyword argument).
        owner_is_module: whether ``owner`` is a module (``module 'x'``, ``from 'x'``).
        line: the line of the task's code where it happened (``None`` when no frame is the task's).
        suggestions: names Python (or the library) suggests ("Did you mean: 'x'?").
        replacements: expressions the message (or an earlier warning) says to use instead.
        moved_to: a package or module the message says the name moved to.
        warnings: warning lines printed before the failure.
    """

    error_type: str
    message: str
    kind: ErrorKind
    owner: str = ""
    name: str = ""
    owner_is_module: bool = False
    line: int | None = None
    suggestions: tuple[str, ...] = ()
    replacements: tuple[str, ...] = ()
    moved_to: str = ""
    warnings: tuple[str, ...] = field(default=())

    @property
    def summary(self) -> str:
        """``AttributeError on numpy.product`` and the like, for the timeline."""
        where = f"{self.owner}.{self.name}" if self.owner and self.name else self.name or self.owner
        return f"{self.error_type} on {where}" if where else self.error_type


def parse_python_error(stderr: str, *, script_marker: str = "/.librarian/code/") -> PythonError | None:
    """Read the last traceback (or exception line) of ``stderr``; ``None`` when there is none.

    Args:
        stderr: what the program printed on standard error.
        script_marker: a piece of the path of the task's own script, to find its frames.
    """
    start = stderr.rfind(_TRACEBACK)
    body = stderr[start:] if start >= 0 else stderr
    exceptions = list(_EXCEPTION.finditer(body))
    if not exceptions:
        return None
    last = exceptions[-1]
    error_type = last.group("type").rsplit(".", 1)[-1]
    message = body[last.start("message") :].strip() if last.group("message") is not None else ""
    first_line = message.splitlines()[0] if message else ""
    frames = [m for m in _FRAME.finditer(body) if script_marker in m.group("file")]
    line = int(frames[-1].group("line")) if frames else None
    kind, owner, name, owner_is_module = _classify(error_type, first_line)
    warnings = tuple(m.group(0).strip() for m in _WARNING_LINE.finditer(stderr[: start if start >= 0 else 0]))
    hints = "\n".join([message, *warnings])
    return PythonError(
        error_type=error_type,
        message=message[:2000],
        kind=kind,
        owner=owner,
        name=name,
        owner_is_module=owner_is_module,
        line=line,
        suggestions=tuple(dict.fromkeys(m.group("name") for m in _DID_YOU_MEAN.finditer(message))),
        replacements=tuple(dict.fromkeys(_replacements(hints))),
        moved_to=_moved_to(message),
        warnings=warnings,
    )


_SHAPES: tuple[tuple[re.Pattern[str], ErrorKind, bool], ...] = (
    (_MODULE_ATTRIBUTE, "attribute", True),
    (_TYPE_ATTRIBUTE, "attribute", False),
    (_OBJECT_ATTRIBUTE, "attribute", False),
    (_IMPORT_NAME, "import_name", True),
    (_KEYWORD, "keyword", False),
    (_MISSING, "missing_argument", False),
    (_REQUIRED_VALUE, "missing_argument", False),
    (_POSITIONAL, "positional", False),
)


def _classify(error_type: str, line: str) -> tuple[ErrorKind, str, str, bool]:
    for pattern, kind, is_module in _SHAPES:
        match = pattern.search(line)
        if match:
            return kind, match.group("owner"), match.group("name"), is_module
    match = _NO_MODULE.search(line)
    if match:
        return "module", "", match.group("name"), True
    if error_type == "TypeError" and _METHOD_VALUE.search(line):
        return "method_value", "", "", False
    named = _LIBRARY_NAMED.search(line)
    if named:
        owner, _, name = named.group("name").rpartition(".")
        keyword = error_type.endswith(("UserError", "TypeError")) and not owner
        return ("keyword" if keyword else "attribute"), owner, name, bool(owner)
    return "other", "", "", False


def _replacements(text: str) -> list[str]:
    """Expressions a message says to use instead (``np.prod``, ``float``, ``.items``, ``pattern``)."""
    found = []
    for match in _USE_INSTEAD.finditer(text):
        value = next(g for g in (match.group("a"), match.group("b"), match.group("c"), match.group("d")) if g)
        value = value.strip().removesuffix("()").strip()
        if re.fullmatch(r"\.?[A-Za-z_][\w.]*", value) and value.lower() not in {
            "the",
            "a",
            "an",
            "it",
            "this",
        }:
            found.append(value)
    return found


def _moved_to(message: str) -> str:
    match = _MOVED_TO.search(message)
    if not match:
        return ""
    return next(g for g in (match.group("a"), match.group("b"), match.group("c")) if g).strip()
