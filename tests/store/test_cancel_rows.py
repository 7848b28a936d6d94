"""A cancel ends exactly the open tasks of its subtree, whatever lies between their rows: the
tasks of other runs made in between, and tasks of its own that already ended (SQLite changes
a run of consecutive rows as a range, and any other set row by row: store/cancel.py)."""

from __future__ import annotations

from pathlib import Path

from firm.store import NewTask, RunSpec, SqlStore, open_store
from firm.tasks import Outcome, Status

RUN = RunSpec("", "<t>", "simulation", {}, ".")


def started(store: SqlStore, title: str) -> str:
    root = store.create_run(RUN, NewTask(title, "", "ceo", "user"))
    (claimed,) = store.claim("w", 1, 60)
    assert claimed.id == root.id
    return root.id


def test_a_cancel_leaves_the_rows_between_its_own_alone(tmp_path: Path) -> None:
    store = open_store(tmp_path / "firm.db")
    goal = started(store, "Goal")
    other = started(store, "Other goal")  # its row lies between the goal's and its reports'
    reports = store.delegate_many(
        goal, 0, [([], NewTask(f"Part {i}", "", "m", "ceo")) for i in range(3)], "w"
    )
    store.delegate_many(other, 0, [([], NewTask("Side", "", "m", "ceo"))], "w")
    (first, middle, last) = (r.task.id for r in reports)
    while store.claim("w", 1, 60)[0].id != middle:
        pass
    store.settle(middle, "w", Outcome.done("finished first"))

    cancelled = store.cancel(goal, "stop")

    assert cancelled == sorted([goal, first, last])
    statuses = {t.id: t.status for t in store.subtree(goal)}
    assert statuses == {
        goal: Status.CANCELLED,
        first: Status.CANCELLED,
        middle: Status.DONE,
        last: Status.CANCELLED,
    }
    assert all(t.status != Status.CANCELLED for t in store.subtree(other))
    store.close()


def test_a_cancel_below_a_goal_ends_every_level_and_nothing_beside_it(tmp_path: Path) -> None:
    store = open_store(tmp_path / "firm.db")
    goal = started(store, "Goal")
    a, b = (
        r.task.id
        for r in store.delegate_many(
            goal, 0, [([], NewTask(f"Division {i}", "", "vp", "ceo")) for i in "ab"], "w"
        )
    )
    store.claim("w", 2, 60)
    under_a = [
        r.task.id
        for r in store.delegate_many(
            a, 0, [([], NewTask(f"Team {i}", "", "m", "vp")) for i in range(2)], "w"
        )
    ]
    store.delegate_many(b, 0, [([], NewTask("Team b", "", "m", "vp"))], "w")
    store.claim("w", 3, 60)
    leaves = [
        r.task.id
        for team in under_a
        for r in store.delegate_many(
            team, 0, [([], NewTask(f"Leaf {j}", "", "e", "m")) for j in range(2)], "w"
        )
    ]

    cancelled = store.cancel(a, "stop")

    assert cancelled == sorted([a, *under_a, *leaves])
    beside = [*store.subtree(b), store.get_task(goal)]
    assert all(t.status != Status.CANCELLED for t in beside)
    store.close()
