"""The WAL's checkpoints run on a thread beside the writes, after every so many commits and
after a big cancel's (store/latecheckpoint.py): what a user would notice if that went wrong is
a WAL file that grows without end beside the store, or a store that reads differently once
reopened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from firm.store import NewTask, RunSpec, SqlStore, open_store
from firm.tasks import Status

RUN = RunSpec("", "<t>", "simulation", {}, ".")
FRAME = 4096 + 24  # a WAL frame: a page and its header


def wal_frames(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return (wal.stat().st_size - 32) // FRAME if wal.exists() else 0


def checkpoints_done(store: SqlStore) -> None:
    """Wait for the checkpoint thread the store's writes started."""
    assert store._late is not None
    store._late.join()


def truncate_wal(store: SqlStore, db: Path) -> None:
    """The WAL copied and its file emptied, once the last big write's checkpoint thread is
    done: a truncating checkpoint gives up, leaving the file as it was, while another one
    runs."""
    checkpoints_done(store)
    with sqlite3.connect(db) as other:
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0 and wal_frames(db) <= 0


def goal(store: SqlStore, fanout: int) -> str:
    """A goal with `fanout` claimed reports, each with `fanout` open subtasks of its own."""
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    store.claim("w", 1, 3600)
    kids = store.delegate_many(
        root.id, 0, [([], NewTask(f"Part {i}", "", "m", "ceo")) for i in range(fanout)], "w"
    )
    store.claim("w", fanout, 3600)
    for kid in kids:
        leaves = [([], NewTask(f"Leaf {j}", "", "e", "m")) for j in range(fanout)]
        store.delegate_many(kid.task.id, 0, leaves, "w")
    return root.id


def test_small_writes_keep_the_wal_bounded(tmp_path: Path) -> None:
    """The thread's copies let the WAL start over, well before the writer's own checkpoint."""
    db = tmp_path / "firm.db"
    store = open_store(db)
    try:
        for _ in range(1500):  # 3,000 commits, ~20,000 pages written to the WAL
            filler = store.create_run(RUN, NewTask("Filler", "", "ceo", "user"))
            store.cancel(filler.id, "not wanted")
        checkpoints_done(store)
        assert wal_frames(db) < 4000  # the file keeps its largest size
        assert len(store.subtree(filler.id)) == 1
    finally:
        store.close()


def test_big_cancels_racing_the_checkpoint_thread_leave_the_wal_bounded(
    tmp_path: Path,
) -> None:
    db = tmp_path / "firm.db"
    store = open_store(db)
    goals = []
    for round_ in range(6):
        # 2,071 tasks: past the size whose commit starts a checkpoint at once. Their writes
        # race the thread the last round's cancel started.
        top = goal(store, 45)
        # The WAL copied and started over, then small writes: a checkpoint of every so many
        # commits may be running when the cancel commits.
        truncate_wal(store, db)
        for _ in range(40 + 10 * round_):
            filler = store.create_run(RUN, NewTask("Filler", "", "ceo", "user"))
            store.cancel(filler.id, "not wanted")
        cancelled = store.cancel(top, "stop")
        assert len(cancelled) == 1 + 45 + 45 * 45
        goals.append(top)
    # Writes after the cancels, each cancel's checkpoint asked for while one may run: the
    # WAL started over all along (its file keeps its largest size).
    truncate_wal(store, db)
    for _ in range(3):
        goals.append(top := goal(store, 45))
        store.cancel(top, "stop")
        # The writes made while the thread copies go on without a checkpoint by design, and
        # how many there are depends on how fast the disk syncs the copy: wait for it here.
        checkpoints_done(store)
    assert wal_frames(db) < 4000
    head = store.last_seq()
    store.close()

    again = open_store(db)
    try:
        for top in goals:
            assert {t.status for t in again.subtree(top)} == {Status.CANCELLED}
        entries = again.events_after(0, limit=head + 10)
        assert [e.seq for e in entries] == list(range(1, head + 1))  # gapless
        prev = entries[0].prev_hash
        for e in entries:
            assert e.prev_hash == prev
            prev = e.hash
        ends = [e for e in entries if e.kind == "cancelled" and e.data["ended"] > 1]
        assert [e.task_id for e in ends] == goals
    finally:
        again.close()


def test_writes_go_on_when_no_checkpoint_thread_can_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit asks for a checkpoint after it is made: no thread to run one (the process at
    its limit) must not turn a write that committed into an error, nor stop the next ones."""
    from firm.store import latecheckpoint

    def no_thread(*_a: object) -> None:
        raise RuntimeError("can't start new thread")

    db = tmp_path / "firm.db"
    store = open_store(db)
    monkeypatch.setattr(latecheckpoint.idlethreads, "run", no_thread)
    try:
        ids = []
        for _ in range(latecheckpoint.EVERY + 10):  # past the commit that asks for one
            ids.append(store.create_run(RUN, NewTask("Filler", "", "ceo", "user")).id)
        assert [store.get_task(i).status for i in ids] == [Status.TODO] * len(ids)
    finally:
        store.close()


def test_a_failing_checkpoint_leaves_the_writes_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from firm.store import latecheckpoint

    def broken(*_a: object) -> int:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(latecheckpoint, "copy_wal", broken)
    db = tmp_path / "firm.db"
    store = open_store(db)
    for _ in range(3 * latecheckpoint.EVERY):
        filler = store.create_run(RUN, NewTask("Filler", "", "ceo", "user"))
        store.cancel(filler.id, "not wanted")
    checkpoints_done(store)
    head = store.last_seq()
    store.close()
    again = open_store(db)
    try:
        assert [e.seq for e in again.events_after(0, limit=head + 10)] == list(range(1, head + 1))
    finally:
        again.close()


def test_a_big_cancel_leaves_its_copy_to_the_thread_and_the_backstop_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big cancel's commit copies nothing into the store's file, even when it takes the WAL
    past the writer's backstop: the thread does that after it (held off here, so the cancel's
    commit is seen alone). The writes after it have the backstop again, so the WAL stays
    bounded without the thread."""
    from firm.store import latecheckpoint

    monkeypatch.setattr(latecheckpoint, "BACKSTOP", 200)
    monkeypatch.setattr(latecheckpoint.LateCheckpoints, "start", lambda self: None)
    db = tmp_path / "firm.db"
    store = open_store(db)
    try:
        top = goal(store, 32)  # 1,057 tasks: a big write, ~80 pages to cancel
        truncate_wal(store, db)
        while wal_frames(db) < 160:  # small writes, short of the backstop
            filler = store.create_run(RUN, NewTask("Filler", "", "ceo", "user"))
        before = db.read_bytes()
        cancelled = store.cancel(top, "stop")
        assert len(cancelled) == 1 + 32 + 32 * 32
        assert wal_frames(db) > 200
        assert db.read_bytes() == before  # its commit copied nothing
        store.cancel(filler.id, "not wanted")  # a small write: the backstop copies
        assert db.read_bytes() != before
    finally:
        store.close()
    again = open_store(db)
    try:
        assert {t.status for t in again.subtree(top)} == {Status.CANCELLED}
    finally:
        again.close()
