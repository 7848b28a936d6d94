"""Reading a firm's log in tests."""

from __future__ import annotations

from firm.api import Firm
from firm.endcall import with_calls
from firm.store.base import Event


def events_of(firm: Firm, kind: str, task_id: str | None = None) -> list[Event]:
    """Every event of a kind in the log (of one task, when given), in order; a call logged in
    its ending's entry is read as its own `tool_call` (firm/endcall.py), as the verifier does."""
    return [
        e
        for e in with_calls(firm.events(limit=100_000))
        if e.kind == kind and (task_id is None or e.task_id == task_id)
    ]
