"""Invariants 1 and 2: settling a task and waking its parent are atomic with each other."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import event

from firm.store import NewTask, RunSpec, SqlStore
from firm.tasks import Outcome, Status, Task

RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)


def manager_with_reports(store: SqlStore, n: int) -> tuple[Task, list[Task]]:
    """A claimed manager task (worker 'boss') that has delegated n claimed subtasks."""
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    assert [t.id for t in store.claim("boss", 1, 60)] == [root.id]
    kids = [
        store.delegate(root.id, 0, NewTask(f"part {i}", "", f"r{i}", "ceo")).task for i in range(n)
    ]
    claimed = store.claim("staff", n, 60)
    assert {t.id for t in claimed} == {k.id for k in kids}
    return root, kids


def test_reports_finish_before_the_manager_ends_its_turn(store: SqlStore) -> None:
    root, kids = manager_with_reports(store, 2)
    for k in kids:
        res = store.settle(k.id, "staff", Outcome.done("ok"))
        assert res.applied and res.woke == []  # the manager is still in its session
    res = store.settle(root.id, "boss", Outcome.yielded())
    # Invariant 2: nothing left to wait for, so straight back to todo to merge.
    assert res.task is not None and res.task.status == Status.TODO
    assert res.woke == [root.id]
    kinds = [e.kind for e in store.events_after(0) if e.task_id == root.id]
    assert kinds[-2:] == ["waiting", "woken"]


class Pause:
    """Stops one store call inside its transaction until released, to force an interleaving."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def hold(self) -> None:
        self.inside.set()
        assert self.release.wait(10)


@pytest.fixture
def pause() -> Iterator[Pause]:
    p = Pause()
    yield p
    p.release.set()


