"""Connections that send nothing, or half a request, are closed instead of held for ever.

uvicorn times out an idle keep-alive connection only after it has answered a request on it;
a connection that never completes its first request line and headers (or its next one) is
held open indefinitely, so a few hundred of them exhaust the office. This HTTP protocol closes
a connection whose request headers are not complete within `HEADER_TIMEOUT` seconds of the
connection opening or of the request's first byte. A body sent too slowly is the middleware's
to refuse (see limits.BODY_TIMEOUT).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0  # seconds to send a request line and headers
IDLE_TIMEOUT = 5  # seconds an idle keep-alive connection stays open after an answer


class TimedH11Protocol(H11Protocol):
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            self._arm_header_timer()  # headers still incomplete: the clock keeps running
        else:
            self._disarm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm_header_timer()  # uvicorn's keep-alive timeout takes over until data comes

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(HEADER_TIMEOUT, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return  # closed already, or upgraded to a WebSocket that is no longer ours
        if self.conn.their_state is h11.IDLE:
            self.transport.close()
