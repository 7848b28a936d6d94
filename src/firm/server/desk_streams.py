"""What each desk's agent is writing right now, for the office's pages: live only, never logged.

Sessions of this process's engine publish the paragraph they are writing (firm.streams); this
keeps the latest text per agent, cut to its tail, with a version number, and wakes the pages'
senders, which send what changed at most STREAM_HZ times a second. A paragraph that lands in
the log (a thought event) ends its stream: the pages drop it when they see the event, and this
forgets it so a page that connects later does not get it either.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass
from typing import Any

from firm import streams

STREAM_CHARS = 600  # a desk shows the end of what is being written; this is plenty
STREAM_HZ = 10  # updates a second per page (so per desk), however fast a model writes
MAX_DESKS = 10_000


@dataclass
class DeskStream:
    task: str
    text: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "text": self.text}


class DeskStreams:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._desks: dict[str, DeskStream] = {}
        self._version = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._wake_pending = False
        self._stop: Any = None

    def start(self, store: object, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._changed = asyncio.Event()
        self._stop = streams.listen(store, self.publish)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None

    @property
    def version(self) -> int:
        return self._version

    # --- from sessions (any thread) ------------------------------------------------------

    def publish(self, agent: str, task_id: str, text: str) -> None:
        text = text[-STREAM_CHARS:]
        with self._lock:
            current = self._desks.get(agent)
            if current is not None and current.task == task_id and current.text == text:
                return
            self._version += 1
            self._desks[agent] = DeskStream(task_id, text, self._version)
            if len(self._desks) > MAX_DESKS:  # only ever agents of this process's charts
                oldest = min(self._desks, key=lambda a: self._desks[a].version)
                del self._desks[oldest]
            if self._wake_pending:
                return
            self._wake_pending = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed since the check
                loop.call_soon_threadsafe(self._wake)

    def landed(self, agent: str, task_id: str) -> None:
        """A paragraph of agent's about task_id is in the log: its stream is over."""
        with self._lock:
            current = self._desks.get(agent)
            if current is not None and current.task == task_id:
                del self._desks[agent]

    def _wake(self) -> None:
        with self._lock:
            self._wake_pending = False
        changed, self._changed = self._changed, asyncio.Event()
        if changed is not None:
            changed.set()

    # --- for the pages' senders ----------------------------------------------------------

    def since(self, version: int) -> tuple[dict[str, dict[str, Any]], int]:
        """The desks whose stream changed after `version` (text "" when it ended)."""
        with self._lock:
            changed = {a: d.to_dict() for a, d in self._desks.items() if d.version > version}
            return changed, self._version

    def current(self) -> tuple[dict[str, dict[str, Any]], int]:
        """Every desk with text in progress, for a page that just connected."""
        with self._lock:
            live = {a: d.to_dict() for a, d in self._desks.items() if d.text}
            return live, self._version

    async def wait_beyond(self, version: int) -> None:
        while self._version <= version:
            changed = self._changed
            if changed is None:
                raise RuntimeError("the desk streams have not been started")
            await changed.wait()
