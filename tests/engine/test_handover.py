"""Hand-over: a settle claims, for the worker that settled, what its freed slot runs next."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import event

from firm.engine import Engine
from firm.org import parse_org
from firm.store import NewTask, RunSpec, SqlStore
from firm.store.notify import payload
from firm.tasks import Outcome, Priority, Status

from .test_settle_and_wake import manager_with_reports

RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)


def test_the_last_reports_settle_claims_its_woken_manager_in_the_same_commit(
    store: SqlStore,
) -> None:
    root, kids = manager_with_reports(store, 2)
    store.settle(root.id, "boss", Outcome.yielded())
    first = store.settle(kids[0].id, "staff", Outcome.done("a"), hand_over=30)
    assert first.woke == [] and first.claimed == []  # the other report is still open
    last = store.settle(kids[1].id, "staff", Outcome.done("b"), hand_over=30)
    assert last.woke == [root.id]
    assert [t.id for t in last.claimed] == [root.id]
    held = store.get_task(root.id)
    assert held.status == Status.IN_PROGRESS and held.worker_id == "staff" and held.turn == 1
    entries = [e for e in store.events_after(0, limit=1000) if e.ts == last.claimed[0].updated_at]
    assert [(e.kind, e.task_id) for e in entries] == [
        ("completed", kids[1].id),
        ("woken", root.id),
        ("started", root.id),
    ]
    assert entries[-1].data["worker"] == "staff"
    assert store.claim("other", 5, 30) == []  # nothing was left in the queue for anyone
    # Nor does the commit's NOTIFY send other workers after it (they would find nothing).
    assert "todo" not in json.loads(payload(entries[-1].seq, entries))


def test_a_manager_whose_reports_all_ended_first_is_handed_back_to_itself(
    store: SqlStore,
) -> None:
    root, kids = manager_with_reports(store, 1)
    store.settle(kids[0].id, "staff", Outcome.done("a"), hand_over=30)
    res = store.settle(root.id, "boss", Outcome.yielded(), hand_over=30)
    assert res.woke == [root.id] and [t.id for t in res.claimed] == [root.id]
    assert store.get_task(root.id).worker_id == "boss"


def test_the_hand_over_never_jumps_higher_priority_work(store: SqlStore) -> None:
    root, kids = manager_with_reports(store, 1)
    store.settle(root.id, "boss", Outcome.yielded())
    urgent = store.create_run(RUN, NewTask("Urgent", "", "ceo", "user", priority=Priority.URGENT))
    before = store.last_seq()
    res = store.settle(kids[0].id, "staff", Outcome.done("a"), hand_over=30)
    assert res.woke == [root.id]
    assert store.get_task(root.id).status == Status.TODO
    entries = store.events_after(before)
    assert json.loads(payload(entries[-1].seq, entries))["todo"] == 1  # left for the queue
    if store.dialect == "sqlite":
        # The freed slot takes the urgent work; the woken manager waits behind it.
        assert [t.id for t in res.claimed] == [urgent.id]
        assert [t.id for t in store.claim("next", 1, 30)] == [root.id]
    else:
        # Worker processes share PostgreSQL's queue: it is left to them, in its order.
        assert res.claimed == []
        assert [t.id for t in store.claim("next", 2, 30)] == [urgent.id, root.id]


def test_a_settle_that_wakes_nothing_hands_its_slot_to_the_queues_head(store: SqlStore) -> None:
    root, kids = manager_with_reports(store, 1)
    waiting = store.delegate(root.id, 0, NewTask("part 9", "", "r9", "ceo")).task
    res = store.settle(kids[0].id, "staff", Outcome.done("a"), hand_over=30)
    if store.dialect == "postgresql":
        # Worker processes share the queue there, and their wake-ups spread it: a settling
        # worker taking its head at every settle kept the others idle.
        assert res.woke == [] and res.claimed == []
        assert store.get_task(waiting.id).status == Status.TODO
        return
    assert res.woke == [] and [t.id for t in res.claimed] == [waiting.id]
    held = store.get_task(waiting.id)
    assert held.status == Status.IN_PROGRESS and held.worker_id == "staff"
    # Within the store's cap: with as many running as it allows, the slot is not handed on.
    other = store.delegate(root.id, 0, NewTask("part 10", "", "r10", "ceo")).task
    store.set_max_running(2)  # the manager and the task just handed over
    res = store.settle(waiting.id, "staff", Outcome.done("b"), hand_over=30)
    assert [t.id for t in res.claimed] == [other.id]  # one ended, one started: still 2
    store.set_max_running(1)  # lowered while they run: the next settle frees its slot
    res = store.settle(other.id, "staff", Outcome.done("c"), hand_over=30)
    assert res.claimed == []


def test_a_settle_that_finds_the_queue_empty_claims_nothing_and_runs_no_claim(
    store: SqlStore,
) -> None:
    root, kids = manager_with_reports(store, 2)
    updates: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        # SQLite's are UPDATE OR FAIL (store/queries.py)
        if statement.lstrip().upper().startswith(("UPDATE TASKS", "UPDATE OR FAIL TASKS")):
            updates.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        res = store.settle(kids[0].id, "staff", Outcome.done("a"), hand_over=30)
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    # The settle's own UPDATE read the queue (empty: both reports run), so no claim followed.
    assert res.applied and res.woke == [] and res.claimed == []
    assert len(updates) == 1, updates
    # Queued work is still handed over (above), and left for anyone when it is not.
    later = store.delegate(root.id, 0, NewTask("part 9", "", "r9", "ceo")).task
    res = store.settle(kids[1].id, "staff", Outcome.done("b"), hand_over=30)
    if store.dialect == "sqlite":
        assert [t.id for t in res.claimed] == [later.id]
    else:
        assert res.claimed == [] and [t.id for t in store.claim("w", 1, 30)] == [later.id]


def test_an_engine_runs_woken_managers_without_waiting_for_its_scheduler(
    store: SqlStore, tmp_path: Path
) -> None:
    org = parse_org(
        "company: H\nagents:\n  - {id: ceo, name: C, title: CEO}\n"
        "  - {id: m, name: M, title: Engineering Manager, reports_to: ceo}\n"
        "  - {id: e1, name: E1, title: Backend Engineer, reports_to: m}\n"
        "  - {id: e2, name: E2, title: Backend Engineer, reports_to: m}\n",
        "<test>",
    )
    # A heartbeat far longer than the run: only nudges and hand-overs can move it.
    with Engine(store, max_concurrent=2, heartbeat=30) as engine:
        root = engine.submit(org, "Ship it", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=30)
    assert done.status == Status.DONE
    log = store.events_after(0, limit=1000)
    # Each manager's merge turn started in the commit that woke it.
    for woken in [e for e in log if e.kind == "woken"]:
        same_commit = [e for e in log if e.ts == woken.ts]
        assert ("started", woken.task_id) in [(e.kind, e.task_id) for e in same_commit]
    assert engine.running == []
