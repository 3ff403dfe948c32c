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
from collections.abc import Collection, Mapping
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio.to_thread
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from librarian.api.docs_pages import ASSETS_PATH, DOCS_PATHS
from librarian.config import Settings
from librarian.errors import UnauthorizedError
from librarian.knowledge.access import Principal, local_principal
from librarian.knowledge.identity import IdentityService

if TYPE_CHECKING:
    from librarian.app import Librarian

REALM = "librarian"
# The web UI (web/): its pages read the token from this cookie, set by its sign-in form. Only page
# paths read it, so the REST API never acts on a cookie a browser sends on its own (no CSRF there).
SESSION_COOKIE = "librarian_session"
PAGES_PREFIX = "/ui"
# Pages a signed-out browser may load: the sign-in form and the UI's own scripts and styles.
PUBLIC_PAGE_PATHS = ("/ui/sign-in",)
PUBLIC_PAGE_PREFIXES = ("/ui/static/",)
# JSON-RPC's implementation-defined server error range (-32000 to -32099): the caller is not authorised.
UNAUTHORIZED_RPC_CODE = -32001
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
    return frozenset(path for path in {*paths, *DOCS_PATHS} if path)


PRINCIPAL_KEY = "librarian_principal"


class BearerTokenMiddleware:
    """Resolve every HTTP request's caller, or refuse it (401, ``WWW-Authenticate``).

    A request may carry ``Authorization: Bearer <token>``: the server-wide ``api_token`` setting acts
    as the local organisation's administrator (compared in constant time); any other token is looked
    up among the tokens ``librarian admin token create`` made. Without a token a request acts as the
    local organisation's implicit user, unless a token is configured anywhere: then every request
    needs one. The caller is put in the ASGI scope's state (``request.state.librarian_principal``), so
    REST routes and MCP tools alike filter by it. Lifespan events pass through untouched.
    """

    def __init__(self, app: ASGIApp, *, tokens: TokenAuthenticator, exempt: Collection[str]) -> None:
        """Guard ``app``; requests to a path in ``exempt`` need no token and get no principal."""
        self._app = app
        self._tokens = tokens
        self._exempt = frozenset(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] not in ("http", "websocket") or path in self._exempt or _is_docs_asset(path):
            await self._app(scope, receive, send)
            return
        page = is_page(path)
        if page and (path in PUBLIC_PAGE_PATHS or path.startswith(PUBLIC_PAGE_PREFIXES)):
            await self._app(scope, receive, send)
            return
        presented = _bearer_token(scope)
        if presented is None and page:
            presented = _cookie(scope, SESSION_COOKIE)
        try:
            principal = await anyio.to_thread.run_sync(self._resolve, presented)
        except UnauthorizedError:
            if page:
                await _to_sign_in(scope, send, invalid=presented is not None)
            else:
                await _unauthorized(scope, send, missing=presented is None)
            return
        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        await self._app(scope, receive, send)

    def _resolve(self, presented: bytes | None) -> Principal:
        if presented is None:
            if self._tokens.requires_token():
                raise UnauthorizedError("a bearer token is required")
            return self._tokens.local
        return self._tokens.authenticate(presented.decode("utf-8", "replace"))


class TokenAuthenticator:
    """Who a token is: the server-wide ``api_token`` (the local administrator) or a created token."""

    def __init__(self, identity: IdentityService, server_token: str | None, local: Principal) -> None:
        self._identity = identity
        self._server_token = None if server_token is None else server_token.encode("utf-8")
        self.local = local

    def requires_token(self) -> bool:
        """Whether every request needs a token (a server token, or any token created)."""
        return self._server_token is not None or self._identity.has_tokens()

    def authenticate(self, token: str) -> Principal:
        """The principal of ``token`` (compared in constant time with the server token).

        Raises:
            UnauthorizedError: an unknown, revoked or expired token.
        """
        presented = token.strip().encode("utf-8")
        if self._server_token is not None and hmac.compare_digest(presented, self._server_token):
            return self.local
        return self._identity.authenticate(token.strip())


