"""What a piece of Python code imports, under which local names, and where it uses a given API name.

:func:`imports` maps each local name to what it stands for: ``import numpy as np`` binds ``np`` to
``numpy``, ``from PIL import Image`` binds ``Image`` to ``PIL.Image``, ``import a.b`` binds ``a`` to
``a``. :func:`qualified` resolves an expression (``np.linalg.norm``) to its dotted path
(``numpy.linalg.norm``) through those names, and :func:`local_types` guesses what class a variable
holds from the call that assigned it (``df = pd.DataFrame(...)``), which is how an error about a
``'DataFrame' object`` is traced to the library that made it.

Example:
    >>> tree = ast.parse("import numpy as np\\nfrom pkg import Thing as T\\nx = T()\\nnp.old(1)")
    >>> names = imports(tree)
    >>> names["np"], names["T"]
    ('numpy', 'pkg.Thing')
    >>> qualified(tree.body[-1].value.func, names)
    'numpy.old'
    >>> local_types(tree, names)["x"]
    'pkg.Thing'
"""

from __future__ import annotations

import ast

__all__ = [
    "imported_modules",
    "imports",
    "local_types",
    "made_by",
    "qualified",
    "signature_function",
    "uncalled_attributes",
]


def imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted path, for every import in ``tree`` (the last binding of a name wins)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def imported_modules(tree: ast.AST) -> list[str]:
    """The top-level packages ``tree`` imports, in order of first import."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module.split(".")[0])
    return list(dict.fromkeys(found))


def qualified(node: ast.AST, names: dict[str, str]) -> str | None:
    """The dotted path an expression names through the imports (``np.linalg`` -> ``numpy.linalg``)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return ".".join([names[node.id], *reversed(parts)])


# Python's text and bytes convert into each other with these methods: a missing one means the value
# already is of the other type (``'str' object has no attribute 'decode'``: it is text already).
CONVERSIONS = {"str": "decode", "bytes": "encode"}
# Builtin types a library call returns: an attribute missing on one is about the call that returned it.
BUILTIN_VALUES = frozenset(
    {"str", "bytes", "bytearray", "int", "float", "bool", "list", "dict", "tuple", "set", "frozenset"}
)


def returned_by(tree: ast.AST, names: dict[str, str], attribute: str, line: int | None) -> str | None:
    """The library call whose result the code reads ``attribute`` of on ``line``, through the imports.

    ``jwt.encode(...).decode()`` and ``t = jwt.encode(...)`` then ``t.decode()`` both give
    ``jwt.encode``: when a builtin value lacks an attribute, the call that returned it changed.
    """
    types = local_types(tree, names)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr != attribute:
            continue
        if line is not None and getattr(node, "lineno", None) != line:
            continue
        found = value_made_by(node.value, names, types)
        if found is not None:
            return found
    return None


def value_made_by(value: ast.AST, names: dict[str, str], types: dict[str, str]) -> str | None:
    """The path of the call a value comes from: a call made there, or the one that assigned a variable."""
    if isinstance(value, ast.Call):
        return made_by(value, names, types)
    return types.get(value.id) if isinstance(value, ast.Name) else None


def local_types(tree: ast.AST, names: dict[str, str]) -> dict[str, str]:
    """Variable: the path of the call that assigned it (``df = pd.DataFrame()``: ``pandas.DataFrame``).

    Also follows a method call on a known variable (``df = df.drop(...)`` keeps ``df``'s type) or
    on a call (``p = Poly(degree=2).fit(x)`` is a ``Poly``), and ``with X(...) as v`` bindings. It
    is a guess for tracing an error to a library, not type inference.
    """
    types: dict[str, str] = {}
    for node in ast.walk(tree):
        value: ast.AST | None = None
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            value, targets = node.value, list(node.targets)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            value, targets = node.value, [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            value, targets = node.context_expr, [node.optional_vars]
        if not isinstance(value, ast.Call):
            continue
        made = made_by(value, names, types)
        if made is None:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                types[target.id] = made
    return types


def made_by(call: ast.Call, names: dict[str, str], types: dict[str, str]) -> str | None:
    """The path of what ``call`` makes: the callee through the imports, else (a method of a known
    variable or of another call) what its receiver is, since a method returns its object's kind often."""
    made = qualified(call.func, names)
    if made is not None or not isinstance(call.func, ast.Attribute):
        return made
    receiver = call.func.value
    if isinstance(receiver, ast.Name):
        return types.get(receiver.id)
    if isinstance(receiver, ast.Call):
        return made_by(receiver, names, types)
    return None


def uncalled_attributes(tree: ast.AST, line: int | None = None) -> list[ast.Attribute]:
    """The ``X.name`` reads that are not called (``X.name()`` is a call; ``X.name = v`` a write), on
    ``line`` when given: where a property that became a method is used as a value."""
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and id(node) not in called
        and (line is None or node.lineno <= line <= (node.end_lineno or node.lineno))
    ]


def signature_function(signature: str | None) -> ast.FunctionDef | None:
    """A signature's text (``(self, a, *, b=1) -> int``) as the function it describes, to read its
    parameters; ``None`` when it does not parse."""
    if not signature:
        return None
    try:
        tree = ast.parse(f"def f{signature.split('->')[0].strip()}: pass")
    except SyntaxError:
        return None
    function = tree.body[0]
    return function if isinstance(function, ast.FunctionDef) else None
