"""The FastAPI application: the API, the live feed and the page, over one Office."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import firm
from firm.server import live, routes
from firm.server.office import Office

# The page loads nothing from elsewhere, runs no inline script and talks only to its origin.
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)


def static_dir() -> Path:
    return Path(str(resources.files("firm.server").joinpath("static")))


class _SecurityHeaders:
    """Plain ASGI middleware (it must not buffer responses or touch the WebSocket)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        page = not scope["path"].startswith(("/api/", "/docs", "/redoc", "/openapi"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                if page:
                    headers.setdefault("Content-Security-Policy", PAGE_POLICY)
                    headers.setdefault("Cache-Control", "no-cache")
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _install_docs(app: FastAPI) -> None:
    """The OpenAPI docs page, with Swagger UI's assets from the swagger-ui-bundle package
    rather than a CDN: the office must work on a machine with no way out."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/docs/assets", StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} · API",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon-32x32.png",
        )


def create_app(office: Office) -> FastAPI:
    """An app serving one office. Opening it (the ASGI lifespan) starts the engine and the hub;
    closing it stops them, handing unfinished sessions back so `firm resume` can continue."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(office.open, asyncio.get_running_loop())
        try:
            yield
        finally:
            await asyncio.to_thread(office.close)

    app = FastAPI(
        docs_url=None,  # served below from the package, so /docs works with no internet
        redoc_url=None,
        title=f"firm office · {office.org.company}",
        version=firm.__version__,
        description=(
            "Watch and steer an AI company: give goals, follow tasks down the org chart, "
            "cancel, read results and files. Changes need the access token (Authorize)."
        ),
        lifespan=lifespan,
    )
    app.state.office = office
    app.add_middleware(_SecurityHeaders)
    routes.install_error_handlers(app)
    app.include_router(routes.build_router(office))
    app.include_router(live.router)
    _install_docs(app)
    app.mount("/", StaticFiles(directory=static_dir(), html=True), name="page")
    return app
