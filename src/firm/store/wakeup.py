"""Waking one worker per new task instead of all of them (PostgreSQL).

Every process that LISTENs hears every commit. Were each worker to claim on every commit that
made a task todo, N workers would race for one task and N - 1 of them would find nothing (a
thundering herd). So the NOTIFY says how many tasks became todo and which process committed,
and each process decides on its own, the same way as the others, who is to claim them:

- the committing process, if it listens (it made the work; its own scheduler was nudged
  in-process already, so the notification itself wakes nobody there);
- else the listening process at position seq mod N in the sorted list of listening processes
  (read from pg_stat_activity, where each listener shows as `firm-listen:host:pid`).

That process asks its engines how many sessions they have room for. If fewer than the tasks
made, it passes the rest on to the next process in the sorted list with a NOTIFY naming it
(`to`), which does the same; the hand-off stops after visiting every listening process once.
A process with no engine (a watcher, the office) has no room and passes it on at once.
Cancellations are not routed: every process still hears them and stops its sessions.

The list is read at most every `refresh_every` seconds, so for that long after a worker
starts or stops, two processes may disagree on the rotation: a task may then wake two workers
or none. None is caught by the scheduler's heartbeat — every engine with room claims once per
heartbeat whether woken or not — so a task waits at most one heartbeat (1 s by default) for a
worker with room; wake-ups are hints, the tasks table is the truth.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Engine, func, select, text

from firm.store import notify
from firm.store.notify import StoreSignal

log = logging.getLogger("firm.store")

FreeSlots = Callable[[], int]

_MEMBERS = text(
    "SELECT application_name FROM pg_stat_activity "
    "WHERE datname = current_database() AND application_name LIKE 'firm-listen:%'"
)


class WakeRouter:
    """Decides, for this process, whether a NOTIFY's new tasks are its to claim."""

    refresh_every = 2.0  # seconds between reads of who listens

    def __init__(self, engine: Engine, me: str | None = None):
        self._engine = engine
        self.me = me or notify.listen_name()
        self._members: tuple[str, ...] = ()
        self._read_at = -self.refresh_every
        self._capacity: list[FreeSlots] = []
        self._lock = threading.Lock()
        self.handoffs = 0  # wake-ups this process passed on

    def add_capacity(self, free_slots: FreeSlots) -> Callable[[], None]:
        """An engine here claims work: free_slots says how many more sessions it can run."""
        with self._lock:
            self._capacity.append(free_slots)

        def remove() -> None:
            with self._lock:
                if free_slots in self._capacity:
                    self._capacity.remove(free_slots)

        return remove

    def forget_members(self) -> None:
        """Re-read who listens at the next signal (after a reconnect)."""
        self._read_at = -self.refresh_every

    def members(self) -> tuple[str, ...]:
        if time.monotonic() - self._read_at >= self.refresh_every:
            try:
                with self._engine.connect() as conn:
                    names = conn.execute(_MEMBERS).scalars().all()
                self._members = tuple(sorted(set(names)))
            except Exception as exc:  # the listener must outlive any database trouble
                log.warning("store: cannot read who listens (%s); waking on every commit", exc)
                self._members = ()
            self._read_at = time.monotonic()
        return self._members

    def route(self, signal: StoreSignal) -> StoreSignal:
        """The signal as this process's listeners should see it: todo is how many tasks they
        are to claim (0: this one is not theirs), passing on what they have no room for."""
        if not signal.todo or signal.reconnected:
            return signal
        members = self.members()
        if len(members) < 2 or self.me not in members:
            return signal  # nobody to share with, or we cannot tell: wake as if alone
        if signal.to is not None:
            target = signal.to
        elif signal.origin in members:
            target = signal.origin
        else:
            target = members[signal.seq % len(members)]
        if target != self.me:
            return replace(signal, todo=0)
        with self._lock:
            free = sum(max(0, slots()) for slots in self._capacity)
        left = signal.todo - free
        if left > 0 and signal.hop + 1 < len(members):
            after = members[(members.index(self.me) + 1) % len(members)]
            self._pass_on(notify.handoff(signal.seq, left, after, signal.hop + 1))
        if free <= 0 or (signal.to is None and signal.origin == self.me):
            # No room here; or our own commit, whose tasks our engines were told of in-process.
            return replace(signal, todo=0)
        return replace(signal, todo=min(signal.todo, free))

    def _pass_on(self, note: str) -> None:
        try:
            with self._engine.begin() as conn:
                conn.execute(select(func.pg_notify(notify.CHANNEL, note)))
            self.handoffs += 1
        except Exception as exc:  # the heartbeat still finds the tasks
            log.warning("store: could not pass a wake-up on (%s)", exc)
