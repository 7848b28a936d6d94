"""One connection per MCP server for this process: started when first needed, shared by
every session, restarted after it dies, closed when the process is done with it.

The SDK is asynchronous and sessions are threads, so the hub keeps one event loop in a
thread of its own and sessions wait on futures. A connection's client is entered and left
by one task (the SDK's cancel scopes require it); calls are other tasks on the same loop.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from firm.errors import FirmError, ToolError
from firm.mcp.child import PARENT_ENV
from firm.mcp.config import ServerConfig

T = TypeVar("T")

START_TIMEOUT = 60.0  # a stdio server may be an `npx` that installs itself first
LIST_TIMEOUT = 30.0
IDLE_PING = 0.25  # seconds without an answer after which a call first checks the server
PING_TIMEOUT = 5.0


class ServerUnavailable(FirmError):
    """An MCP server could not be started or reached."""


class Connection:
    """One MCP server as this process sees it."""

    def __init__(self, hub: McpHub, config: ServerConfig):
        self.hub = hub
        self.config = config
        self._lock = threading.Lock()
        self._client: Any = None
        self._closing: asyncio.Event | None = None
        self._holder: asyncio.Future[None] | None = None
        self._tools: list[Any] | None = None
        self.starts = 0  # how many times the server was started (a restart adds one)
        self._last_ok = 0.0  # when the server last answered (monotonic seconds)
        self._users = 0

    # --- who uses it -----------------------------------------------------------------------

    def acquire(self) -> None:
        """A company's tool source starts using this server."""
        with self._lock:
            self._users += 1

    def release(self) -> None:
        """A company's tool source is done with it: the last one out stops the server."""
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users == 0:
                self._drop()

    # --- what sessions call ----------------------------------------------------------------

    def tools(self) -> list[Any]:
        """The server's tools (the SDK's Tool objects), listed once per connection."""
        with self._lock:
            if self._tools is None:
                client = self._ensure()
                try:
                    self._tools = self.hub.run(_list_all(client), LIST_TIMEOUT)
                except Exception as exc:
                    self._drop()
                    raise ServerUnavailable(
                        f"MCP server {self.config.name!r} did not list its tools: {_reason(exc)}"
                    ) from None
            return list(self._tools)

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call a tool and return the SDK's CallToolResult; failures become ToolError."""
        name = self.config.name
        with self._lock:
            try:
                client = self._ensure()
                if time.monotonic() - self._last_ok > IDLE_PING:
                    client = self._alive_or_restarted(client)
            except ServerUnavailable as exc:
                raise ToolError(str(exc)) from None
        timeout = self.config.timeout
        try:
            result = self.hub.run(
                client.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=timeout)),
                timeout + 5,
            )
            self._last_ok = time.monotonic()
            return result
        except Exception as exc:
            if isinstance(exc, TimeoutError) or _is_timeout(exc):
                raise ToolError(
                    f"MCP server {name!r}: {tool} did not answer within {timeout:g} s"
                ) from None
            if _is_protocol_error(exc):
                raise ToolError(f"MCP server {name!r} refused {tool}: {_reason(exc)}") from None
            # The connection is gone (the server died, or its pipe or socket broke): the next
            # call starts it again. This call is not re-sent: it may already have run there.
            with self._lock:
                if self._client is client:
                    self._drop()
            raise ToolError(
                f"MCP server {name!r} stopped during the call to {tool} ({_reason(exc)}); "
                "it is restarted for the next call"
            ) from None

    def close(self) -> None:
        with self._lock:
            self._drop()

    # --- the connection's life -------------------------------------------------------------

    def _alive_or_restarted(self, client: Any) -> Any:
        """A server idle for a while may have died since: a ping tells, before a call is sent
        that would otherwise be lost with it."""
        try:
            self.hub.run(client.send_ping(), PING_TIMEOUT)
        except Exception:
            self._drop()
            return self._ensure()
        self._last_ok = time.monotonic()
        return client

    def _ensure(self) -> Any:
        if self._client is not None and self._holder is not None and not self._holder.done():
            return self._client
        self._drop()
        ready: asyncio.Future[Any] = self.hub.future()
        self._holder = self.hub.spawn(self._hold(ready))
        try:
            self._client = self.hub.wait(ready, START_TIMEOUT)
        except TimeoutError:
            self._drop()
            raise ServerUnavailable(
                f"MCP server {self.config.name!r} ({self.config.describe()}) did not start "
                f"within {START_TIMEOUT:g} s"
            ) from None
        except Exception as exc:
            said = stderr_tail(self.config)
            self._drop()
            raise ServerUnavailable(
                f"MCP server {self.config.name!r} ({self.config.describe()}) cannot be "
                f"started: {said or _reason(exc)}"
            ) from None
        self.starts += 1
        self._last_ok = time.monotonic()
        return self._client

    def _drop(self) -> None:
        """Close the current connection (if any); the next call makes a new one."""
        closing, holder = self._closing, self._holder
        self._client = None
        self._holder = None
        self._closing = None
        if closing is not None:
            self.hub.loop.call_soon_threadsafe(closing.set)
        if holder is not None:
            with contextlib.suppress(Exception):
                self.hub.wait(holder, 10)

    async def _hold(self, ready: asyncio.Future[Any]) -> None:
        self._closing = asyncio.Event()
        closing = self._closing
        try:
            async with _client_for(self.config) as client:
                if not ready.done():
                    ready.set_result(client)
                await closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            if not isinstance(exc, Exception):
                raise


