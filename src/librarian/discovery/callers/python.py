"""Calling a Python function out of process, in the sandbox of workflow tasks.

Each call starts ``python -I -c RUNNER`` (this interpreter, isolated mode: no ``PYTHON*``
variables, no user site, no working directory on ``sys.path``) through
:func:`~librarian.discovery.callers.cli.run_sandboxed`: the runtime's limits and timeout, a minimal
environment and, with ``runtime_sandbox_isolation = "namespaces"``, the bubblewrap namespaces of
workflow tasks: an unprivileged user, no network unless the source allows it, a read-only system and
interpreter prefix, and the plugin's own directories (the binding's ``path``) read-only, nothing
else of this machine.

The request (module, function, arguments, search path) goes in as JSON on stdin; the runner prints
one JSON answer: ``{"ok": true, "result": ...}`` or ``{"ok": false, "type", "message"}`` when the
function raises. Whatever the function prints goes to stderr, so it cannot corrupt the answer.
Arguments are converted to the annotated types by pydantic (``validate_call``), results made JSON
by ``pydantic_core.to_jsonable_python`` (dataclasses, models, dates; ``repr`` for the rest).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from librarian.config import Settings
from librarian.discovery.callers.cli import STDERR_TAIL_CHARS, run_sandboxed
from librarian.discovery.calling import CallResult, ToolCallError

__all__ = ["RUNNER", "call_python_function"]

MAX_MESSAGE_CHARS = 2000

# Runs in the child. Standard library first: pydantic is used when the interpreter has it.
RUNNER = (
    f"MAX_MESSAGE_CHARS = {MAX_MESSAGE_CHARS}\n"
    """\
import importlib, inspect, json, os, sys
answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
request = json.loads(sys.stdin.read())
sys.path[:0] = request.get("path") or []
try:
    target = importlib.import_module(request["module"])
    for part in request["function"].split("."):
        target = getattr(target, part)
    try:
        from pydantic import validate_call
        target = validate_call(target)
    except Exception:
        pass
    result = target(**request["arguments"])
    if inspect.iscoroutine(result):
        import asyncio
        result = asyncio.run(result)
    try:
        from pydantic_core import to_jsonable_python
        result = to_jsonable_python(result, fallback=repr)
    except ImportError:
        pass
    text = json.dumps({"ok": True, "result": result}, default=repr)
except BaseException as exc:
    text = json.dumps({"ok": False, "type": type(exc).__name__, "message": str(exc)[:MAX_MESSAGE_CHARS]})
answer.write(text)
answer.flush()
"""
)


def call_python_function(
    binding: Mapping[str, Any], arguments: dict[str, Any], settings: Settings
) -> CallResult:
    """Call ``binding["module"].binding["function"](**arguments)`` in a sandboxed child interpreter.

    Returns:
        ``content`` the function's result as JSON, ``text`` that JSON (or the string it returned).

    Raises:
        ToolCallError: the function raised (its exception type and message, no traceback), the call
            timed out, or the child died without answering.
    """
    module, function = binding.get("module"), binding.get("function")
    if not (isinstance(module, str) and module and isinstance(function, str) and function):
        raise ToolCallError("the tool's binding lacks its module or function", hint="import it again")
    name = f"{module}.{function}"
    raw_paths = binding.get("path") or []
    paths = [raw_paths] if isinstance(raw_paths, str) else list(raw_paths)
    if not all(isinstance(entry, str) for entry in paths):
        raise ToolCallError(f"{name}: the binding's path must list directories", hint="import it again")
    try:
        request = json.dumps({"module": module, "function": function, "arguments": arguments, "path": paths})
    except (TypeError, ValueError) as exc:
        raise ToolCallError(f"{name}: the arguments are not JSON: {exc}") from exc
    outcome = run_sandboxed(
        [sys.executable, "-I", "-c", RUNNER],
        settings,
        isolated=True,
        read_only=[Path(entry) for entry in paths],
        network=binding.get("network") is True,
        stdin=request,
    )
    if outcome.timed_out:
        raise ToolCallError(
            f"{name} did not return within {outcome.timeout_seconds}s and was stopped",
            hint="raise tools_call_timeout_seconds if the function needs longer",
        )
    try:
        answer = json.loads(outcome.stdout) if not outcome.stdout_truncated else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        if outcome.stdout_truncated:
            raise ToolCallError(
                f"{name} returned more than {settings.runtime_task_output_bytes:,} bytes of JSON"
            )
        how = f"was killed by {outcome.signal_name}" if outcome.signal_name else f"exited {outcome.exit_code}"
        tail = outcome.stderr.strip()[-STDERR_TAIL_CHARS:]
        raise ToolCallError(
            f"{name}: the Python process {how} without an answer" + (f": {tail}" if tail else "")
        )
    if answer.get("ok") is not True:
        raise ToolCallError(
            f"{name} raised {answer.get('type', 'an error')}: {answer.get('message', '')}",
            # The function ran and refused these arguments: not a sign the tool is broken.
            tool_fault=False,
        )
    result = answer.get("result")
    return CallResult(content=result, text=result if isinstance(result, str) else json.dumps(result))
