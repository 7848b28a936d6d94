"""What a session leaves for the engine once its brain returns: the log entries a settle is to
carry, or, when no settle will (the session was cut off, or its last delegations wrote its
end: firm/turnend.py), those entries written on their own."""

from __future__ import annotations

import logging
from typing import Any

from firm.session import Session
from firm.store.base import SettleResult, Store
from firm.tasks import Outcome

log = logging.getLogger("firm.engine")

Pending = list[tuple[str, str | None, str | None, dict[str, Any]]]


def leftover(
    store: Store, session: Session | None, outcome: Outcome | None, task_id: str
) -> tuple[Pending, SettleResult | None]:
    """The entries still owed for the settle, and the settle already written, if it was."""
    pending = session.take_deferred() if session is not None else []
    settled = session.settled if session is not None else None
    if outcome is None and settled is None and not pending:
        _pay_usage(store, task_id)
    if (outcome is not None and settled is None) or not pending:
        return pending, settled
    # The calls did run: their entries still belong in the log — as they are after an
    # ending already written; else marked as written after their session was cut off.
    if settled is None:
        pending = [(k, t, a, {**d, "superseded": True}) for k, t, a, d in pending]
    try:
        store.append_events(pending)
    except Exception:
        log.warning("could not log the last calls of %s's session", task_id)
    return [], settled


def _pay_usage(store: Store, task_id: str) -> None:
    """A session cut off with nothing left to log writes no settle: the usage of its last
    model calls, owed to this thread's next write (store/usage.py), is written now rather
    than by whatever session this thread runs next, or never."""
    try:
        store.pay_usage()
    except Exception:
        log.warning("could not record the last model calls' usage of %s", task_id)