class McpHub:
    """The connections of one process, on one event loop thread."""

    _shared: McpHub | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="firm-mcp", daemon=True)
        self._thread.start()
        self._connections: dict[ServerConfig, Connection] = {}
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def shared(cls) -> McpHub:
        """The hub of this process (made on first use, closed at exit)."""
        with cls._shared_lock:
            if cls._shared is None or cls._shared._closed:
                cls._shared = McpHub()
                atexit.register(cls._shared.close)
            return cls._shared

    def connection(self, config: ServerConfig) -> Connection:
        with self._lock:
            if self._closed:
                raise ServerUnavailable("the MCP connections of this process are closed")
            conn = self._connections.get(config)
            if conn is None:
                conn = self._connections[config] = Connection(self, config)
            return conn

    def close(self) -> None:
        """Stop every server this process started."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._connections.values())
            self._connections.clear()
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    # --- the loop, from other threads ----------------------------------------------------

    def future(self) -> asyncio.Future[Any]:
        return self.run(_new_future(), 5)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        made: list[asyncio.Future[T]] = []
        done = threading.Event()

        def start() -> None:
            made.append(asyncio.ensure_future(coro, loop=self.loop))
            done.set()

        self.loop.call_soon_threadsafe(start)
        done.wait()
        return made[0]

    def wait(self, fut: asyncio.Future[T], timeout: float) -> T:
        async def waiter() -> T:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)

        return asyncio.run_coroutine_threadsafe(waiter(), self.loop).result()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        async def bounded() -> T:
            return await asyncio.wait_for(coro, timeout)

        return asyncio.run_coroutine_threadsafe(bounded(), self.loop).result()


async def _new_future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


async def _list_all(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is not listed forever
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = getattr(page, "nextCursor", None) or getattr(page, "next_cursor", None)
        if not cursor:
            break
    return tools


# The stderr file of each stdio server's current process, to quote when it fails to start.
errlogs: dict[ServerConfig, Any] = {}


def stderr_tail(config: ServerConfig, limit: int = 600) -> str:
    f = errlogs.get(config)
    if f is None:
        return ""
    try:
        f.flush()
        f.seek(0)
        text = f.read()[-limit:].strip()
    except (OSError, ValueError):
        return ""
    return str(text)


@contextlib.asynccontextmanager
async def _client_for(config: ServerConfig) -> AsyncIterator[Any]:
    """An initialised MCP client session for the server (the SDK's ClientSession)."""

    from mcp import ClientSession

    if config.url is not None:
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        http = httpx.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx.Timeout(config.timeout, read=max(config.timeout, 300)),
        )
        async with (
            http,
            streamable_http_client(config.url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
        return
    from mcp import StdioServerParameters
    from mcp.client.stdio import get_default_environment, stdio_client

    argv = config.launch_argv()
    # The SDK's minimal environment (PATH, HOME, …), not all of firm's: a third-party server
    # gets the variables its entry names, never firm's model keys by accident.
    env = {**get_default_environment(), **dict(config.env), PARENT_ENV: str(os.getpid())}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=config.cwd)
    # The server's stderr is kept (its last lines explain a server that will not start) in a
    # file, not a pipe: a chatty server must never block on a pipe nobody reads.
    # It stays open after the server stops, to be quoted; the next start replaces it.
    errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
    previous = errlogs.pop(config, None)
    if previous is not None:
        previous.close()
    errlogs[config] = errlog
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _is_timeout(exc: BaseException) -> bool:
    """The SDK's own read timeout, which it raises as an error with HTTP's 408 code."""
    from mcp.shared.exceptions import McpError

    return isinstance(exc, McpError) and getattr(exc.error, "code", None) == 408


def _is_protocol_error(exc: BaseException) -> bool:
    """An error the server answered with (the connection is fine), not a broken connection."""
    from mcp.shared.exceptions import McpError

    return isinstance(exc, McpError) and "closed" not in str(exc).lower()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(e) for e in exc.exceptions)
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 500 else text[:500] + " …"
