"""Threads kept for the process's jobs once they are started: sessions, model calls, the
audit key's loading, an engine's scheduler.

A thread's start is dearer than its stack: `Thread.start` waits until the new thread runs,
which while other threads hold the interpreter lock is a wait for the lock (up to a switch
interval, 5 ms), and an engine that started its session threads at every start, joined them
at every stop, and a model call that started a thread of its own paid it on a run's critical
path, once per run and once per call. So a thread that finishes a job waits here for the
next one, whoever's it is; at most KEEP wait (an idle one costs a stack's address space
and nothing else), the rest end.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger("firm")

KEEP = 64  # idle threads kept at most
IDLE_NAME = "firm-idle"


class Job:
    """A job handed to a thread: join() waits for it to end."""

    __slots__ = ("_done", "fn", "name")

    def __init__(self, fn: Callable[[], None], name: str):
        self.fn = fn
        self.name = name
        self._done = threading.Event()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the job to end; False if it still runs after `timeout` seconds."""
        return self._done.wait(timeout)

    def done(self) -> bool:
        return self._done.is_set()


class _Worker:
    __slots__ = ("_job", "_ready", "thread")

    def __init__(self) -> None:
        self._ready = threading.Lock()  # held while the worker has no job
        self._ready.acquire()
        self._job: Job | None = None
        self.thread = threading.Thread(target=self._serve, name=IDLE_NAME, daemon=True)

    def hand(self, job: Job) -> None:
        self._job = job
        self._ready.release()

    def _serve(self) -> None:
        me = self.thread
        while True:
            self._ready.acquire()
            job, self._job = self._job, None
            assert job is not None
            me.name = job.name  # what logs and thread listings show while it runs
            try:
                job.fn()
            except BaseException:  # a job catches its own errors; never lose the thread
                log.exception("the job %s failed", job.name)
            finally:
                me.name = IDLE_NAME
                job._done.set()
            if not _back(self):
                return


_lock = threading.Lock()
_idle: list[_Worker] = []
started = 0  # threads this module has started (what tests and benchmarks read)


def _back(worker: _Worker) -> bool:
    """Put a worker that finished its job back among the idle; False if enough wait already."""
    with _lock:
        if len(_idle) >= KEEP:
            return False
        _idle.append(worker)
        return True


def _start() -> _Worker:
    global started
    worker = _Worker()
    worker.thread.start()
    with _lock:
        started += 1
    return worker


def run(fn: Callable[[], None], name: str) -> Job:
    """Run fn on an idle thread (a new one if none is idle); the thread is called `name`
    while it runs fn. RuntimeError if no thread can be started."""
    job = Job(fn, name)
    with _lock:
        worker = _idle.pop() if _idle else None
    if worker is None:
        worker = _start()
    worker.hand(job)
    return job


def keep_ready(count: int) -> None:
    """Start threads until `count` (at most KEEP) are idle, for jobs about to come."""
    while True:
        with _lock:
            if len(_idle) >= min(count, KEEP):
                return
        worker = _start()
        with _lock:
            _idle.append(worker)


def idle() -> int:
    with _lock:
        return len(_idle)


def _forget_after_fork() -> None:
    # A forked child has none of its parent's threads: the idle ones are not there to run.
    global _lock
    _lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
