"""The threads sessions run on, started with the engine rather than when work arrives.

A ThreadPoolExecutor starts a thread at a submit that finds none idle, and `Thread.start`
waits until the new thread runs — which, while sessions hold the interpreter lock, is a wait
for the lock. A delegation that made 25 tasks todo at once had the scheduler start 20 threads
one after another on the run's critical path (a trace, CEO → 5 → 25 on 2 busy cores: 11 ms to
launch four managers). So the engine's threads are started when it starts, up to WARM of
them; past that (a very large max_concurrent), a submit that finds no thread free starts one.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("firm.engine")

# Threads started with the engine; an idle one costs a stack's address space and nothing else.
WARM = 64


class SessionThreads:
    """A fixed-size pool of threads that each run one submitted callable at a time."""

    def __init__(self, size: int, name: str = "firm-session"):
        self.size = size
        self._name = name
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0  # callables submitted and not yet finished: queued or running
        self._lock = threading.Lock()
        self._closed = False

    def warm(self, count: int = WARM) -> None:
        """Start threads until there are `count` (at most `size`)."""
        with self._lock:
            while not self._closed and len(self._threads) < min(count, self.size):
                self._start_one()

    def submit(self, fn: Callable[[], None]) -> None:
        """Run fn on a free thread. RuntimeError once shut down."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the session threads are shut down")
            # Every callable queued has a thread that is idle or will be when it finishes
            # what it runs: start one only when none would be (if that fails, fn is not run).
            if self._busy >= len(self._threads) and len(self._threads) < self.size:
                self._start_one()
            self._busy += 1
            self._work.put(fn)

    def shutdown(self) -> None:
        """Drop what has not started, let what runs finish, and end the threads."""
        with self._lock:
            self._closed = True
            while True:
                try:
                    dropped = self._work.get_nowait()
                except queue.Empty:
                    break
                if dropped is not None:
                    self._busy -= 1
            threads = list(self._threads)
            for _ in threads:
                self._work.put(None)
        for thread in threads:
            thread.join()

    def _start_one(self) -> None:
        thread = threading.Thread(
            target=self._serve, name=f"{self._name}_{len(self._threads)}", daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def _serve(self) -> None:
        while True:
            fn = self._work.get()
            if fn is None:
                return
            try:
                fn()
            except BaseException:  # the engine's own work catches its errors; never lose a thread
                log.exception("a session thread's work failed")
            finally:
                with self._lock:
                    self._busy -= 1


class Slots:
    """The engine's concurrency limit: the sessions it runs, and the slots held by claims whose
    commit has not come back yet. A claim takes its slots before its write (the scheduler's
    round, a delegation's claim on a session thread) and gives back what it did not start, so
    two claims in flight at once cannot each count the same free slot."""

    def __init__(self, size: int):
        self.size = size
        self.lock = threading.Lock()
        self.running: dict[str, threading.Event] = {}
        self._held = 0
        # What the hold open on this thread has not yet started: a task it starts stops being
        # held as it enters `running`, so no one counts it twice while the hold's block goes on
        # (a session started by a claim round may delegate before that round has ended).
        self._left = threading.local()

    def free(self) -> int:
        with self.lock:
            return self.size - len(self.running) - self._held

    @contextmanager
    def hold(self, most: int) -> Iterator[int]:
        """Hold up to `most` free slots for the block, which starts what it claimed (each
        task entered in `running`) before the slots are let go."""
        with self.lock:
            held = max(0, min(most, self.size - len(self.running) - self._held))
            self._held += held
        outer = getattr(self._left, "n", 0)
        self._left.n = held
        try:
            yield held
        finally:
            with self.lock:
                self._held -= self._left.n
            self._left.n = outer

    def keep(self, n: int) -> None:
        """Let go at once of what the hold open on this thread holds beyond `n` (its claim
        came back with `n` tasks), rather than at the end of its block."""
        with self.lock:
            left = getattr(self._left, "n", 0)
            if left > n:
                self._held -= left - n
                self._left.n = n

    def enter(self, task_id: str, cancel: threading.Event) -> int:
        """A task enters the running sessions (the caller holds `lock`), taking one of the
        slots the hold open on this thread still holds, if any; returns how many run."""
        self.running[task_id] = cancel
        left = getattr(self._left, "n", 0)
        if left:
            self._left.n = left - 1
            self._held -= 1
        return len(self.running)
