"""The store's invariants, each run against SQLite and a real PostgreSQL server.

Settle-and-wake under forced races (both orders) and a randomized many-thread stress, one-pass
cancellation, recovery, idempotent delegation, claim order and the company-wide cap.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable

import pytest
from pg_helpers import (
    claim_task,
    delegate,
    done,
    holding_lock,
    kinds_for,
    new_root,
    started_manager,
    wait_until_queued,
)
from sqlalchemy import event

from firm.endings import expand
from firm.store import SqlStore
from firm.store.base import NewTask
from firm.tasks import Outcome, Priority, Status

pytestmark = pytest.mark.timeout(120)


def _pg(request: pytest.FixtureRequest, store: SqlStore):  # type: ignore[no-untyped-def]
    return request.getfixturevalue("pg_server") if store.dialect == "postgresql" else None


# --- settle and wake (invariants 1, 2, 3) ----------------------------------------------------


def test_reports_finished_before_the_manager_yields_send_it_straight_back(store):
    root, kids = started_manager(store, 2)
    for kid in kids:
        claim_task(store, kid.id)
        assert store.settle(kid.id, "w", done()).applied
    assert store.get_task(root.id).status == Status.IN_PROGRESS  # not waiting: no wake yet
    result = store.settle(root.id, "w", Outcome.yielded())
    assert result.task.status == Status.TODO and result.woke == [root.id]
    assert kinds_for(store, root.id, "woken") == [{"immediately": True}]


def test_a_failed_report_still_wakes_its_manager(store):
    root, kids = started_manager(store, 2)
    store.settle(root.id, "w", Outcome.yielded())
    assert store.get_task(root.id).status == Status.WAITING
    claim_task(store, kids[0].id)
    store.settle(kids[0].id, "w", done())
    assert store.get_task(root.id).status == Status.WAITING
    claim_task(store, kids[1].id)
    result = store.settle(kids[1].id, "w", Outcome.failed("the API was down"))
    assert result.woke == [root.id]
    assert store.get_task(root.id).status == Status.TODO
    assert store.get_task(kids[1].id).error == "the API was down"


def test_the_last_two_reports_settling_at_once_wake_the_manager_once(store, request):
    pg = _pg(request, store)
    for _ in range(3):
        root, kids = started_manager(store, 2)
        store.settle(root.id, "w", Outcome.yielded())
        claimed = store.claim("w", 2, 30)
        assert {t.id for t in claimed} == {k.id for k in kids}
        results: list = []
        threads = [
            threading.Thread(
                target=lambda k=k, out=results: out.append(store.settle(k.id, "w", done()))
            )
            for k in kids
        ]
        with holding_lock(store, root.id):
            for t in threads:
                t.start()
            wait_until_queued(pg, store, 2, threads)
        for t in threads:
            t.join()
        assert all(r.applied for r in results)
        assert sum(len(r.woke) for r in results) == 1
        assert store.get_task(root.id).status == Status.TODO
        assert len(kinds_for(store, root.id, "woken")) == 1
        claim_task(store, root.id)
        store.settle(root.id, "w", done())


@pytest.mark.parametrize("first", ["report", "manager"])
def test_manager_ending_its_turn_races_its_last_report(store, request, first):
    """Both orders forced: the report's settle queued first, or the manager's yield queued first.
    Either way the manager ends up todo exactly once, never waiting with nothing open."""
    pg = _pg(request, store)
    root, kids = started_manager(store, 1)
    kid = claim_task(store, kids[0].id)
    report = threading.Thread(target=lambda: store.settle(kid.id, "w", done()))
    manager = threading.Thread(target=lambda: store.settle(root.id, "w", Outcome.yielded()))
    order = [report, manager] if first == "report" else [manager, report]
    with holding_lock(store, root.id):
        order[0].start()
        wait_until_queued(pg, store, 1, order[:1])
        order[1].start()
        wait_until_queued(pg, store, 2, order)
    for t in order:
        t.join()
    assert store.get_task(root.id).status == Status.TODO
    assert len(kinds_for(store, root.id, "woken")) == 1
    waiting = kinds_for(store, root.id, "waiting")
    if pg is not None:  # PostgreSQL queues lock waiters in order: the order was really forced
        assert waiting == [{"open_subtasks": 0 if first == "report" else 1}]


def test_randomized_many_thread_stress_never_leaves_a_parent_hanging(store, open_any):
    """Eight workers (each its own store, as on separate machines) run a random deep company
    with failures, replayed delegations and cancels thrown in. Everything ends; no manager is
    left waiting; every task is settled exactly once."""
    root = new_root(store)

    def children_of(title: str, depth: int) -> int:
        """How many reports a task hands work to on its first turn: two to four, three deep."""
        return 0 if depth >= 3 else random.Random(f"{title}/{depth}").randint(2, 4)

    depth_of = {root.id: 0}
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(store: SqlStore, name: str) -> None:
        local = random.Random(name)
        try:
            while not stop.is_set():
                tasks = store.claim(name, 1, 60)
                if not tasks:
                    if store.get_task(root.id).terminal:
                        return
                    stop.wait(0.01)
                    continue
                task = tasks[0]
                # The store says how deep a task is (its lineage runs up to the root): another
                # worker may claim a subtask before its delegator has noted it below.
                depth = len(store.lineage(task.id)[1]) - 1
                with lock:
                    depth_of[task.id] = depth
                n = children_of(task.title, depth)
                if task.turn == 0 and n:
                    for replay in range(2):  # a replayed delegation must not add a subtask
                        for i in range(n):
                            try:
                                sub = delegate(store, task, f"a{depth + 1}", f"part {i}")
                            except Exception:
                                break  # cancelled under us: it can no longer delegate
                            with lock:
                                depth_of[sub.id] = depth + 1
                        if replay == 0 and local.random() < 0.3:
                            stop.wait(local.random() / 100)
                    store.settle(task.id, name, Outcome.yielded())
                elif local.random() < 0.15:
                    store.settle(task.id, name, Outcome.failed("unlucky"))
                else:
                    store.settle(task.id, name, done())
        except BaseException as exc:
            errors.append(exc)

    def canceller(store: SqlStore) -> None:
        local = random.Random(99)
        while not stop.is_set() and not store.get_task(root.id).terminal:
            with lock:
                deep = {tid for tid, d in depth_of.items() if d >= 2}
            candidates = [
                t
                for t in store.list_tasks(root_id=root.id, limit=10_000)
                if not t.terminal and t.id in deep
            ]
            if candidates and local.random() < 0.1:
                store.cancel(local.choice(candidates).id, "changed our mind")
            stop.wait(0.05)

    workers = [threading.Thread(target=work, args=(open_any(), f"w{i}")) for i in range(8)]
    chaos = threading.Thread(target=canceller, args=(open_any(),))
    for t in [*workers, chaos]:
        t.start()
    for t in workers:
        t.join(90)
    stop.set()
    chaos.join(10)
    assert not errors, errors
    tasks = store.subtree(root.id)
    assert len(tasks) > 20
    assert all(t.terminal for t in tasks), [(t.id, t.status) for t in tasks if not t.terminal]
    # A subtree's cancel is one entry; each task it ended is stamped with that entry's seq.
    events = list(expand(store.events_after(0, 1_000_000), lambda e: store.ended_by(e.seq)))
    ends = Counter(e.task_id for e in events if e.kind in ("completed", "failed", "cancelled"))
    assert all(ends[t.id] == 1 for t in tasks), "a task was settled twice or never"
    keys = Counter((t.parent_id, t.turn, t.assignee, t.title) for t in tasks if t.parent_id)
    assert max(keys.values()) == 1, "a replayed delegation created a second subtask"


# --- cancellation (invariant 4) --------------------------------------------------------------


def _tree(store: SqlStore, fan: int) -> tuple[str, str, list[str]]:
    """root → mid (waiting) → fan managers (waiting) → fan leaves each (todo); one leaf done."""
    root, (mid,) = started_manager(store, 1)
    store.settle(root.id, "w", Outcome.yielded())
    mid = claim_task(store, mid.id)
    managers = [delegate(store, mid, "m", f"m{i}") for i in range(fan)]
    store.settle(mid.id, "w", Outcome.yielded())
    leaves = []
    for m in managers:
        m = claim_task(store, m.id)
        leaves += [delegate(store, m, "l", f"l{i}") for i in range(fan)]
        store.settle(m.id, "w", Outcome.yielded())
    finished = store.claim("w", 1, 30)[0]
    store.settle(finished.id, "w", done())
    return root.id, mid.id, [finished.id]


def _statements(store: SqlStore, fn: Callable[[], object]) -> int:
    count = 0

    def tick(*_: object) -> None:
        nonlocal count
        count += 1

    event.listen(store.engine, "before_cursor_execute", tick)
    try:
        fn()
    finally:
        event.remove(store.engine, "before_cursor_execute", tick)
    return count


def test_cancel_takes_the_whole_open_subtree_in_one_pass(store):
    small_root, small_mid, _ = _tree(store, 2)
    small = _statements(store, lambda: store.cancel(small_mid, "stop"))
    store.cancel(small_root, "clear the board")
    big_root, big_mid, finished = _tree(store, 5)
    cancelled: list = []
    big = _statements(store, lambda: cancelled.extend(store.cancel(big_mid, "stop")))
    assert big == small, "cancelling a bigger subtree took more statements"
    sub = store.subtree(big_mid)
    assert len(sub) == 1 + 5 + 25 and len(cancelled) == len(sub) - 1  # all open, not the done one
    assert {t.id for t in sub if t.status != Status.CANCELLED} == set(finished)
    assert store.get_task(finished[0]).status == Status.DONE
    assert store.get_task(big_root).status == Status.TODO  # its only report ended: woken


# --- recovery (invariant 5) and leases ---------------------------------------------------------


def test_recovery_takes_back_an_expired_lease_and_names_the_worker(store):
    root, _kids = started_manager(store, 2, worker="alive")
    store.settle(root.id, "alive", Outcome.yielded())
    lost = store.claim("far-away", 1, -1.0)[0]  # its lease is already over
    kept = store.claim("alive", 1, 60.0)[0]
    out = store.recover(lambda w: None)  # another machine: only the lease tells
    assert out["requeued"] == [lost.id]
    assert store.get_task(kept.id).status == Status.IN_PROGRESS
    (requeued,) = kinds_for(store, lost.id, "requeued")
    assert requeued["cause"] == "lease_expired" and requeued["worker"] == "far-away"
    assert "far-away" in requeued["reason"] and "re-run" in requeued["reason"]
    # The cut-off worker's late settle is refused; the re-run is recorded as attempt 2.
    assert not store.settle(lost.id, "far-away", done("late")).applied
    again = claim_task(store, lost.id, "other")
    assert again.attempts == 2
    starts = kinds_for(store, lost.id, "started")
    assert [s["attempt"] for s in starts] == [1, 2] and starts[1]["worker"] == "other"
    assert store.renew_leases("far-away", 30) == []
    assert store.renew_leases("other", 30, [lost.id]) == [lost.id]


def test_recovery_of_a_dead_process_does_not_wait_for_its_lease(store):
    root = new_root(store)
    claim_task(store, root.id, "host:123:abc", lease=3600)
    assert store.recover(lambda w: True)["requeued"] == []
    assert store.recover(lambda w: False)["requeued"] == [root.id]
    (requeued,) = kinds_for(store, root.id, "requeued")
    assert requeued["cause"] == "worker_dead" and "host:123:abc" in requeued["reason"]


def test_recovery_wakes_a_manager_whose_reports_all_ended(store):
    root, kids = started_manager(store, 1)
    store.settle(root.id, "w", Outcome.yielded())
    # A report ended without waking its manager (as a crash between the two would leave it,
    # were they not one transaction): recovery must still find and wake it.
    with store.engine.begin() as conn:
        from firm.store.schema import tasks

        conn.execute(tasks.update().where(tasks.c.id == kids[0].id).values(status="done"))
    assert store.get_task(root.id).status == Status.WAITING
    assert store.recover(lambda w: None)["woken"] == [root.id]
    assert store.get_task(root.id).status == Status.TODO


# --- delegation (idempotent) -----------------------------------------------------------------


def test_delegation_is_idempotent_per_parent_turn_assignee_and_title(store):
    root = claim_task(store, new_root(store).id)
    first = store.delegate(root.id, 0, NewTask("Write the  Spec", "d", "cto", "ceo"))
    again = store.delegate(root.id, 0, NewTask("write the spec", "other", "cto", "ceo"))
    assert first.created and not again.created and again.task.id == first.task.id
    assert store.delegate(root.id, 0, NewTask("Write the spec", "d", "cmo", "ceo")).created
    assert store.delegate(root.id, 1, NewTask("Write the spec", "d", "cto", "ceo")).created


def test_identical_delegations_racing_from_many_workers_create_one_subtask(store, open_any):
    root = claim_task(store, new_root(store).id)
    stores = [open_any() for _ in range(4)]
    results: list = []
    barrier = threading.Barrier(8)

    def go(store: SqlStore) -> None:
        barrier.wait()
        results.append(store.delegate(root.id, 0, NewTask("Ship it", "d", "cto", "ceo")))

    threads = [threading.Thread(target=go, args=(stores[i % 4],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.created for r in results) == 1
    assert len({r.task.id for r in results}) == 1
    assert len(store.children(root.id)) == 1


# --- claiming --------------------------------------------------------------------------------


def test_claim_takes_the_highest_priority_first_then_the_oldest(store):
    made = [
        new_root(store, "normal 1"),
        new_root(store, "low", Priority.LOW),
        new_root(store, "urgent 1", Priority.URGENT),
        new_root(store, "normal 2"),
        new_root(store, "urgent 2", Priority.URGENT),
        new_root(store, "high", Priority.HIGH),
    ]
    order = [store.claim("w", 1, 30)[0].title for _ in made]
    assert order == ["urgent 1", "urgent 2", "high", "normal 1", "normal 2", "low"]
    assert store.claim("w", 1, 30) == []


def test_concurrent_workers_never_claim_the_same_task_twice(store, open_any):
    for i in range(40):
        new_root(store, f"goal {i}")
    stores = [open_any() for _ in range(6)]
    got: list = []
    barrier = threading.Barrier(6)

    def go(store: SqlStore, name: str) -> None:
        barrier.wait()
        while batch := store.claim(name, 3, 30):
            got.extend(batch)

    threads = [threading.Thread(target=go, args=(s, f"w{i}")) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 40 and len({t.id for t in got}) == 40


def test_the_company_wide_cap_holds_across_workers(store, open_any):
    for i in range(30):
        new_root(store, f"goal {i}")
    stores = [open_any() for _ in range(8)]
    for _round in range(3):
        barrier = threading.Barrier(8)

        def go(store: SqlStore, name: str, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            store.claim(name, 3, 30, global_limit=5)

        threads = [threading.Thread(target=go, args=(s, f"w{i}")) for i, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        running = store.list_tasks(status="in_progress")
        assert len(running) == 5
        for t in running[:2]:  # two sessions end; the next round may fill exactly their slots
            store.settle(t.id, t.worker_id, done())


def test_the_cap_stored_in_the_store_binds_every_engine_that_has_none_of_its_own(store, open_any):
    for i in range(20):
        new_root(store, f"goal {i}")
    store.set_max_running(4)  # what `firm db limit 4` does
    stores = [open_any() for _ in range(6)]
    barrier = threading.Barrier(6)

    def go(store: SqlStore, name: str) -> None:
        barrier.wait()
        store.claim(name, 3, 30)  # no cap passed: the store's own applies

    threads = [threading.Thread(target=go, args=(s, f"w{i}")) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.list_tasks(status="in_progress")) == 4
    assert store.claim("explicit", 3, 30, global_limit=6) != []  # a worker's own wins
    store.set_max_running(None)
    assert len(store.claim("free", 20, 30)) == 20 - 4 - 2
    assert store.max_running() is None


# --- watching --------------------------------------------------------------------------------


def test_a_waiting_watcher_wakes_for_another_processes_commit(store, open_any):
    watcher = open_any()
    if watcher.dialect == "postgresql":
        watcher.listen_poll_interval = 3600  # only a NOTIFY can wake it now
        assert watcher.wait_for_change(watcher.last_seq(), 0.01) is False
        watcher._pg_listener.connected.wait(10)
    seen = watcher.last_seq()
    woke: list[bool] = []
    t = threading.Thread(target=lambda: woke.append(watcher.wait_for_change(seen, 60)))
    t.start()
    new_root(store, "news")
    t.join(60)
    assert woke == [True]
    assert [e.kind for e in watcher.events_after(seen)] == ["created"]
