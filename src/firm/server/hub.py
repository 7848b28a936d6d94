"""The event hub: one reader of the store's activity log, many live watchers.

A single thread follows the log (the store's events table, written by this process's engine and
by any other process on the same store) and keeps the most recent events in memory, already
encoded as JSON. Each watcher keeps its own cursor and reads forward from it: from memory while
the cursor is recent, from the store when it has fallen behind the buffer. So a slow watcher
never holds memory hostage, and a watcher that reconnects with the last sequence number it saw
misses nothing, however long it was away.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from firm.events import EventKind
from firm.store.base import Event, Store

log = logging.getLogger("firm.server")

# Delegating and finishing show on the page as flights and statuses, not as a desk's action.
LIFECYCLE = frozenset({"delegate_task", "complete_task", "fail_task"})
_ACTIONS = frozenset({EventKind.TOOL_CALL, EventKind.TOOL_DENIED})  # what a desk shows it doing


def encode_event(event: Event) -> str:
    return json.dumps(event.to_dict(), ensure_ascii=False, separators=(",", ":"))


@dataclass
class AgentNote:
    """What a desk shows beyond task status: the agent's latest thought and action."""

    thought: str | None = None
    thought_at: float | None = None
    thought_task: str | None = None  # a desk shows a thought only under the task it was about
    action: str | None = None
    action_at: float | None = None
    action_task: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "thought": self.thought,
            "thought_at": self.thought_at,
            "thought_task": self.thought_task,
            "action": self.action,
            "action_at": self.action_at,
            "action_task": self.action_task,
        }


class EventHub:
    """Follows the log in a thread; serves batches of encoded events to asyncio watchers."""

    def __init__(self, store: Store, *, buffer_size: int = 10_000, batch: int = 1000):
        self.store = store
        self.buffer_size = buffer_size
        self.batch = batch
        self._lock = threading.Lock()
        self._seqs: list[int] = []
        self._encoded: list[str] = []
        self._floor = 0  # the buffer holds every event with seq > _floor, up to _last
        self._last = 0
        self._notes: dict[str, AgentNote] = {}
        # Told of every thought that lands (agent, task): a desk's live stream ends there.
        self.on_thought: Callable[[str, str], None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin following the log; watchers wait on `loop`."""
        self._loop = loop
        self._changed = asyncio.Event()
        last = self.store.last_seq()
        self._floor = self._last = last
        # Desks show each agent's latest thought, even from before the office opened.
        self._note(self.store.events_after(max(0, last - 5000), limit=5000))
        self._thread = threading.Thread(target=self._follow, name="firm-event-hub", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def last_seq(self) -> int:
        return self._last

    # --- the follower thread -------------------------------------------------------------

    def _follow(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            try:
                if not self.store.wait_for_change(self._last, timeout=0.5):
                    continue
                events = self.store.events_after(self._last, limit=self.batch)
                backoff = 0.0
            except Exception:
                # A store hiccup must not end the live view; the cursor makes retrying exact.
                log.exception("event hub: cannot read the log; retrying")
                backoff = min(max(backoff * 2, 0.1), 5.0)
                self._stop.wait(backoff)
                continue
            if events:
                self._append(events)

    def _append(self, events: list[Event]) -> None:
        encoded = [encode_event(e) for e in events]
        with self._lock:
            self._seqs.extend(e.seq for e in events)
            self._encoded.extend(encoded)
            self._last = events[-1].seq
            if len(self._seqs) > 2 * self.buffer_size:
                drop = len(self._seqs) - self.buffer_size
                self._floor = self._seqs[drop - 1]
                del self._seqs[:drop]
                del self._encoded[:drop]
        self._note(events)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed since the check
                loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        if changed is not None:
            changed.set()

    def _note(self, events: Iterable[Event]) -> None:
        with self._lock:
            self._note_locked(events)

    def _note_locked(self, events: Iterable[Event]) -> None:
        for e in events:
            if not e.agent:
                continue
            if e.kind == EventKind.THOUGHT:
                note = self._notes.setdefault(e.agent, AgentNote())
                note.thought, note.thought_at = str(e.data.get("text", "")), e.ts
                note.thought_task = e.task_id
                if self.on_thought is not None and e.task_id:
                    self.on_thought(e.agent, e.task_id)
            elif e.kind in _ACTIONS and e.data.get("tool") not in LIFECYCLE:
                note = self._notes.setdefault(e.agent, AgentNote())
                summary = e.data.get("summary") or ""
                verb = e.data.get("tool", "")
                denied = " (denied)" if e.kind == EventKind.TOOL_DENIED else ""
                note.action = f"{verb} {summary}".strip() + denied
                note.action_at = e.ts
                note.action_task = e.task_id

    def notes(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {agent: note.to_dict() for agent, note in self._notes.items()}

    # --- what watchers call --------------------------------------------------------------

    def read_after(self, cursor: int, limit: int) -> list[tuple[int, str]] | None:
        """Buffered events after cursor, oldest first; None when the buffer no longer has them."""
        with self._lock:
            if cursor < self._floor:
                return None
            i = bisect.bisect_right(self._seqs, cursor)
            return list(zip(self._seqs[i : i + limit], self._encoded[i : i + limit], strict=True))

    def read_store(self, cursor: int, limit: int) -> list[tuple[int, str]]:
        """The same, from the store: for watchers that fell behind the buffer (blocking)."""
        return [(e.seq, encode_event(e)) for e in self.store.events_after(cursor, limit)]

    async def wait_beyond(self, cursor: int, timeout: float | None = None) -> bool:
        """Wait until the hub has seen an event after cursor; False on timeout."""
        while True:
            changed = self._changed
            if self._last > cursor:
                return True
            if changed is None:
                raise RuntimeError("the event hub has not been started")
            try:
                await asyncio.wait_for(changed.wait(), timeout)
            except TimeoutError:
                return self._last > cursor
