"""Bounds on what one HTTP request may cost, applied before any route or validation runs.

A request body is read up to `MAX_BODY_BYTES` (413 beyond), then, when it is JSON, parsed once
here and refused (400, with what is wrong) when it holds a number JSON cannot carry (NaN,
Infinity), nests deeper than `MAX_DEPTH` or holds more than `MAX_ITEMS` keys and items. Without
this a 300,000-key body costs seconds of validation for one 422, and a NaN reaches a handler
that cannot even echo it back. Plain ASGI: it buffers request bodies only, never responses, and
leaves the WebSocket alone.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_ITEMS = 10_000
BODY_TIMEOUT = 30.0  # seconds for a whole request body to arrive


class RefusedBody(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _no_constant(name: str) -> Any:
    raise RefusedBody(400, f"the body holds {name}, which is not a number JSON can carry")


def check_structure(value: Any) -> None:
    """Refuse values nested deeper than MAX_DEPTH or with more than MAX_ITEMS parts."""
    items = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_DEPTH:
                raise RefusedBody(400, f"the body nests deeper than {MAX_DEPTH} levels")
            items += len(node)
            if items > MAX_ITEMS:
                raise RefusedBody(400, f"the body holds more than {MAX_ITEMS} keys and items")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)


def check_body(body: bytes, content_type: str) -> None:
    if not body or "json" not in content_type:
        return
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except RefusedBody:
        raise
    except (ValueError, RecursionError):
        return  # not JSON: the route's own validation says so, in its own words
    check_structure(value)


class RequestLimits:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            declared = int(headers.get("content-length", "0") or 0)
        except ValueError:
            declared = 0
        if declared > MAX_BODY_BYTES:
            await _refuse(send, 413, f"the body is over {MAX_BODY_BYTES} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), BODY_TIMEOUT)
            except TimeoutError:
                await _refuse(send, 408, f"the body did not arrive within {BODY_TIMEOUT:g} s")
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await _refuse(send, 413, f"the body is over {MAX_BODY_BYTES} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            check_body(body, headers.get("content-type", ""))
        except RefusedBody as exc:
            await _refuse(send, exc.status, str(exc))
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
