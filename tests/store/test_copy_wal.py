"""A store whose WAL is copied ahead of its close (SqlBase.copy_wal_soon, what a team's run
does while it reads its outcome): what a user would notice if that went wrong is a write
made after the copy missing once the store is reopened, or a WAL left beside it."""

from __future__ import annotations

from pathlib import Path

from firm.store import NewTask, RunSpec, open_store
from firm.tasks import Status

RUN = RunSpec("", "<t>", "simulation", {}, ".")


def test_writes_before_and_after_the_early_copy_are_all_in_the_closed_store(
    tmp_path: Path,
) -> None:
    db = tmp_path / "firm.db"
    store = open_store(db)
    first = store.create_run(RUN, NewTask("Before", "", "ceo", "user"))
    store.copy_wal_soon()
    assert [t.id for t in store.subtree(first.id)] == [first.id]  # reads go on meanwhile
    second = store.create_run(RUN, NewTask("After", "", "ceo", "user"))
    store.close()
    assert not db.with_name(db.name + "-wal").exists()  # copied whole, and removed
    again = open_store(db)
    try:
        assert {again.get_task(t.id).status for t in (first, second)} == {Status.TODO}
        assert again.last_seq() == len(again.events_after(0, 1_000))  # the chain is gapless
    finally:
        again.close()
