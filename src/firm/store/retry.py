"""The one place where the store survives a bad moment: deadlocks, serialization failures,
a locked SQLite file and lost database connections are retried with backoff.

Every public store method runs as one transaction (or one read), so re-running the method is
re-running the transaction. Only the outermost call retries: a method that calls another does
not multiply the waiting. When the database stays away longer than the retry window, the
caller gets StoreUnavailable, which the engine treats as "hand the work back", never as the
agent's failure.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from firm.errors import StoreError

log = logging.getLogger("firm.store")

F = TypeVar("F", bound=Callable[..., Any])

# Worth another try: connection exceptions (class 08), transaction rollbacks such as
# serialization failures and deadlocks (class 40), a lock timeout, the server shutting down or
# starting, too many connections. Anything else (bad credentials, no such database, a bug in
# a statement) fails at once.
_TRANSIENT_CLASSES = ("08", "40")
_TRANSIENT_STATES = {"55P03", "57P01", "57P02", "57P03", "53300", "53400"}


class StoreUnavailable(StoreError):
    """The database could not be reached (or kept failing) for the whole retry window."""


def is_transient(exc: BaseException) -> bool:
    """Whether running the same transaction again may succeed."""
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    state = getattr(exc.orig, "sqlstate", None)
    if state:
        return state in _TRANSIENT_STATES or state[:2] in _TRANSIENT_CLASSES
    # No SQLSTATE: a driver-level failure (connection refused, closed, SQLite busy).
    return isinstance(exc, (OperationalError, InterfaceError))


class RetryPolicy:
    """Exponential backoff with jitter, bounded by a total time window."""

    def __init__(self, window: float = 60.0, first: float = 0.05, longest: float = 2.0):
        self.window = window
        self.first = first
        self.longest = longest

    def delays(self) -> Any:
        deadline = time.monotonic() + self.window
        delay = self.first
        while time.monotonic() < deadline:
            yield min(delay * (0.5 + random.random()), max(0.0, deadline - time.monotonic()))
            delay = min(delay * 2, self.longest)


_depth = threading.local()


def retrying(method: F) -> F:
    """Re-run a store method (one transaction) on a transient database error."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_depth, "n", 0):  # an inner call: the outermost one owns the retrying
            return method(self, *args, **kwargs)
        policy: RetryPolicy = self.retry_policy
        delays = policy.delays()
        attempt = 0
        _depth.n = 1
        try:
            while True:
                try:
                    return method(self, *args, **kwargs)
                except DBAPIError as exc:
                    if not is_transient(exc):
                        raise
                    attempt += 1
                    delay = next(delays, None)
                    if delay is None:
                        raise StoreUnavailable(
                            f"the store at {self.safe_url} kept failing for "
                            f"{policy.window:.0f}s ({attempt} tries): {_short(exc)}"
                        ) from exc
                    log.warning(
                        "store: %s failed (%s); retry %d in %.2fs",
                        method.__name__,
                        _short(exc),
                        attempt,
                        delay,
                    )
                    time.sleep(delay)
        finally:
            _depth.n = 0

    return cast(F, wrapper)


def _short(exc: DBAPIError) -> str:
    text = str(exc.orig).strip().splitlines()
    return text[0] if text else type(exc.orig).__name__
