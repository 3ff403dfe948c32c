"""Cross-site request forgery protection for the UI's forms, and the sign-in cookie.

Every form that changes something carries a token that must equal the ``librarian_csrf`` cookie
(the double-submit pattern): another site can make a browser send the cookie, but cannot read it to
put it in the form. The cookie is ``SameSite=Strict`` as well, and a request whose ``Origin`` names
another site is refused outright. This matters most for the embedded default, where a loopback server
needs no token: without it, any page the user visits could submit a workflow to ``127.0.0.1``.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from fastapi import Request, Response

from librarian.api.auth import SESSION_COOKIE
from librarian.errors import ForbiddenError

__all__ = ["CSRF_COOKIE", "CSRF_FIELD", "check_csrf", "clear_session", "csrf_token", "set_session"]

CSRF_COOKIE = "librarian_csrf"
CSRF_FIELD = "csrf"
# A signed-in browser stays signed in for a working week; the token itself may expire sooner.
SESSION_SECONDS = 5 * 24 * 3600


def csrf_token(request: Request) -> str:
    """The request's CSRF token: the cookie's, or a new one (:func:`remember_csrf` sets it)."""
    existing = request.cookies.get(CSRF_COOKIE, "")
    if len(existing) >= 32:
        return existing
    token = getattr(request.state, "csrf", None)
    if token is None:
        token = secrets.token_urlsafe(32)
        request.state.csrf = token
    return str(token)


def remember_csrf(request: Request, response: Response) -> None:
    """Set the CSRF cookie on ``response`` when the request came without one."""
    token = csrf_token(request)
    if request.cookies.get(CSRF_COOKIE) != token:
        response.set_cookie(
            CSRF_COOKIE, token, httponly=True, samesite="strict", secure=_secure(request), path="/ui"
        )


def check_csrf(request: Request, submitted: str | None) -> None:
    """Refuse a form whose token does not match the cookie, or that another site's page sent.

    Raises:
        ForbiddenError: the form cannot be shown to come from this site's own page.
    """
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host", ""):
        raise ForbiddenError("this form was sent from another site", hint="use the form on this site's page")
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not submitted or not hmac.compare_digest(cookie.encode(), submitted.encode()):
        raise ForbiddenError(
            "the form's security token is missing or stale", hint="reload the page and send the form again"
        )


def set_session(request: Request, response: Response, token: str) -> None:
    """Keep the signed-in token in an HTTP-only, same-site cookie that only the UI's pages read."""
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
        path="/",
    )


def clear_session(response: Response) -> None:
    """Sign the browser out."""
    response.delete_cookie(SESSION_COOKIE, path="/")


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"
