"""Who is working: worker ids, and whether the worker holding a task is still alive.

A worker id is `host:pid:nonce`. On the same host a worker's liveness is known at once — its
process is gone, or is a zombie its parent has not reaped — so recovery need not wait for the
lease to run out; on another host only the lease can tell (None). Engines in this process say
when they start and stop, because their pid stays alive after they stop.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from pathlib import Path

HOST = socket.gethostname()

_live: set[str] = set()  # engines running in this process
_live_lock = threading.Lock()


def make_worker_id() -> str:
    """A new worker id for an engine in this process."""
    return f"{HOST}:{os.getpid()}:{secrets.token_hex(3)}"


def worker_started(worker_id: str) -> None:
    """An engine in this process started working as worker_id."""
    with _live_lock:
        _live.add(worker_id)


def worker_stopped(worker_id: str) -> None:
    """An engine in this process stopped (or, in a test, is to be taken for dead)."""
    with _live_lock:
        _live.discard(worker_id)


def worker_alive(worker_id: str) -> bool | None:
    """Whether a worker is alive: known for processes on this host, None for other hosts."""
    try:
        host, pid_text, _ = worker_id.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return None
    if host != HOST:
        return None
    if pid == os.getpid():
        with _live_lock:
            return worker_id in _live
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed process its parent has not reaped yet is a zombie: dead for our purposes
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True
