"""The wall clock authority is judged by: when a grant was made, when a call was checked.

The engine reads it through a `Clock` it is given, so a test can stand in one it moves by hand
(`firm.testing.ManualClock`) instead of sleeping past an expiry. Pure data, no I/O.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to: `advance(seconds)`."""

    def __init__(self, start: float | None = None):
        self._now = time.time() if start is None else float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward (never back) and return the new time."""
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        with self._lock:
            self._now += seconds
            return self._now


SYSTEM_CLOCK = SystemClock()