def test_report_finishes_while_the_manager_settles(store: SqlStore, pause: Pause) -> None:
    root, kids = manager_with_reports(store, 1)

    def paused_count(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if "count(" in statement.lower() and root.id in str(params):
            pause.hold()  # the manager has counted one open report and not yet committed

    event.listen(store.engine, "after_cursor_execute", paused_count)
    manager = threading.Thread(target=store.settle, args=(root.id, "boss", Outcome.yielded()))
    manager.start()
    assert pause.inside.wait(10)
    report_done = threading.Event()

    def finish_report() -> None:
        store.settle(kids[0].id, "staff", Outcome.done("ok"))
        report_done.set()

    report = threading.Thread(target=finish_report)
    report.start()
    assert not report_done.wait(0.3)  # the report's settle waits for the manager's transaction
    pause.release.set()
    manager.join(10)
    report.join(10)
    assert store.get_task(root.id).status == Status.TODO  # woken, not left waiting
    order = [(e.kind, e.task_id) for e in store.events_after(0)]
    assert order.index(("waiting", root.id)) < order.index(("completed", kids[0].id))
    assert order[-1] == ("woken", root.id)


def test_manager_settles_while_its_last_report_settles(store: SqlStore, pause: Pause) -> None:
    root, kids = manager_with_reports(store, 1)

    def paused_settle(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("UPDATE") and kids[0].id in str(params):
            # The report is done and has looked at its manager (the settle's UPDATE says
            # whether a wake is due: not yet, the manager is still in its session), but has
            # not committed.
            pause.hold()

    event.listen(store.engine, "after_cursor_execute", paused_settle)
    report = threading.Thread(target=store.settle, args=(kids[0].id, "staff", Outcome.done("ok")))
    report.start()
    assert pause.inside.wait(10)
    manager = threading.Thread(target=store.settle, args=(root.id, "boss", Outcome.yielded()))
    manager.start()
    manager.join(0.3)
    assert manager.is_alive()  # blocked behind the report's transaction
    pause.release.set()
    report.join(10)
    manager.join(10)
    assert store.get_task(root.id).status == Status.TODO


def test_many_reports_and_managers_racing_never_leave_a_parent_waiting(store: SqlStore) -> None:
    rng = random.Random(7)
    for _round in range(25):
        root, kids = manager_with_reports(store, 6)
        barrier = threading.Barrier(len(kids) + 1)

        def settle(
            task_id: str,
            worker: str,
            outcome: Outcome,
            delay: float,
            barrier: threading.Barrier = barrier,
        ) -> None:
            barrier.wait()
            threading.Event().wait(delay)
            store.settle(task_id, worker, outcome)

        threads = [
            threading.Thread(
                target=settle,
                args=(
                    k.id,
                    "staff",
                    rng.choice([Outcome.done("ok"), Outcome.failed("no")]),
                    rng.random() / 200,
                ),
            )
            for k in kids
        ]
        threads.append(
            threading.Thread(
                target=settle, args=(root.id, "boss", Outcome.yielded(), rng.random() / 200)
            )
        )
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert store.get_task(root.id).status == Status.TODO, f"round {_round}"
        assert [t.id for t in store.claim("boss", 1, 60)] == [root.id]
        store.settle(root.id, "boss", Outcome.done("merged"))
    waiting = store.list_tasks(status="waiting")
    assert waiting == []


def test_a_failed_report_still_wakes_its_manager(store: SqlStore) -> None:
    root, kids = manager_with_reports(store, 2)
    store.settle(root.id, "boss", Outcome.yielded())
    assert store.get_task(root.id).status == Status.WAITING
    store.settle(kids[0].id, "staff", Outcome.done("ok"))
    assert store.get_task(root.id).status == Status.WAITING
    res = store.settle(kids[1].id, "staff", Outcome.failed("the API was down"))
    assert res.woke == [root.id]
    assert store.get_task(root.id).status == Status.TODO


def test_settle_is_refused_for_a_task_the_worker_no_longer_holds(store: SqlStore) -> None:
    root, kids = manager_with_reports(store, 1)
    store.cancel(kids[0].id, "changed plans")
    res = store.settle(kids[0].id, "staff", Outcome.done("late"))
    assert not res.applied
    assert store.get_task(kids[0].id).status == Status.CANCELLED
    res = store.settle(root.id, "somebody-else", Outcome.done("x"))
    assert not res.applied and store.get_task(root.id).status == Status.IN_PROGRESS


def test_delegation_is_idempotent_within_a_turn_only(store: SqlStore) -> None:
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    store.claim("boss", 1, 60)
    first = store.delegate(root.id, 0, NewTask("Build the API", "", "cto", "ceo"))
    again = store.delegate(root.id, 0, NewTask("  build  the api ", "", "cto", "ceo"))
    other = store.delegate(root.id, 0, NewTask("Build the API", "", "cmo", "ceo"))
    assert first.created and not again.created and again.task.id == first.task.id
    assert other.created and other.task.id != first.task.id
    # A later turn may hand the same work out again on purpose (a retry after a failure).
    retry = store.delegate(root.id, 1, NewTask("Build the API", "", "cto", "ceo"))
    assert retry.created and retry.task.id != first.task.id


def test_a_subtask_keeps_the_id_earlier_versions_gave_it() -> None:
    # A replayed turn finds the subtasks a store already holds by these ids and keys, so how
    # a title is normalised (any Unicode whitespace, case folded) must not drift.
    from firm.tasks import delegation_key, subtask_id

    def made(title: str) -> str:
        return subtask_id(delegation_key("T-0123456789abcdef", 2, "cto", title))

    assert made("Build the API") == made("  build\u00a0 the\tAPI\n") == "T-ee70b45cc8e1ca22"
    assert made("R\u00e9sum\u00e9\u2003STRASSE \u1680 stra\u00dfe") == "T-c012e97fe9f53fd6"


def test_a_session_that_lost_its_task_cannot_delegate(store: SqlStore) -> None:
    from firm.errors import TaskNotHeld

    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    store.claim("first", 1, 60)
    kept = store.delegate(root.id, 0, NewTask("Part A", "", "cto", "ceo"), worker_id="first")
    store.release("first", [root.id], "lease lost")  # handed on: another worker re-runs it
    store.claim("second", 1, 60)
    with pytest.raises(TaskNotHeld, match="handed to another worker"):
        store.delegate(root.id, 0, NewTask("Part B", "", "cmo", "ceo"), worker_id="first")
    # The successor replaying the same turn gets the existing subtask, nothing new.
    again = store.delegate(root.id, 0, NewTask("Part A", "", "cto", "ceo"), worker_id="second")
    assert not again.created and again.task.id == kept.task.id
    store.cancel(root.id, "stop")
    with pytest.raises(TaskNotHeld, match="is cancelled"):
        store.delegate(root.id, 0, NewTask("Part C", "", "cmo", "ceo"), worker_id="second")
    assert [t.title for t in store.children(root.id)] == ["Part A"]


def test_the_delegations_of_one_reply_are_written_in_one_transaction(store: SqlStore) -> None:
    from firm.errors import TaskNotHeld

    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    store.claim("w", 1, 60)
    before = store.events_after(0, limit=1000)[-1].seq
    note = ("thought", root.id, "ceo", {"text": "splitting the work"})
    items = [
        ([note] if i == 0 else [], NewTask(f"Part {i}", "", a, "ceo"))
        for i, a in enumerate(["cto", "cmo", "cfo"])
    ]
    made = store.delegate_many(root.id, 0, items, worker_id="w")
    assert [r.created for r in made] == [True, True, True]
    # One transaction: one commit time for all three, and their entries (the one that rode
    # with them first) take consecutive sequence numbers. Each is created a microsecond after
    # the one before it, so the board and the queue keep the order they were delegated in.
    assert len({r.task.updated_at for r in made}) == 1
    assert [r.task.created_at for r in made] == sorted({r.task.created_at for r in made})
    assert [t.title for t in store.children(root.id)] == ["Part 0", "Part 1", "Part 2"]
    written = store.events_after(before, limit=1000)
    assert len({e.ts for e in written}) == 1
    assert [(e.kind, e.task_id) for e in written] == [("thought", root.id)] + [
        ("delegated", r.task.id) for r in made
    ]
    assert [e.seq for e in written] == list(range(before + 1, before + 5))
    # Replaying the turn names the same subtasks and creates nothing; a new title in the same
    # batch is created alongside.
    again = store.delegate_many(
        root.id,
        0,
        [([], NewTask(" part  0", "", "cto", "ceo")), ([], NewTask("Part 3", "", "cto", "ceo"))],
        worker_id="w",
    )
    assert (again[0].created, again[0].task.id) == (False, made[0].task.id)
    assert again[1].created
    # A session that lost its task writes nothing of its batch, not even the entries riding it.
    store.release("w", [root.id], "lease lost")
    store.claim("other", 1, 60)
    head = store.events_after(0, limit=1000)[-1].seq
    lost = [
        ([note], NewTask("Part 9", "", "cfo", "ceo")),
        ([], NewTask("Part 8", "", "cmo", "ceo")),
    ]
    with pytest.raises(TaskNotHeld, match="handed to another worker"):
        store.delegate_many(root.id, 0, lost, worker_id="w")
    assert store.events_after(head, limit=1000) == []
    assert sorted(t.title for t in store.children(root.id)) == [
        "Part 0",
        "Part 1",
        "Part 2",
        "Part 3",
    ]


def test_a_settle_by_a_session_that_lost_its_task_changes_nothing(store: SqlStore) -> None:
    root, kids = manager_with_reports(store, 2)
    store.settle(root.id, "boss", Outcome.yielded())
    store.settle(kids[0].id, "staff", Outcome.done("first"))
    # The last report's lease is lost and another worker re-runs it.
    store.release("staff", [kids[1].id], "lease lost")
    assert [t.id for t in store.claim("successor", 1, 60)] == [kids[1].id]
    before = store.get_task(kids[1].id)
    head = store.events_after(0, limit=1000)[-1].seq
    call = (
        "tool_call",
        kids[1].id,
        "r1",
        {
            "tool": "files.list",
            "allowed": True,
            "ok": True,
            "args_digest": "0" * 64,
            "result_digest": "0" * 64,
            "summary": "files.list",
            "checked_seq": head,
            "checked_at": 0.0,
        },
    )
    for outcome in (Outcome.done("late"), Outcome.failed("late too")):
        res = store.settle(kids[1].id, "staff", outcome, events=[call])
        assert not res.applied and res.woke == []
    # The row is the successor's, as it was; the manager still waits; only the calls the lost
    # session made are recorded, marked as from a superseded run.
    assert store.get_task(kids[1].id) == before
    assert store.get_task(root.id).status == Status.WAITING
    written = store.events_after(head, limit=1000)
    assert [(e.kind, e.data.get("superseded")) for e in written] == [("tool_call", True)] * 2
    # The successor's own settle goes through and wakes the manager.
    res = store.settle(kids[1].id, "successor", Outcome.done("second"))
    assert res.applied and res.woke == [root.id]
    assert store.get_task(kids[1].id).result == "second"


def test_a_settle_of_an_unknown_task_is_an_error(store: SqlStore) -> None:
    from firm.errors import TaskNotFound

    with pytest.raises(TaskNotFound):
        store.settle("T-nope", "staff", Outcome.done("x"))


def test_a_reply_repeating_a_delegation_creates_one_subtask(store: SqlStore) -> None:
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    store.claim("w", 1, 60)
    grant = {"scopes": ["files.read"], "limits": {"calls": 3}}
    items = [
        ([], NewTask("Build the API", "brief", "cto", "ceo", grant=grant)),
        ([], NewTask("build the  API", "again", "cto", "ceo")),
        ([], NewTask("Launch", "", "cmo", "ceo")),
    ]
    made = store.delegate_many(root.id, 0, items, worker_id="w")
    assert [r.created for r in made] == [True, False, True]
    assert made[1].task.id == made[0].task.id
    # What a delegation returns is the row as stored.
    for r in made:
        assert store.get_task(r.task.id) == r.task
    assert [t.title for t in store.children(root.id)] == ["Build the API", "Launch"]
