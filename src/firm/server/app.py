"""The FastAPI application: the API, the live feed and the page, over one Office."""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import firm
from firm.server import approvals, humans, live, routes, runs
from firm.server.limits import RequestLimits
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
        path = scope["path"]
        page = not (path == "/docs" or path.startswith(("/api/", "/docs/", "/openapi")))

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


DOCS_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)

DOCS_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="stylesheet" href="/docs.css">
<link rel="icon" href="/docs/assets/favicon-32x32.png">
</head>
<body>
<form id="token-form" class="docs-token" hidden>
  <p id="token-reason"></p>
  <label for="token-input">Access token</label>
  <input id="token-input" type="password" autocomplete="off" spellcheck="false" required>
  <button type="submit">Show the API</button>
</form>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script type="module" src="/docs.js"></script>
</body>
</html>
"""


def _install_docs(app: FastAPI, office: Office) -> None:
    """The OpenAPI schema and its docs page. The schema names the company and its agents, so
    it is a read like any other: off loopback it needs the token. The docs page itself holds
    nothing (docs.js fetches the schema with the office page's token, or asks for one), and
    Swagger UI's assets come from the swagger-ui-bundle-v2 package rather than a CDN: the office
    must work on a machine with no way out."""
    from swagger_ui_bundle import swagger_ui_path

    @app.get(
        "/openapi.json",
        include_in_schema=False,
        dependencies=[Depends(routes.read_guard(office.policy))],
    )
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    app.mount("/docs/assets", StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")
    # Off loopback even the page's title must not name the company.
    title = "firm office · API" if office.policy.reads_need_token else f"{app.title} · API"
    page = DOCS_PAGE.format(title=html.escape(title))

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(
            page, headers={"Content-Security-Policy": DOCS_POLICY, "Cache-Control": "no-cache"}
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
        openapi_url=None,  # served below, behind the same access rule as the API
        title=f"firm office · {office.org.company}",
        version=firm.__version__,
        description=(
            "Watch and steer an AI company: give goals, follow tasks down the org chart, "
            "cancel, read results and files. Changes need the access token (Authorize)."
        ),
        lifespan=lifespan,
    )
    app.state.office = office
    app.add_middleware(RequestLimits)
    app.add_middleware(_SecurityHeaders)
    routes.install_error_handlers(app)
    app.include_router(routes.build_router(office))
    app.include_router(runs.build_router(office))
    app.include_router(approvals.build_router(office))
    app.include_router(humans.build_router(office))
    app.include_router(live.router)
    _install_docs(app, office)
    app.mount("/", StaticFiles(directory=static_dir(), html=True), name="page")
    return app
