"""The one HTTP connection pool every model client of the process calls through.

Building an HTTP client loads the CA bundle into a TLS context (20–50 ms of CPU here) and a
new client opens new connections (a TLS handshake each, against a hosted API). Runs come
and go — every `Team.start()`, every run of `firm serve` builds its brains anew — so a
client per brain paid both on every run's first model call; one pool per process pays them
once, and a later run's first call reuses a connection an earlier run left open.

A streamed reply ends with `data: [DONE]`, where its reader stops (llm_stream.py, as the
openai client's does) and closes the response before the last bytes of the body (the
chunked encoding's terminator) are read: the connection is then dropped, not pooled, and
every call opened a new one. Those few bytes are read here
(`finish`), once the reply is handed on, so the connection goes back to the pool. Waiting
for them before handing the reply on would hold the reply on a server that sends `[DONE]`
and never ends the body.

The pool depends on nothing per endpoint (the URL, key and timeout travel with each
request), only on the environment that shapes an HTTP client: the proxy and CA-bundle
variables. A process that changes them gets a new pool from then on; a forked child gets
its own rather than sharing its parent's sockets.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterator
from typing import Any

import openai

# The HTTP library the installed openai client is built on (httpx, or its successor).
HTTPX: Any = importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])
DRAIN_LIMIT = 64 * 1024  # bytes read after [DONE] at most; past that the connection is dropped

# What httpx reads from the environment when a client is built.
_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)

_lock = threading.Lock()
_pools: dict[tuple[str | None, ...], openai.DefaultHttpxClient] = {}


def shared_pool() -> openai.DefaultHttpxClient:
    """The process's HTTP client for the environment as it is now (openai's defaults:
    connection limits, redirects; timeouts are set per request by each model client)."""
    key = tuple(os.environ.get(name) for name in _ENV)
    with _lock:
        pool = _pools.get(key)
        if pool is None or pool.is_closed:
            pool = _pools[key] = openai.DefaultHttpxClient(
                event_hooks={"response": [_drain_after_done]}
            )
        return pool


def _drain_after_done(response: Any) -> None:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        response.stream = _DrainsAfterDone(response.stream)


class _DrainsAfterDone(HTTPX.SyncByteStream):  # type: ignore[misc]
    """A server-sent event stream that, closed right after its `[DONE]` event, stays open
    until `finish` reads the body's end, so that its connection is kept."""

    def __init__(self, stream: Any):
        self._stream = stream
        self._parts: Iterator[bytes] | None = None
        self._tail = b""
        self._owed = False

    def __iter__(self) -> Iterator[bytes]:
        self._parts = iter(self._stream)
        for part in self._parts:
            self._tail = (self._tail + part)[-32:]
            yield part

    def close(self) -> None:
        if self._parts is not None and self._tail.rstrip().endswith(b"[DONE]"):
            self._owed = True  # read to the end by finish(), after the reply is handed on
        else:
            self._stream.close()

    def finish(self) -> None:
        if not self._owed:
            return
        self._owed = False
        read = 0
        try:
            assert self._parts is not None
            for part in self._parts:
                read += len(part)
                if read > DRAIN_LIMIT:
                    break
        except Exception:  # the reply is in: a broken end only loses the connection
            pass
        finally:
            self._stream.close()


def finish(response: Any) -> None:
    """Read the end of a streamed reply whose reader stopped at `[DONE]` (its connection
    then goes back to the pool); nothing for any other response. Called by the
    thread that made the call, once the reply is handed on: a server that never ends the
    body holds only that thread, until the read timeout."""
    stream = getattr(response, "stream", None)
    if isinstance(stream, _DrainsAfterDone):
        stream.finish()
