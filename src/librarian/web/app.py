"""Wiring of the web UI into the REST app: templates, static files, the pages' routers, sign-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from librarian.api.auth import PAGES_PREFIX, TokenAuthenticator, principal_of
from librarian.app import Librarian
from librarian.catalog.policy import SourcePolicy
from librarian.errors import LibrarianError, UnauthorizedError
from librarian.knowledge.access import Principal, local_principal
from librarian.web.fix_pages import fix_router
from librarian.web.registry_pages import registry_router
from librarian.web.runbook_pages import runbook_router
from librarian.web.search_pages import search_router
from librarian.web.security import (
    CSRF_FIELD,
    check_csrf,
    clear_session,
    csrf_token,
    remember_csrf,
    set_session,
)
from librarian.web.source_pages import source_router
from librarian.web.workflow_pages import workflow_router

__all__ = ["Pages", "install_web"]

_HERE = Path(__file__).parent


class Pages:
    """What every page handler needs: the facade, the templates and the caller."""

    def __init__(self, lib: Librarian, policy: SourcePolicy) -> None:
        self.lib = lib
        self.policy = policy
        self.templates = Jinja2Templates(directory=str(_HERE / "templates"))  # autoescapes .html

    def caller(self, request: Request) -> Principal:
        """The principal the authentication middleware resolved (from the session cookie)."""
        return principal_of(request.scope, local_principal(operator=False))

    def render(self, request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        """Render template ``name`` with the navigation's context and a CSRF token for its forms."""
        principal = self.caller(request)
        response = self.templates.TemplateResponse(
            request,
            name,
            {
                "csrf_field": CSRF_FIELD,
                "csrf": csrf_token(request),
                "user": principal.user_name,
                "signed_in": _tokens(request).requires_token(),
                "nav": request.url.path,
                **context,
            },
            status_code=status_code,
        )
        remember_csrf(request, response)
        return response

    def check_form(self, request: Request, submitted: str | None) -> None:
        """Refuse a state-changing form without this site's CSRF token (see ``security.py``)."""
        check_csrf(request, submitted)


def install_web(app: FastAPI, lib: Librarian, policy: SourcePolicy) -> None:
    """Serve the UI at ``/`` (pages under ``/ui``), with its assets from the package."""
    pages = Pages(lib, policy)
    app.mount(f"{PAGES_PREFIX}/static", StaticFiles(directory=str(_HERE / "static")), name="ui-static")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse(f"{PAGES_PREFIX}/search", status_code=303)

    @app.get(PAGES_PREFIX, include_in_schema=False)
    @app.get(PAGES_PREFIX + "/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse(f"{PAGES_PREFIX}/search", status_code=303)

    @app.get(f"{PAGES_PREFIX}/sign-in", include_in_schema=False)
    def sign_in_form(request: Request, next: str = "", expired: int = 0) -> HTMLResponse:
        message = "Your session ended: sign in again." if expired else None
        return pages.render(request, "sign_in.html", next=_local_target(next), error=message)

    @app.post(f"{PAGES_PREFIX}/sign-in", include_in_schema=False)
    def sign_in(
        request: Request, token: str = Form(""), next: str = Form(""), csrf: str = Form("")
    ) -> Response:
        try:
            pages.check_form(request, csrf)
            if not token.strip():
                raise UnauthorizedError("paste an API token (librarian admin token create)")
            _tokens(request).authenticate(token)
        except LibrarianError as exc:
            return pages.render(request, "sign_in.html", 401, next=_local_target(next), error=exc.message)
        response = RedirectResponse(_local_target(next), status_code=303)
        set_session(request, response, token.strip())
        return response

    @app.post(f"{PAGES_PREFIX}/sign-out", include_in_schema=False)
    def sign_out(request: Request, csrf: str = Form("")) -> Response:
        try:
            pages.check_form(request, csrf)
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        response = RedirectResponse(f"{PAGES_PREFIX}/sign-in", status_code=303)
        clear_session(response)
        return response

    app.include_router(search_router(pages))
    app.include_router(workflow_router(pages))
    app.include_router(source_router(pages))
    app.include_router(runbook_router(pages))
    app.include_router(registry_router(pages))
    app.include_router(fix_router(pages))


def _tokens(request: Request) -> TokenAuthenticator:
    tokens: TokenAuthenticator = request.app.state.tokens
    return tokens


def _local_target(target: str) -> str:
    """Where to go after signing in: a page of this UI only (never another site: no open redirect)."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith(PAGES_PREFIX + "/") or "\\" in target:
        return f"{PAGES_PREFIX}/search"
    return target
