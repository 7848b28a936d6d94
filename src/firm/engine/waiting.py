"""A caller's wait on the engine (Engine.run_until, Engine.run_until_idle): woken when a root
it watches ends in this process or the engine goes idle, it reads the store to see where the
run stands; a run that nothing can move any more ends the wait too (stuck)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from firm.store.base import Store
from firm.tasks import Task

# How often until_ended looks at the store when woken only because the engine went idle.
RECHECK = 0.05


class Waiting:
    """The roots callers wait on, and the event that wakes them."""

    def __init__(
        self,
        store: Store,
        start: Callable[[], object],
        running: Mapping[str, threading.Event],
        heartbeat: float,
    ):
        """`start` starts the engine (a wait works the store); `running` is the engine's
        running sessions, by task id; `heartbeat` the engine's."""
        self.store = store
        self._start = start
        self._running = running
        self._heartbeat = heartbeat
        self.woken = threading.Event()  # a watched root ended, or the engine went idle
        self.watched: set[str] = set()
        self._ended: set[str] = set()  # watched roots whose ending this process committed

    def wake(self) -> None:
        """The engine went idle, or a signal came: waits look at the store again."""
        self.woken.set()

    def saw_ended(self, task_ids: Iterable[str | None]) -> None:
        """Watched roots whose ending this process committed: their waits answer at once."""
        self._ended.update(t for t in task_ids if t is not None)
        self.woken.set()

    def until_ended(self, root_id: str, timeout: float | None = None) -> Task:
        """Work until the task is terminal (or nothing can move any more); return it."""
        self._start()
        deadline = None if timeout is None else time.monotonic() + timeout
        quiet_since: float | None = None
        self.watched.add(root_id)
        looked = -RECHECK
        while True:
            # The engine goes idle after every session when one runs at a time: such wake-ups
            # are answered at most every RECHECK seconds (two reads each, on the thread the
            # sessions need); the root's own ending is answered at once.
            wait = looked + RECHECK - time.monotonic()
            if wait > 0 and root_id not in self._ended:
                self.woken.wait(wait)
                self.woken.clear()
                continue
            looked = time.monotonic()
            task = self.store.get_task(root_id)
            if task.terminal:
                self.watched.discard(root_id)
                self._ended.discard(root_id)
                return task
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"task {root_id} is still {task.status} after {timeout}s")
            if self.stuck(root_id):
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 2 * self._heartbeat:
                    self.watched.discard(root_id)
                    return task
            else:
                quiet_since = None
            # Woken when a watched root ends or the engine goes idle; the timeout re-checks
            # for work finished by other processes.
            self.woken.wait(0.5)
            self.woken.clear()

    def until_idle(self, timeout: float | None = None) -> None:
        """Work until no task in the store can move."""
        self._start()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            counts = self.store.counts()
            if not counts.get("todo") and not counts.get("in_progress") and not self._running:
                return
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"still busy after {timeout}s: {counts}")
            self.woken.wait(0.25)
            self.woken.clear()

    def stuck(self, root_id: str) -> bool:
        """Nothing of the run runs here, and no task of it is todo or in progress anywhere.
        Asked each time the engine goes idle (after every session, when one runs at a
        time), so it is one indexed seek rather than a count over the whole run."""
        if self._running:
            return False
        return not self.store.has_open_work(root_id)
