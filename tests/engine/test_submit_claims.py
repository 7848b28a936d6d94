"""A goal submitted to a running engine with a slot free is claimed for it in the run's own
commit (Store.create_run_and_claim), and its session starts at once (engine/submitted.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.brains.simulation import SimulationBrain
from firm.engine import Engine
from firm.engine.workers import worker_alive
from firm.events import transition_problems
from firm.org import parse_org
from firm.session import Session
from firm.store import NewTask, RunSpec, SqlStore, open_store
from firm.store.base import Event
from firm.store.notify import payload
from firm.tasks import Priority, Status
from firm.testing import FunctionBrain
from tests.support import firm_cli
from tests.support.brains import TEAM
from tests.support.watch import wait_in_store

RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)


def goal(title: str, priority: Priority = Priority.NORMAL) -> NewTask:
    return NewTask(title, "", "ceo", "user", priority=priority)


# --- the store -----------------------------------------------------------------------------


def test_the_run_claims_its_root_in_its_own_commit(store: SqlStore) -> None:
    before = store.last_seq()
    root, claimed = store.create_run_and_claim(RUN, goal("Goal"), "boss", 30)
    assert [t.id for t in claimed] == [root.id]
    held = store.get_task(root.id)
    assert held.status == Status.IN_PROGRESS and held.worker_id == "boss"
    assert held.attempts == 1 and held.lease_expires_at is not None
    entries = store.events_after(before)
    assert [(e.kind, e.task_id) for e in entries] == [("created", root.id), ("started", root.id)]
    assert len({e.ts for e in entries}) == 1  # one commit
    assert entries[1].data == {"attempt": 1, "turn": 0, "worker": "boss"}
    # No other worker is sent after it: nothing was left in the queue.
    assert "todo" not in json.loads(payload(entries[-1].seq, entries))
    assert store.claim("other", 5, 30) == []


def test_waiting_work_of_a_higher_priority_takes_the_slot_instead(store: SqlStore) -> None:
    urgent = store.create_run(RUN, goal("Urgent", Priority.URGENT))
    root, claimed = store.create_run_and_claim(RUN, goal("Goal"), "boss", 30)
    assert [t.id for t in claimed] == [urgent.id]
    assert store.get_task(root.id).status == Status.TODO
    assert [t.id for t in store.claim("next", 5, 30)] == [root.id]


def test_it_claims_nothing_past_the_stores_cap(store: SqlStore) -> None:
    store.set_max_running(1)
    first, claimed = store.create_run_and_claim(RUN, goal("First"), "boss", 30)
    assert [t.id for t in claimed] == [first.id]
    second, claimed = store.create_run_and_claim(RUN, goal("Second"), "boss", 30)
    assert claimed == [] and store.get_task(second.id).status == Status.TODO
    # The engine's own view of the cap, when it is given one, is what the claim reads.
    _, claimed = store.create_run_and_claim(RUN, goal("Third"), "boss", 30, global_limit=5)
    assert [t.id for t in claimed] == [second.id]  # the queue's order: the older goal first


def test_a_root_claimed_by_a_worker_that_died_before_starting_it_is_recovered(
    store: SqlStore,
) -> None:
    gone = "testhost:2147483646:dead"  # a worker that is known to be gone
    root, claimed = store.create_run_and_claim(RUN, goal("Goal"), gone, 3600)
    assert claimed
    assert store.recover(lambda w: w != gone)["requeued"] == [root.id]
    assert [t.id for t in store.claim("next", 5, 30)] == [root.id]


# --- the engine --------------------------------------------------------------------------------


def started_engine(store: SqlStore, **options: object) -> Engine:
    """An engine whose scheduler then only moves when nudged: a heartbeat far longer than
    any test."""
    return first_round_made(Engine(store, heartbeat=30, **options))  # type: ignore[arg-type]


def first_round_made(engine: Engine) -> Engine:
    """Start the engine (start makes its first claim round) and, on PostgreSQL, wait until its
    listener's first signal has been answered: a round holds every free slot while it claims,
    and a submit meanwhile finds none."""
    engine.start()
    deadline = time.monotonic() + 30
    while engine.store.dialect != "sqlite" and not (
        engine.signal_wakeups and not engine._nudge.is_set() and engine._slots.free() > 0
    ):
        assert time.monotonic() < deadline, "the scheduler never answered its listener"
        time.sleep(0.005)
    return engine


def test_a_submitted_goal_runs_at_once_without_a_claim_round(
    store: SqlStore, tmp_path: Path
) -> None:
    engine = started_engine(store, max_concurrent=8)
    try:
        rounds = engine.claims
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        # In progress under this engine's worker the moment submit returns (which returns it
        # as created, as it always did).
        assert root.status == Status.TODO
        # Read from the log, not the row: with no model latency the root's session may
        # already have delegated and be waiting, held by no worker, by the time we look.
        started = [e for e in store.events_after(0, limit=1000) if e.kind == "started"]
        assert (started[0].task_id, started[0].data["worker"]) == (root.id, engine.worker_id)
        assert engine.claims == rounds
        done = engine.run_until(root.id, timeout=60)
    finally:
        engine.stop()
    assert done.status == Status.DONE
    assert engine.roots.started == 1
    log = store.events_after(0, limit=1000)
    created = next(e for e in log if e.kind == "created")
    started = next(e for e in log if e.kind == "started" and e.task_id == root.id)
    assert started.ts == created.ts and started.seq == created.seq + 1  # the run's commit
    if store.dialect == "sqlite":
        # Delegations, hand-overs and settles claim the rest: the scheduler never claimed.
        assert engine.claims == rounds


def test_a_full_engine_leaves_the_goal_to_its_scheduler(store: SqlStore, tmp_path: Path) -> None:
    release = threading.Event()
    sim = SimulationBrain()

    def held(session: Session) -> str | None:
        if session.task.title == "First":
            release.wait(60)  # holds the engine's one slot until the test lets it go
        return sim.run(session)

    org = parse_org("company: S\nagents:\n  - {id: ceo, name: C, title: Backend Engineer}\n")
    engine = started_engine(store, max_concurrent=1, brain=FunctionBrain({}, default=held))
    try:
        first = engine.submit(org, "First", workspace=tmp_path / "ws")
        assert store.get_task(first.id).status == Status.IN_PROGRESS
        second = engine.submit(org, "Second", workspace=tmp_path / "ws")
        assert store.get_task(second.id).status == Status.TODO
        assert engine.roots.started == 1
        release.set()
        assert engine.run_until(second.id, timeout=60).status == Status.DONE
    finally:
        release.set()
        engine.stop()
    log = store.events_after(0, limit=1000)
    made = next(e for e in log if e.kind == "created" and e.task_id == second.id)
    started = next(e for e in log if e.kind == "started" and e.task_id == second.id)
    assert started.ts > made.ts  # claimed later, by a round of its own
    assert engine.peak_running == 1


def test_waiting_work_of_a_higher_priority_goes_first(tmp_path: Path) -> None:
    # SQLite: another process's goal is seen by the scheduler only at its heartbeat, so the
    # urgent goal is still waiting when this engine's submit looks at the queue.
    db = tmp_path / "firm.db"
    store, other = open_store(db), open_store(db)
    engine = started_engine(store, max_concurrent=4)
    try:
        urgent = Engine(other).submit(TEAM, "Urgent", priority="urgent", workspace=tmp_path / "ws")
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        for tid in (urgent.id, root.id):
            assert engine.run_until(tid, timeout=60).status == Status.DONE
    finally:
        engine.stop()
        store.close()
        other.close()
    # The submit claimed the urgent goal for its slot; the new one waited its turn. Read from
    # the log, not the rows: by the time a test looks, the urgent goal's session may already
    # have delegated and be waiting, held by no worker.
    log = store_log(db)
    firsts = [e for e in log if e.kind == "started" and e.agent == "ceo"]
    assert [e.task_id for e in firsts[:2]] == [urgent.id, root.id]
    assert firsts[0].data["worker"] == engine.worker_id


def store_log(db: Path) -> list[Event]:
    store = open_store(db)
    try:
        return store.events_after(0, limit=10_000)
    finally:
        store.close()


def test_a_goal_submitted_to_an_engine_not_yet_started_is_claimed_by_its_scheduler(
    store: SqlStore, tmp_path: Path
) -> None:
    engine = Engine(store, max_concurrent=4, heartbeat=30)
    try:
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        assert root.status == Status.TODO  # nothing runs before the engine starts
        assert engine.run_until(root.id, timeout=60).status == Status.DONE
    finally:
        engine.stop()
    assert engine.roots.started == 0


def test_a_stop_right_after_submit_hands_the_goal_back_and_a_resume_finishes_it(
    store_url: str, tmp_path: Path
) -> None:
    # The goal's session thinks for a minute here, so the stop lands inside it (a quick one
    # may end its turn first, in its delegations' commit); the resume runs the run's own brain.
    slow = SimulationBrain(latency=60)
    with Firm(store_url, max_concurrent=4, heartbeat=30, brain=slow) as firm:
        first_round_made(firm.engine)
        root = firm.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        assert firm.store.get_task(root.id).status == Status.IN_PROGRESS
    with Firm(store_url) as firm:
        assert firm.store.get_task(root.id).status == Status.TODO  # handed back by the stop
        assert firm.store.recover(worker_alive)["requeued"] == []
        (done,) = firm.resume(timeout=60)
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
        log = firm.store.events_after(0, limit=1000)
    assert done.status == Status.DONE
    assert report.verified, [c.line() for c in report.checks]
    assert transition_problems([(e.seq, e.kind, e.task_id) for e in log]) == []


# The session thinks for a minute in this process only (the brain given to the engine is not
# stored with the run): the resume runs the run's own brain, which is quick.
SUBMITTER = """\
import sys
from firm.brains.simulation import SimulationBrain
from firm.engine import Engine
from firm.org import load_org
from firm.store import open_store

