"""Calling an OpenAPI operation: the request built from the binding and the arguments, sent by the
runtime's API caller.

Path parameters are substituted (percent-encoded), query parameters appended (a list repeats the
name, the OpenAPI default ``form``/``explode`` style), header and cookie parameters sent as headers,
and ``body`` as JSON. The request goes through :class:`~librarian.runtime.executors.api_caller.ApiCaller`,
so it gets the same refusal of loopback, private and link-local addresses (unless
``allowed_private_hosts`` names them, checked again on the connected socket), no redirects and a
capped body; the time limit is ``tools_call_timeout_seconds``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from librarian.config import Settings
from librarian.discovery.calling import CallResult, ToolCallError
from librarian.runtime.contracts import TaskSpec, Workspace
from librarian.runtime.executors.api_caller import ApiCaller

__all__ = ["call_openapi_operation", "operation_request"]

MAX_EXCERPT_CHARS = 500


def call_openapi_operation(
    binding: Mapping[str, Any], arguments: dict[str, Any], settings: Settings
) -> CallResult:
    """Send the operation of ``binding`` with ``arguments``; the parsed JSON answer (or its text).

    Raises:
        ToolCallError: the address is refused, the request fails or times out, or the answer is not
            2xx (naming the operation and the status).
    """
    operation = str(binding.get("operation") or f"{binding.get('method')} {binding.get('path')}")
    payload = operation_request(binding, arguments)
    payload["timeout_seconds"] = settings.tools_call_timeout_seconds
    caller = ApiCaller(
        allowed_hosts=settings.allowed_private_hosts, timeout_seconds=settings.tools_call_timeout_seconds
    )
    task = TaskSpec(task_id=operation, workflow_id="tool-calls", executor_type="api_caller", payload=payload)
    # The API caller never touches its workspace; one is part of the executor contract.
    result = caller.execute(task, Workspace(root=settings.home, workflow_id="tool-calls"))
    output = result.output
    if not result.ok:
        status = output.get("status_code")
        if isinstance(status, int):
            excerpt = str(output.get("body") or "")[:MAX_EXCERPT_CHARS]
            raise ToolCallError(
                f"{operation} answered HTTP {status} {output.get('reason') or ''}".rstrip()
                + (f": {excerpt}" if excerpt else ""),
                # A 4xx refuses the request; only a 5xx (or no answer) says the API is unwell.
                tool_fault=status >= 500,
            )
        feedback = result.feedback
        raise ToolCallError(
            f"{operation}: {feedback.get('error_type', 'error')}: {feedback.get('error_message', 'failed')}"
        )
    body = str(output.get("body") or "")
    parsed = output.get("json")
    return CallResult(content=parsed if parsed is not None else body, text=body)


def operation_request(binding: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The API caller's payload (``url``, ``method``, ``headers``, ``json``) for one call.

    Example:
        >>> binding = {"base_url": "https://api.test/v1", "method": "GET", "path": "/pets/{id}",
        ...            "parameters": {"id": "path", "tag": "query"}, "headers": {}}
        >>> operation_request(binding, {"id": "a b", "tag": ["x", "y"]})["url"]
        'https://api.test/v1/pets/a%20b?tag=x&tag=y'

    Raises:
        ToolCallError: the binding is incomplete (no base URL, method or path).
    """
    base_url, method, path = binding.get("base_url"), binding.get("method"), binding.get("path")
    if not (isinstance(base_url, str) and isinstance(method, str) and isinstance(path, str)):
        raise ToolCallError("the tool's binding lacks its base_url, method or path", hint="import it again")
    locations = binding.get("parameters") or {}
    headers = {str(key): str(value) for key, value in (binding.get("headers") or {}).items()}
    query: list[tuple[str, str]] = []
    cookies: list[str] = []
    for name, value in arguments.items():
        where = locations.get(name)
        if value is None or where is None:
            continue
        if where == "path":
            path = path.replace("{" + name + "}", quote(_scalar(value), safe=""))
        elif where == "query":
            values = value if isinstance(value, list) else [value]
            query += [(name, _scalar(item)) for item in values]
        elif where == "header":
            headers[name] = _scalar(value)
        elif where == "cookie":
            cookies.append(f"{name}={quote(_scalar(value), safe='')}")
    if cookies:
        headers["Cookie"] = "; ".join(cookies)
    url = base_url.rstrip("/") + "/" + path.lstrip("/")
    if query:
        url += ("&" if "?" in url else "?") + urlencode(query)
    payload: dict[str, Any] = {"url": url, "method": method.upper(), "headers": headers}
    body = binding.get("body")
    if isinstance(body, str) and arguments.get(body) is not None:
        payload["json"] = arguments[body]
    return payload


def _scalar(value: Any) -> str:
    """A parameter value as sent in a URL or header: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
