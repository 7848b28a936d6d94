"""A store closed on a thread of its own, after its caller has what it needs from it.

A SQLite store's close copies its WAL into the file and syncs both (two fsyncs, 4-13 ms on
this disk, measured as the larger part of a team run's last milliseconds): a caller that has
read what it wanted and will not touch the store again (`Team.start()` once it has the run's
outcome) need not wait for that. Everything was committed before: another connection, in
this process or another, reads it all meanwhile, and a process killed before the close ends
leaves a WAL that the next open takes up, as after any kill. What the close adds is the
sync, which the process still waits for as it exits (`atexit`), so a script that ends right
after its run leaves no WAL beside the file.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

from firm import idlethreads

log = logging.getLogger("firm.store")

EXIT_WAIT = 60.0  # seconds the process waits at exit for each close still running

_lock = threading.Lock()
_running: set[idlethreads.Job] = set()


def close_soon(close: Callable[[], None], name: str = "firm-store-close") -> idlethreads.Job:
    """Run `close` on an idle thread; the process waits for it at exit."""

    def run() -> None:
        try:
            close()
        except Exception as exc:  # nobody waits for its answer: say it in the log
            log.warning("the store's close failed: %s", exc)

    with _lock:
        job = idlethreads.run(run, name)
        _running.add(job)
        done = [j for j in _running if j.done()]
        _running.difference_update(done)
    return job


def wait_all(timeout: float = EXIT_WAIT) -> None:
    """Wait for the closes still running (each for up to `timeout` seconds)."""
    with _lock:
        jobs = list(_running)
        _running.clear()
    for job in jobs:
        if not job.join(timeout):
            log.warning("a store was still closing after %gs at exit", timeout)


atexit.register(wait_all)
