"""``/docs`` (Swagger UI) and ``/redoc``, served with their scripts and styles from the package.

FastAPI's default pages load them from a CDN, so they stay blank on a machine without internet (as
these servers often are). The files are vendored in ``api/static`` (see its README for versions and
licences) and served under :data:`ASSETS_PATH`, which needs no token, like the pages themselves.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs-assets"
STATIC = Path(__file__).with_name("static")
DOCS_PATHS = ("/docs", "/docs/oauth2-redirect", "/redoc")


def install_docs_pages(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` for ``app`` (created with ``docs_url=None, redoc_url=None``)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=STATIC), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API documentation",
            oauth2_redirect_url="/docs/oauth2-redirect",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API reference",
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
            with_google_fonts=False,
        )
