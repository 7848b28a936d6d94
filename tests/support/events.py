"""Reading a firm's log in tests."""

from __future__ import annotations

from firm.api import Firm
from firm.store.base import Event


def events_of(firm: Firm, kind: str, task_id: str | None = None) -> list[Event]:
    """Every event of a kind in the log (of one task, when given), in order."""
    return [
        e
        for e in firm.events(limit=100_000)
        if e.kind == kind and (task_id is None or e.task_id == task_id)
    ]
