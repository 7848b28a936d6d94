"""WS /api/ws: a snapshot of the office, then every event of the log, live and in order.

Messages from the server, as JSON text:

    {"type": "snapshot", "seq": S, "org": {...}, "tasks": [...], "agents": {...}, "counts": {...},
     "approvals": [...]}
    {"type": "events", "events": [{"seq": ..., "kind": ..., ...}, ...]}   (repeated)
    {"type": "stream", "desks": {AGENT: {"task": TASK_ID, "text": "…"}}}  (with ?streams=1)

The snapshot reflects at least every event up to S. The events that follow start right after
`after` when the client gives it (a reconnect: it misses nothing), else right after S; every
batch continues exactly where the previous one ended. Stream messages (asked for with
`streams=1`) carry what agents are
writing now, before it reaches the log as a thought (text "" when it stopped without one): a
desk shows it while it is about the desk's current task, until that task's next thought lands.
They are not in the log, so a replay has none.

Browsers cannot set headers on a WebSocket, so the token may come as the query parameter
`token`, or as a subprotocol `token.TOKEN` offered next to `firm` (the server answers `firm`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from starlette.websockets import WebSocketState

from firm.server.desk_streams import STREAM_HZ
from firm.server.office import Office

Send = Callable[[str], Awaitable[None]]

SUBPROTOCOL = "firm"
TOKEN_PREFIX = "token."
CLOSE_UNAUTHORISED = 4401
BATCH = 500

router = APIRouter()


def _offered_token(ws: WebSocket, query_token: str | None) -> str | None:
    if query_token:
        return query_token
    for proto in ws.scope.get("subprotocols") or []:
        if proto.startswith(TOKEN_PREFIX):
            return proto[len(TOKEN_PREFIX) :]
    return None


@router.websocket("/api/ws")
async def live(
    ws: WebSocket,
    after: int | None = Query(None, ge=0, le=2**62),
    token: str | None = Query(None, max_length=512),
    streams: bool = Query(False),
) -> None:
    office: Office = ws.app.state.office
    offered = ws.scope.get("subprotocols") or []
    await ws.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
    refusal = office.policy.live_refusal(
        _offered_token(ws, token), ws.headers.get("host"), ws.headers.get("origin")
    )
    if refusal is not None:
        # Accept first, then close with a reason: a refused handshake reaches a browser's
        # script only as "connection failed", and the page could not tell it to ask for a token.
        reason = refusal.encode()[:120].decode(errors="ignore")  # a close reason fits 123 bytes
        await ws.close(code=CLOSE_UNAUTHORISED, reason=reason)
        return
    snapshot = await run_in_threadpool(office.snapshot)
    cursor = snapshot["seq"] if after is None else min(after, snapshot["seq"])
    await ws.send_text(json.dumps(snapshot, ensure_ascii=False, separators=(",", ":")))
    lock = asyncio.Lock()  # two senders, one socket: a message at a time

    async def send(text: str) -> None:
        async with lock:
            await ws.send_text(text)

    sender = asyncio.create_task(_stream(send, office, cursor))
    listener = asyncio.create_task(_until_closed(ws))
    tasks = [sender, listener]
    if streams:
        tasks.append(asyncio.create_task(_desk_streams(send, office)))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
                await task
        if ws.application_state == WebSocketState.CONNECTED:
            # The client may have gone already: closing then is not an error worth logging.
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await ws.close()


async def _stream(send: Send, office: Office, cursor: int) -> None:
    hub = office.hub
    while True:
        batch = hub.read_after(cursor, BATCH)
        if batch is None:  # fell behind the buffer: catch up from the store
            batch = await run_in_threadpool(hub.read_store, cursor, BATCH)
        if batch:
            body = ",".join(text for _, text in batch)
            await send('{"type":"events","events":[' + body + "]}")
            cursor = batch[-1][0]
            continue
        await hub.wait_beyond(cursor, timeout=30)


async def _desk_streams(send: Send, office: Office) -> None:
    """What the desks' agents are writing, as they write it, at most STREAM_HZ times a second."""
    streams = office.streams
    desks, version = streams.current()
    while True:
        if desks:
            await send(json.dumps({"type": "stream", "desks": desks}, ensure_ascii=False))
            await asyncio.sleep(1 / STREAM_HZ)
        await streams.wait_beyond(version)
        desks, version = streams.since(version)


async def _until_closed(ws: WebSocket) -> None:
    """Read (and ignore) what the client sends, to notice when it goes away."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
