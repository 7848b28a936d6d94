"""A reply's delegations claim their subtasks for the delegating worker in their own commit
(Store.delegate_and_claim), and the engine starts them at once (engine/delegated.py)."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from firm.engine import Engine
from firm.engine.workers import worker_alive
from firm.errors import TaskNotHeld
from firm.events import transition_problems
from firm.store import NewTask, RunSpec, SqlStore, open_store
from firm.store.base import PendingEvents
from firm.store.notify import payload
from firm.tasks import Outcome, Priority, Status, Task
from tests.support import firm_cli
from tests.support.brains import TEAM, PeakCount, slow_reports
from tests.support.watch import wait_in_store

from .test_crash_safety import start

RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlStore]:
    """The engine hands delegations their claims on SQLite only (engine/delegated.py)."""
    store = open_store(tmp_path / "firm.db")
    yield store
    store.close()


def parts(n: int, start: int = 0) -> list[tuple[PendingEvents, NewTask]]:
    return [([], NewTask(f"part {i}", "", f"r{i}", "ceo")) for i in range(start, start + n)]


def held_root(store: SqlStore) -> Task:
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    assert [t.id for t in store.claim("boss", 1, 60)] == [root.id]
    return root


def test_the_delegation_claims_its_subtasks_in_its_own_commit(store: SqlStore) -> None:
    root = held_root(store)
    before = store.last_seq()
    results, claimed = store.delegate_and_claim(root.id, 0, parts(2), "boss", 5, 30)
    made = [r.task.id for r in results]
    assert [t.id for t in claimed] == made  # in delegation order
    for tid in made:
        task = store.get_task(tid)
        assert task.status == Status.IN_PROGRESS and task.worker_id == "boss"
        assert task.attempts == 1 and task.lease_expires_at is not None
    entries = store.events_after(before)
    # The entries a claim writes, after the delegations, in the same commit.
    assert [(e.kind, e.task_id) for e in entries] == [
        ("delegated", made[0]),
        ("delegated", made[1]),
        ("started", made[0]),
        ("started", made[1]),
    ]
    assert len({e.ts for e in entries}) == 1
    assert [e.data for e in entries[2:]] == [{"attempt": 1, "turn": 0, "worker": "boss"}] * 2
    # No other worker is sent after them: nothing was left in the queue.
    assert "todo" not in json.loads(payload(entries[-1].seq, entries))
    assert store.claim("other", 5, 30) == []


def test_it_claims_no_more_than_its_slots_and_leaves_the_rest_to_the_queue(
    store: SqlStore,
) -> None:
    root = held_root(store)
    results, claimed = store.delegate_and_claim(root.id, 0, parts(5), "boss", 2, 30)
    made = [r.task.id for r in results]
    assert [t.id for t in claimed] == made[:2]
    # The rest are ordinary queued work, claimed by whoever claims next, in their order.
    assert [t.id for t in store.claim("other", 10, 30)] == made[2:]


def test_it_claims_within_the_stores_cap(store: SqlStore) -> None:
    root = held_root(store)
    store.set_max_running(3)  # the manager and two more, across every worker
    results, claimed = store.delegate_and_claim(root.id, 0, parts(4), "boss", 4, 30)
    assert [t.id for t in claimed] == [r.task.id for r in results][:2]
    assert len(store.list_tasks(status="in_progress")) == 3
    # The engine's own view of the cap, when it is given one, is what a claim reads.
    _, more = store.delegate_and_claim(root.id, 0, parts(1, 4), "boss", 1, 30, global_limit=10)
    assert len(more) == 1


def test_a_claim_takes_no_more_than_the_stores_cap_leaves(store: SqlStore) -> None:
    # On SQLite the cap is read inside the claim's own statement (queries.CLAIM_TOP_CAPPED).
    goals = [store.create_run(RUN, NewTask(f"Goal {i}", "", "ceo", "user")) for i in range(5)]
    store.set_max_running(2)
    assert [t.id for t in store.claim("a", 5, 30)] == [g.id for g in goals[:2]]
    assert store.claim("b", 5, 30) == []  # the cap is reached, whoever claims
    store.set_max_running(4)
    assert [t.id for t in store.claim("b", 5, 30)] == [g.id for g in goals[2:4]]
    store.set_max_running(None)
    assert [t.id for t in store.claim("b", 5, 30)] == [goals[4].id]


def test_waiting_work_of_a_higher_priority_takes_the_slot_instead(store: SqlStore) -> None:
    root = held_root(store)
    urgent = store.create_run(RUN, NewTask("Urgent", "", "ceo", "user", priority=Priority.URGENT))
    results, claimed = store.delegate_and_claim(root.id, 0, parts(2), "boss", 1, 30)
    # One slot: the urgent goal takes it, in the delegation's commit; both subtasks wait.
    assert [t.id for t in claimed] == [urgent.id]
    assert {store.get_task(r.task.id).status for r in results} == {Status.TODO}
    assert [t.id for t in store.claim("next", 5, 30)] == [r.task.id for r in results]


def test_a_replayed_delegation_claims_nothing(store: SqlStore) -> None:
    root = held_root(store)
    store.delegate_many(root.id, 0, parts(2), worker_id="boss")  # the first run of the turn
    results, claimed = store.delegate_and_claim(root.id, 0, parts(2), "boss", 5, 30)
    assert [r.created for r in results] == [False, False]
    assert claimed == []  # it created nothing, so it starts nothing (the queue's, for others)


def test_a_delegation_refused_for_a_lost_task_claims_nothing(store: SqlStore) -> None:
    root = held_root(store)
    waiting = store.create_run(RUN, NewTask("Other goal", "", "ceo", "user"))
    with pytest.raises(TaskNotHeld):
        store.delegate_and_claim(root.id, 0, parts(2), "someone-else", 5, 30)
    assert store.children(root.id) == []
    assert store.get_task(waiting.id).status == Status.TODO


def test_a_task_claimed_by_a_worker_that_died_before_starting_it_is_recovered(
    store: SqlStore,
) -> None:
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    gone = "testhost:2147483646:dead"  # a worker that is known to be gone
    assert store.claim(gone, 1, 3600) != []
    results, claimed = store.delegate_and_claim(root.id, 0, parts(2), gone, 5, 3600)
    assert len(claimed) == 2
    recovered = store.recover(lambda w: w != gone)
    assert set(recovered["requeued"]) == {root.id, *(r.task.id for r in results)}
    requeued = [e for e in store.events_after(0) if e.kind == "requeued"]
    assert {e.data["cause"] for e in requeued} == {"worker_dead"}
    assert {t.id for t in store.claim("next", 5, 30)} == {root.id, *(r.task.id for r in results)}


# --- the engine --------------------------------------------------------------------------------


def test_an_engines_managers_reports_start_without_a_scheduler_claim(
    sqlite_store: SqlStore, tmp_path: Path
) -> None:
    store = sqlite_store
    # A heartbeat far longer than the run: only nudges, hand-overs and delegations move it.
    engine = Engine(store, max_concurrent=8, heartbeat=30)
    try:
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    finally:
        engine.stop()
    assert done.status == Status.DONE
    assert engine.claims == 1 and engine.empty_claims == 0  # the goal's, and no other
    assert engine.delegations.started == 4
    log = store.events_after(0, limit=1000)
    delegated = [e for e in log if e.kind == "delegated"]
    assert len(delegated) == 4
    for d in delegated:
        started = next(e for e in log if e.kind == "started" and e.task_id == d.task_id)
        assert started.ts == d.ts and started.seq > d.seq  # in the delegation's commit
        assert started.data["worker"] == engine.worker_id
    assert engine.running == []


def test_an_engine_starts_no_more_reports_than_it_has_slots(
    sqlite_store: SqlStore, tmp_path: Path
) -> None:
    store = sqlite_store
    counter = PeakCount()
    with Engine(store, max_concurrent=3, heartbeat=30, brain=counter.brain) as engine:
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    assert done.status == Status.DONE
    assert counter.peak <= 3 and engine.peak_running <= 3
    log = store.events_after(0, limit=1000)
    (commit,) = {e.ts for e in log if e.kind == "delegated"}
    # The CEO's reply ended its turn in the delegation's commit, so its slot was free there
    # too: three reports started with the delegation (one on the CEO's own thread), and the
    # fourth was claimed from the queue later (by a slot the first three freed).
    in_commit = [e.kind for e in log if e.ts == commit]
    assert in_commit.count("started") == 3 and in_commit.count("waiting") == 1
    assert {t.status for t in store.subtree(root.id)} == {Status.DONE}


def test_an_engine_stopping_hands_back_reports_its_delegation_claimed(
    sqlite_store: SqlStore, tmp_path: Path
) -> None:
    store = sqlite_store
    engine = Engine(store, max_concurrent=6, heartbeat=30, brain=slow_reports())
    try:
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        engine.start()
        deadline = time.monotonic() + 60
        while sum(t.assignee.startswith("e") for t in engine_running(store, root)) < 4:
            assert time.monotonic() < deadline, "the reports never all started"
            time.sleep(0.02)
    finally:
        engine.stop()
    reports = [t for t in store.subtree(root.id) if t.assignee.startswith("e")]
    assert {t.status for t in reports} == {Status.TODO} and all(
        t.worker_id is None for t in reports
    )
    assert store.recover(worker_alive)["requeued"] == []  # nothing left for recovery to find


def engine_running(store: SqlStore, root: Task) -> list[Task]:
    return [t for t in store.subtree(root.id) if t.status == Status.IN_PROGRESS]


def test_a_settle_after_the_delegation_still_hands_on(sqlite_store: SqlStore) -> None:
    # The delegating manager's own slot is freed by its settle, which hands it to the queue.
    store = sqlite_store
    root = held_root(store)
    results, claimed = store.delegate_and_claim(root.id, 0, parts(3), "boss", 1, 30)
    assert len(claimed) == 1
    res = store.settle(root.id, "boss", Outcome.yielded(), hand_over=30)
    assert [t.id for t in res.claimed] == [results[1].task.id]


def test_a_kill_after_the_delegations_commit_loses_nothing(tmp_path: Path) -> None:
    # The reports are claimed for the process in the delegation's commit; killed while they
    # run, they are recovered like any claimed task (their worker is gone) and run again.
    (tmp_path / "company.yaml").write_text(
        "company: K\nmax_concurrent: 5\nagents:\n  - {id: ceo, name: C, title: CEO}\n"
        + "".join(
            f"  - {{id: e{i}, name: E{i}, title: Backend Engineer, reports_to: ceo}}\n"
            for i in range(3)
        )
    )
    common = ["--db", "state/firm.db", "--workspace", "ws", "--sim-latency", "0.5"]
    proc = start(["run", "company.yaml", "Ship it", *common], tmp_path)
    try:
        claimed_with_delegation(tmp_path / "state" / "firm.db", 3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    final = firm_cli("resume", "--db", "state/firm.db", "--json", cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    store = open_store(tmp_path / "state" / "firm.db")
    try:
        tasks = store.list_tasks()
        assert len(tasks) == 4 and {t.status for t in tasks} == {Status.DONE}
        log = store.events_after(0, 100_000)
        assert transition_problems([(e.seq, e.kind, e.task_id) for e in log]) == []
        completed = Counter(e.task_id for e in log if e.kind == "completed")
        assert set(completed) == {t.id for t in tasks} and max(completed.values()) == 1
        reports = {t.id for t in tasks if t.assignee.startswith("e")}
        requeued = {e.task_id: e.data["cause"] for e in log if e.kind == "requeued"}
        assert {requeued.get(r) for r in reports} == {"worker_dead"}
    finally:
        store.close()


def claimed_with_delegation(db: Path, n: int) -> None:
    """Wait until n tasks are running that were claimed in their delegation's commit."""

    def started_with_it(store: SqlStore) -> bool:
        log = store.events_after(0, 10_000)
        made = {e.task_id: e.ts for e in log if e.kind == "delegated"}
        with_it = {e.task_id for e in log if e.kind == "started" and made.get(e.task_id) == e.ts}
        running = {t.id for t in store.list_tasks(status="in_progress")}
        return len(with_it & running) >= n

    wait_in_store(db, started_with_it, "the reports never started with their delegation")
