"""The threads sessions run on: the process's idle threads (firm/idlethreads.py), made
ready when the engine starts rather than when work arrives.

Starting a thread waits until it runs — which, while sessions hold the interpreter lock, is
a wait for the lock. A delegation that made 25 tasks todo at once had the scheduler start 20
threads one after another on the run's critical path (a trace, CEO → 5 → 25 on 2 busy cores:
11 ms to launch four managers), and an engine that started its threads at every start and
joined them at every stop paid 3–7 ms of each team run for them. So the engine asks for up
to WARM idle threads as it starts, and they outlive it for the next engine of the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from firm import idlethreads

# Threads made ready with the engine; an idle one costs a stack's address space and nothing else.
WARM = 64


class SessionThreads:
    """Runs submitted callables at once, each on a thread of its own, at most `size` at a
    time (the engine's slots see to that), and waits for them when it shuts down."""

    def __init__(self, size: int, name: str = "firm-session"):
        self.size = size
        self._name = name
        self._busy = 0  # callables submitted and not yet finished
        self._count = 0  # callables submitted so far: a thread's name while it runs one
        self._idle = threading.Condition()
        self._closed = False

    def warm(self, count: int = WARM) -> None:
        """Have `count` threads (at most `size`) idle for this engine's first sessions."""
        idlethreads.keep_ready(min(count, self.size))

    def submit(self, fn: Callable[[], None]) -> None:
        """Run fn on a free thread. RuntimeError once shut down."""
        with self._idle:
            if self._closed:
                raise RuntimeError("the session threads are shut down")
            self._busy += 1
            name = f"{self._name}_{self._count}"
            self._count += 1
        try:
            idlethreads.run(lambda: self._run(fn), name)
        except BaseException:
            self._finished()
            raise

    def shutdown(self) -> None:
        """Drop what has not started, and wait for what runs to finish."""
        with self._idle:
            self._closed = True
            while self._busy:
                self._idle.wait()

    def _run(self, fn: Callable[[], None]) -> None:
        try:
            if not self._closed:  # shut down before its thread took it: dropped
                fn()
        finally:
            self._finished()

    def _finished(self) -> None:
        with self._idle:
            self._busy -= 1
            if not self._busy:
                self._idle.notify_all()


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
