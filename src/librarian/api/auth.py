"""Optional bearer-token authentication of the REST API and of MCP over streamable HTTP.

One ASGI middleware guards every HTTP request, so routes added after the app is built (the MCP
mount) are covered as well as the REST routers, with a single check in a single place. Only the
liveness check and the API documentation stay open: probes and humans reading the docs carry no
token, and neither exposes any indexed content.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Collection
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from librarian.config import Settings

REALM = "librarian"
SCHEME_NAME = "bearerAuth"


def configured_token(settings: Settings) -> str | None:
    """The token clients must send, or ``None`` when authentication is off (unset or blank)."""
    if settings.api_token is None:
        return None
    token = settings.api_token.get_secret_value().strip()
    return token or None


def open_paths(app: FastAPI) -> frozenset[str]:
    """Paths served without a token: ``/health`` and the OpenAPI document and its viewers."""
    paths = {"/health", app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    return frozenset(path for path in paths if path)


class BearerTokenMiddleware:
    """Refuse HTTP requests without ``Authorization: Bearer <token>`` (401, ``WWW-Authenticate``).

    The comparison is constant-time, so response timing does not reveal how much of a guess was
    right. Lifespan events pass through untouched.
    """

    def __init__(self, app: ASGIApp, *, token: str, exempt: Collection[str]) -> None:
        """Guard ``app`` with ``token``; requests to a path in ``exempt`` need none."""
        self._app = app
        self._token = token.encode("utf-8")
        self._exempt = frozenset(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self._exempt:
            await self._app(scope, receive, send)
            return
        presented = _bearer_token(scope)
        if presented is not None and hmac.compare_digest(presented, self._token):
            await self._app(scope, receive, send)
            return
        await _unauthorized(scope, send, missing=presented is None)


def _bearer_token(scope: Scope) -> bytes | None:
    """The token of the request's ``Authorization: Bearer`` header, or ``None`` when there is none."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, credentials = bytes(value).strip().partition(b" ")
            if scheme.lower() == b"bearer" and credentials.strip():
                return credentials.strip()
            return None
    return None


async def _unauthorized(scope: Scope, send: Send, *, missing: bool) -> None:
    """Answer 401 in the shape of every Librarian error, with the RFC 6750 challenge."""
    challenge = f'Bearer realm="{REALM}"' + ("" if missing else ', error="invalid_token"')
    body = json.dumps(
        {
            "error": True,
            "category": "unauthorized",
            "message": "a bearer token is required" if missing else "the bearer token is not valid",
            "hint": "send the server's API token as `Authorization: Bearer <token>`",
        }
    ).encode("utf-8")
    if scope["type"] == "websocket":  # no HTTP response can be sent on a websocket handshake
        await send({"type": "websocket.close", "code": 1008})
        return
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                (b"www-authenticate", challenge.encode("ascii")),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def require_bearer_token(app: FastAPI, token: str) -> None:
    """Guard every route of ``app`` (including ones mounted later, like ``/mcp``) with ``token``.

    Also declares the scheme in the OpenAPI document, so clients and the docs page know to send it.
    Call before the app starts.
    """
    exempt = open_paths(app)
    app.add_middleware(BearerTokenMiddleware, token=token, exempt=exempt)
    document = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = document()  # FastAPI caches it in app.openapi_schema; decorate that same dict once
        declare_bearer_auth(schema, exempt)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # the documented way to extend the schema


def declare_bearer_auth(schema: dict[str, Any], exempt: Collection[str]) -> None:
    """Add the bearer scheme, and a 401 answer, to every operation of ``schema`` outside ``exempt``."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})[SCHEME_NAME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "The server's API token (setting `api_token`, env `LIBRARIAN_API_TOKEN`).",
    }
    unauthorized: dict[str, Any] = {"description": "Missing or invalid bearer token"}
    if "ErrorResponse" in components.get("schemas", {}):
        unauthorized["content"] = {
            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}
        }
    for path, item in schema.get("paths", {}).items():
        if path in exempt:
            continue
        for operation in item.values():
            if isinstance(operation, dict) and "responses" in operation:
                operation["security"] = [{SCHEME_NAME: []}]
                operation["responses"].setdefault("401", unauthorized)


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` keeps a server reachable from this machine only.

    ``localhost`` and loopback addresses are; wildcards (``0.0.0.0``, ``::``), other addresses and
    other names are not (a name may resolve to anything).
    """
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def serve_warning(host: str, settings: Settings) -> str | None:
    """The warning ``librarian serve`` prints when it exposes an unauthenticated API; else ``None``."""
    if configured_token(settings) is not None or is_loopback_host(host):
        return None
    return (
        f"serving on {host} without authentication: anyone who can reach this address can read every "
        "indexed document and start ingests. Set LIBRARIAN_API_TOKEN (or api_token in the config "
        "file) to require a bearer token, or bind to 127.0.0.1."
    )
