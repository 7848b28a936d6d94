"""Reading the log by kind, on SQLite and a real PostgreSQL server: a team's manager asks for
its decisions and a run's end for its downgrades and reviews, and gets those entries only, in
log order, whatever else the tasks logged."""

from __future__ import annotations

import pytest
from pg_helpers import started_manager

from firm.events import EventKind
from firm.store import SqlStore

pytestmark = pytest.mark.timeout(120)


def _log(store: SqlStore) -> tuple[str, str, list[int]]:
    """A manager and one report, each with notes and questions in its log; the seqs of the
    manager's questions, asked and answered."""
    root, (kid,) = started_manager(store, 1)
    seqs = []
    for i in range(3):
        store.append_events([("note", root.id, "ceo", {"by": "ava", "text": f"n{i}"})])
        store.append_events([("note", kid.id, "r0", {"by": "ava", "text": f"k{i}"})])
        (asked,) = store.append_events(
            [(EventKind.QUESTION_ASKED, root.id, "ceo", {"id": f"q{i}", "question": "?"})]
        )
        (answered,) = store.append_events(
            [
                (
                    EventKind.QUESTION_ANSWERED,
                    root.id,
                    "ava",
                    {"id": f"q{i}", "by": "ava", "answer": "y"},
                )
            ]
        )
        seqs += [asked.seq, answered.seq]
    store.append_events([(EventKind.QUESTION_ASKED, kid.id, "r0", {"id": "qk", "question": "?"})])
    return root.id, kid.id, seqs


def test_a_read_by_kind_returns_the_tasks_entries_of_those_kinds_only_in_order(
    store: SqlStore,
) -> None:
    root, kid, seqs = _log(store)
    kinds = [EventKind.QUESTION_ASKED, EventKind.QUESTION_ANSWERED]
    mine = store.events_after(0, 1000, task_ids=[root], kinds=kinds)
    assert [e.seq for e in mine] == seqs
    assert [e.data["id"] for e in mine] == ["q0", "q0", "q1", "q1", "q2", "q2"]
    both = store.events_after(0, 1000, task_ids=[root, kid], kinds=[EventKind.QUESTION_ASKED])
    assert [(e.task_id, e.data["id"]) for e in both] == [
        (root, "q0"),
        (root, "q1"),
        (root, "q2"),
        (kid, "qk"),
    ]
    # After a seq and within a limit, as any read of the log.
    assert [e.seq for e in store.events_after(seqs[1], 2, task_ids=[root], kinds=kinds)] == seqs[
        2:4
    ]


def test_a_read_by_kind_of_the_whole_log_and_of_a_kind_never_logged(store: SqlStore) -> None:
    root, kid, _ = _log(store)
    notes = store.events_after(0, 1000, kinds=["note"])
    assert [e.data["text"] for e in notes] == ["n0", "k0", "n1", "k1", "n2", "k2"]
    assert store.events_after(0, 1000, task_ids=[root], kinds=[EventKind.MANAGER_DECISION]) == []
    assert store.events_after(0, 1000, task_ids=[kid], kinds=[]) == []
    # Without kinds, a task's every entry, as before.
    everything = store.events_after(0, 1000, task_ids=[kid])
    assert {"note", EventKind.QUESTION_ASKED} <= {e.kind for e in everything}


def test_a_read_by_kind_with_the_cancel_that_ended_the_task(store: SqlStore) -> None:
    root, kid, _ = _log(store)
    store.cancel(root, "stop", by="ava")
    ended = store.events_after(
        0, 1000, task_ids=[kid], with_cancels=True, kinds=[EventKind.CANCELLED]
    )
    assert [(e.task_id, e.kind) for e in ended] == [(root, EventKind.CANCELLED)]
    asked = store.events_after(
        0, 1000, task_ids=[kid], with_cancels=True, kinds=[EventKind.QUESTION_ASKED]
    )
    assert [e.data["id"] for e in asked] == ["qk"]