def is_page(path: str) -> bool:
    """Whether ``path`` is a web UI page (``/`` and everything under ``/ui``)."""
    return path == "/" or path == PAGES_PREFIX or path.startswith(PAGES_PREFIX + "/")


def _cookie(scope: Scope, name: str) -> bytes | None:
    """The value of cookie ``name`` in the request's ``Cookie`` headers, if any."""
    for header, value in scope.get("headers", ()):
        if header == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(bytes(value).decode("latin-1"))
            except CookieError:
                continue
            if name in jar and jar[name].value:
                return jar[name].value.encode("utf-8")
    return None


async def _to_sign_in(scope: Scope, send: Send, *, invalid: bool) -> None:
    """Send a browser without a valid session to the sign-in form (303), remembering where it went."""
    target = scope.get("path", "/")
    query = scope.get("query_string", b"").decode("latin-1")
    wanted = target + (f"?{query}" if query else "")
    location = f"{PAGES_PREFIX}/sign-in?next={quote(wanted, safe='')}" + ("&expired=1" if invalid else "")
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode("latin-1")), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def _is_docs_asset(path: str) -> bool:
    """The docs pages' scripts and styles (public files of the package, never data)."""
    return path.startswith(ASSETS_PATH + "/") and ".." not in path


def principal_of(scope: Mapping[str, Any], default: Principal) -> Principal:
    """The caller the middleware resolved for a request's ``scope`` (``default`` outside HTTP)."""
    found = (scope.get("state") or {}).get(PRINCIPAL_KEY)
    return found if isinstance(found, Principal) else default


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
    """Answer 401 with the RFC 6750 challenge, in the shape the caller can show.

    REST callers get Librarian's error shape. An MCP client (it accepts ``text/event-stream``) gets a
    JSON-RPC error, which MCP clients show as the message, instead of a bare status they would
    report as "Server returned an error response"; the challenge names no OAuth metadata, because
    this server takes API tokens, not OAuth.
    """
    message = "a bearer token is required" if missing else "the bearer token is not valid"
    hint = "send an API token as `Authorization: Bearer <token>` (`librarian admin token create`)"
    challenge = f'Bearer realm="{REALM}"' + ("" if missing else ', error="invalid_token"')
    if _accepts_event_stream(scope):
        error = {"code": UNAUTHORIZED_RPC_CODE, "message": f"Librarian: {message}; {hint}"}
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode("utf-8")
    else:
        body = json.dumps(
            {"error": True, "category": "unauthorized", "message": message, "hint": hint}
        ).encode()
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


def _accepts_event_stream(scope: Scope) -> bool:
    """Whether the request comes from an MCP streamable HTTP client (it accepts server-sent events)."""
    for name, value in scope.get("headers", ()):
        if name == b"accept" and b"text/event-stream" in bytes(value).lower():
            return True
    return False


def install_authentication(app: FastAPI, lib: Librarian) -> None:
    """Resolve the caller of every route of ``app`` (including ones mounted later, like ``/mcp``).

    Also declares the bearer scheme in the OpenAPI document, so clients and the docs page know to
    send it. Call before the app starts.
    """
    exempt = open_paths(app)
    tokens = TokenAuthenticator(lib.identity, configured_token(lib.settings), local_principal(operator=False))
    app.state.tokens = tokens  # the web UI's sign-in form checks a token the same way
    app.add_middleware(BearerTokenMiddleware, tokens=tokens, exempt=exempt)
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
        "description": "An API token (`librarian admin token create`), or the server-wide `api_token` "
        "setting. Optional while no token is configured: requests then act as the local organisation.",
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
                # `{}`: no token is needed while the server has none configured.
                operation["security"] = [{SCHEME_NAME: []}, {}]
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


def serve_warning(host: str, settings: Settings, *, has_tokens: bool = False) -> str | None:
    """The warning ``librarian serve`` prints when it exposes an unauthenticated API; else ``None``."""
    if configured_token(settings) is not None or is_loopback_host(host) or has_tokens:
        return None
    return (
        f"serving on {host} without authentication: anyone who can reach this address can read every "
        "indexed document and start ingests. Set LIBRARIAN_API_TOKEN (or api_token in the config "
        "file) to require a bearer token, or bind to 127.0.0.1."
    )
