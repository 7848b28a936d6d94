"""A subtree's cancel is one log entry, on SQLite and a real PostgreSQL server: it names how
many tasks it ended and their digest, and every ended row names the entry (issue 16)."""

from __future__ import annotations

import threading

import pytest
from pg_helpers import RUN, claim_task, done, started_manager

from firm.endings import ended_sha256, expand
from firm.errors import TaskNotFound
from firm.events import EventKind
from firm.store import SqlStore
from firm.store.base import NewTask
from firm.tasks import Outcome, Status

pytestmark = pytest.mark.timeout(120)


def _company(store: SqlStore, managers: int, leaves: int) -> tuple[str, str, list[str]]:
    """root → mid (waiting) → managers (waiting) → leaves each (todo); one leaf done.
    Returns the root, the mid task and the ids still open under (and with) the mid task."""
    root, (mid,) = started_manager(store, 1)
    store.settle(root.id, "w", Outcome.yielded())
    mid = claim_task(store, mid.id)
    items = [([], NewTask(f"part {i}", "", "m", "mid")) for i in range(managers)]
    kids = store.delegate_many(mid.id, 0, items, "w")
    store.settle(mid.id, "w", Outcome.yielded())
    for kid in kids:
        claim_task(store, kid.task.id)
        items = [([], NewTask(f"leaf {j}", "", "l", "m")) for j in range(leaves)]
        store.delegate_many(kid.task.id, 0, items, "w")
        store.settle(kid.task.id, "w", Outcome.yielded())
    finished = store.claim("w", 1, 30)[0]
    store.settle(finished.id, "w", done())
    open_ids = [t.id for t in store.subtree(mid.id) if not t.terminal]
    return root.id, mid.id, sorted(open_ids)


def test_a_subtree_cancel_writes_one_entry_naming_every_task_it_ended(store: SqlStore) -> None:
    _root, mid, open_ids = _company(store, 12, 25)  # 1 + 12 + 300 tasks, one of them done
    head = store.last_seq()
    cancelled = store.cancel(mid, "the plan changed", by="ava")
    assert cancelled == open_ids and len(cancelled) == 312
    after = store.events_after(head, 1000)
    ends = [e for e in after if e.kind == EventKind.CANCELLED]
    assert len(ends) == 1, "one entry for the whole subtree"
    (entry,) = ends
    assert entry.task_id == mid
    assert entry.data == {
        "reason": "the plan changed",
        "by": "ava",
        "ended": 312,
        "ended_sha256": ended_sha256(open_ids),
    }
    assert store.ended_by(entry.seq) == open_ids
    rows = store.subtree(mid)
    assert all(t.status == Status.CANCELLED for t in rows if t.id in set(open_ids))
    assert all(t.error == "the plan changed" for t in rows if t.id in set(open_ids))
    assert [e.kind for e in after] == [EventKind.CANCELLED, EventKind.WOKEN]  # root woken
    # Readers expand it: one ending per task, as the per-task entries said.
    flat = list(expand(after, lambda e: store.ended_by(e.seq)))
    assert sorted(e.task_id for e in flat if e.kind == EventKind.CANCELLED) == open_ids
    assert store.cancel(mid, "again") == []  # nothing open: nothing written
    assert store.last_seq() == after[-1].seq


def test_a_revocation_is_one_entry_and_one_cancel_for_the_open_tasks(store: SqlStore) -> None:
    _root, mid, open_ids = _company(store, 3, 4)
    finished = [t.id for t in store.subtree(mid) if t.status == Status.DONE]
    head = store.last_seq()
    revoked = store.revoke(mid, "audit found a problem")
    assert revoked == sorted(open_ids + finished)  # the done leaf is revoked, not cancelled
    after = store.events_after(head, 1000)
    assert [(e.kind, e.task_id) for e in after][:2] == [
        (EventKind.REVOKED, mid),
        (EventKind.CANCELLED, mid),
    ]
    revoked_entry, cancelled_entry = after[:2]
    assert revoked_entry.data["revoked"] == len(revoked)
    assert cancelled_entry.data["ended"] == len(open_ids)
    assert store.ended_by(cancelled_entry.seq) == open_ids
    assert all(t.revoked for t in store.subtree(mid))


def test_concurrent_cancels_each_stamp_their_own_entry(store: SqlStore) -> None:
    """Under group commit (PostgreSQL) cancels of sibling subtrees share a commit: each row
    must still name the entry that ended it, whatever entries came before it."""
    _root, mid, _open = _company(store, 8, 5)
    managers = [t for t in store.subtree(mid) if t.parent_id == mid]
    head = store.last_seq()
    go = threading.Barrier(len(managers))
    errors: list[BaseException] = []

    def cancel(task_id: str) -> None:
        try:
            go.wait(10)
            store.cancel(task_id, f"stop {task_id}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=cancel, args=(m.id,)) for m in managers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    entries = [e for e in store.events_after(head, 1000) if e.kind == EventKind.CANCELLED]
    assert sorted(e.task_id for e in entries) == sorted(m.id for m in managers)
    for e in entries:
        ids = store.ended_by(e.seq)
        assert e.task_id in ids and len(ids) == e.data["ended"]
        assert ended_sha256(ids) == e.data["ended_sha256"]
        assert {t.id for t in store.subtree(str(e.task_id)) if t.finished_at} >= set(ids)


def test_cancelling_a_task_the_store_does_not_have_is_refused(store: SqlStore) -> None:
    head = store.last_seq()
    with pytest.raises(TaskNotFound):
        store.cancel("T-0000000000000000", "stop")
    assert store.last_seq() == head


@pytest.mark.parametrize("root_id", ["goal one", "goal"])
def test_a_cancel_names_each_task_by_its_own_id_whatever_the_id(
    store: SqlStore, root_id: str
) -> None:
    # A caller may choose a root's id, spaces and all: the cancel still names every task it
    # ended, and the entry's digest is of those ids.
    root = store.create_run(RUN, NewTask("goal", "", "ceo", "user"), task_id=root_id)
    claim_task(store, root.id)
    kids = store.delegate_many(
        root.id, 0, [([], NewTask(f"part {i}", "", "r", "ceo")) for i in range(3)], "w"
    )
    expected = sorted([root_id, *(k.task.id for k in kids)])
    head = store.last_seq()
    assert store.cancel(root_id, "stop") == expected
    (entry,) = [e for e in store.events_after(head, 100) if e.kind == EventKind.CANCELLED]
    assert entry.data["ended"] == 4 and entry.data["ended_sha256"] == ended_sha256(expected)
    assert store.ended_by(entry.seq) == expected
    assert all(t.status == Status.CANCELLED for t in store.subtree(root_id))
