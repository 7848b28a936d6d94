"""A subtree's cancel is one log entry on its top task: the sessions it cut off under that top
still end their spans, as per-task entries did, and the rest go on."""

from __future__ import annotations

from firm.endings import ended_sha256
from firm.store.base import Event
from firm.telemetry.spans import SpanBuilder, TaskInfo

TASKS = {
    "T-root": TaskInfo("T-root", None, "ceo", "Launch", 1.0),
    "T-cto": TaskInfo("T-root", "T-root", "cto", "Build", 2.0),
    "T-dev": TaskInfo("T-root", "T-cto", "dev", "Code", 3.0),
    "T-cmo": TaskInfo("T-root", "T-root", "cmo", "Sell", 2.0),
}


def _started(seq: int, task_id: str) -> Event:
    return Event(seq, float(seq), "started", task_id, TASKS[task_id].assignee, {"attempt": 1})


def test_a_subtree_cancel_ends_the_sessions_under_its_top() -> None:
    builder = SpanBuilder(TASKS.__getitem__)
    assert builder.feed([_started(1, "T-cto"), _started(2, "T-dev"), _started(3, "T-cmo")]) == []
    ended = ["T-cto", "T-dev"]
    cancel = Event(
        4,
        4.0,
        "cancelled",
        "T-cto",
        None,
        {"reason": "dropped", "by": "user", "ended": 2, "ended_sha256": ended_sha256(ended)},
    )
    spans = builder.feed([cancel])
    assert sorted(s.attributes["firm.task.id"] for s in spans) == ended
    assert all(s.attributes["firm.outcome"] == "cancelled" and s.end == 4.0 for s in spans)
    # The marketing session, outside the cancelled subtree, is still open and ends as usual.
    (cmo,) = builder.feed([Event(5, 5.0, "completed", "T-cmo", "cmo", {"result": "sold"})])
    assert cmo.attributes["firm.task.id"] == "T-cmo"