store = open_store(sys.argv[1])
engine = Engine(store, max_concurrent=4, heartbeat=30, brain=SimulationBrain(latency=60))
root = engine.start().submit(load_org("company.yaml"), "Ship it", workspace="ws")
print(root.id, root.status, flush=True)
engine.run_until(root.id)
"""


def test_a_kill_right_after_submit_loses_nothing(tmp_path: Path) -> None:
    # The goal is claimed for the process in the run's commit; killed while its session runs,
    # it is recovered like any claimed task (its worker is gone) and the run finishes.
    (tmp_path / "company.yaml").write_text(
        "company: K\nagents:\n  - {id: ceo, name: C, title: CEO}\n"
        + "".join(
            f"  - {{id: e{i}, name: E{i}, title: Backend Engineer, reports_to: ceo}}\n"
            for i in range(2)
        )
    )
    (tmp_path / "submit.py").write_text(SUBMITTER)
    db = tmp_path / "state" / "firm.db"
    db.parent.mkdir()
    proc = start_script(tmp_path, str(db))
    try:
        wait_in_store(db, claimed_with_its_run, "the goal was never claimed in its run's commit")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    final = firm_cli("resume", "--db", str(db), "--json", cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    store = open_store(db)
    try:
        tasks = store.list_tasks()
        assert len(tasks) == 3 and {t.status for t in tasks} == {Status.DONE}
        log = store.events_after(0, 100_000)
        assert transition_problems([(e.seq, e.kind, e.task_id) for e in log]) == []
        completed = Counter(e.task_id for e in log if e.kind == "completed")
        assert set(completed) == {t.id for t in tasks} and max(completed.values()) == 1
        (root,) = [t for t in tasks if t.parent_id is None]
        requeued = [e.data["cause"] for e in log if e.kind == "requeued" and e.task_id == root.id]
        assert requeued == ["worker_dead"]
    finally:
        store.close()


def start_script(cwd: Path, db: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FIRM_DB"}
    return subprocess.Popen(
        [sys.executable, "submit.py", db], cwd=cwd, env=env, stdout=subprocess.PIPE, text=True
    )


def claimed_with_its_run(store: SqlStore) -> bool:
    log = store.events_after(0, 100)
    made = {e.task_id: e.ts for e in log if e.kind == "created"}
    return any(e.kind == "started" and made.get(e.task_id) == e.ts for e in log)


def test_a_parsed_chart_is_stored_with_the_run_as_written(store: SqlStore, tmp_path: Path) -> None:
    text = "# our team\ncompany: S\nagents:\n  - {id: ceo, name: C, title: Backend Engineer}\n"
    parsed = parse_org(text, "<test>")
    built = TEAM.model_validate(TEAM.model_dump())  # made in code: no text of its own
    engine = Engine(store)
    try:
        one = engine.submit(parsed, "Ship it", workspace=tmp_path / "ws")
        two = engine.submit(built, "Ship it", workspace=tmp_path / "ws")
    finally:
        engine.stop()
    assert store.run(one.id).org_yaml == text  # its comments too
    assert parse_org(store.run(two.id).org_yaml).model_dump() == built.model_dump()
