"""Invariants 5 and 6: recovery on start loses nothing; waiting tasks hold no worker."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import update

from firm.brains.simulation import SimulationBrain
from firm.engine import Engine
from firm.engine.workers import HOST, worker_alive
from firm.org import OrgChart
from firm.session import Session
from firm.store import NewTask, RunSpec, SqlStore
from firm.store.schema import tasks
from firm.tasks import Outcome, Status
from firm.testing import FunctionBrain
from tests.support.brains import PeakCount

RUN = RunSpec("", "<test>", "simulation", {}, "/tmp/unused")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_recovery_requeues_orphans_and_wakes_managers_with_nothing_open(store: SqlStore) -> None:
    # A session of a process that died on this host: requeued at once.
    a = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    store.claim(f"{HOST}:{dead_pid()}:abc", 1, 3600)
    # A session held by a live worker on another machine with a valid lease: left alone.
    b = store.create_run(RUN, NewTask("B", "", "ceo", "user"))
    store.claim("elsewhere:1:xyz", 1, 3600)
    # A session whose lease ran out: requeued, wherever its worker is.
    c = store.create_run(RUN, NewTask("C", "", "ceo", "user"))
    store.claim("elsewhere:2:xyz", 1, -1)
    # A manager waiting on reports that all ended (its wake was lost in a crash).
    d = store.create_run(RUN, NewTask("D", "", "ceo", "user"))
    store.claim("boss", 1, 3600)
    kid = store.delegate(d.id, 0, NewTask("part", "", "cto", "ceo")).task
    store.settle(d.id, "boss", Outcome.yielded())
    store.claim("staff", 1, 3600)
    store.settle(kid.id, "staff", Outcome.done("ok"))
    store.engine.dispose()
    with store.engine.begin() as conn:  # lose the wake, as a crash between two writes would
        conn.execute(update(tasks).where(tasks.c.id == d.id).values(status="waiting"))

    result = store.recover(worker_alive)
    assert sorted(result["requeued"]) == sorted([a.id, c.id])
    assert result["woken"] == [d.id]
    assert store.get_task(b.id).status == Status.IN_PROGRESS
    assert {store.get_task(t).status for t in (a.id, c.id, d.id)} == {Status.TODO}
    requeued = [e for e in store.events_after(0, 1000) if e.kind == "requeued"]
    assert all("re-run" in e.data["reason"] for e in requeued)


def test_worker_liveness() -> None:
    assert worker_alive(f"{HOST}:{dead_pid()}:x") is False
    assert worker_alive(f"{HOST}:{os.getppid()}:x") is True
    assert worker_alive("some-other-host:1:x") is None
    assert worker_alive(f"{HOST}:{os.getpid()}:not-running-here") is False


def test_an_interrupted_manager_resumes_without_delegating_twice(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    sim = SimulationBrain()
    first_attempt_blocks = threading.Event()
    briefs: list[str] = []

    def ceo(session: Session) -> str | None:
        briefs.append(session.brief)
        if session.task.attempts == 1:
            session.call(
                "delegate_task",
                {"assignee": "cto", "title": "Technical plan: Launch", "description": "build it"},
            )
            first_attempt_blocks.wait(30)  # the process "dies" here
            session.check_cancelled()
        return sim.run(session)

    brain = FunctionBrain({"ceo": ceo}, default=sim.run)
    first = Engine(store, heartbeat=0.2, brain=brain, max_concurrent=1)
    first.start()
    root = first.submit(three_levels, "Launch", workspace=tmp_path / "ws")
    deadline = time.monotonic() + 20
    while not store.children(root.id):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    # Simulate the first engine's process dying: it stops claiming and is no longer alive.
    first.abandon()

    with Engine(store, heartbeat=0.2, brain=brain) as second:
        done = second.run_until(root.id, timeout=60)
        first_attempt_blocks.set()  # the zombie session wakes up: it must not touch the task
    assert done.status == Status.DONE
    assert "You already delegated these subtasks" in briefs[1]
    assert "Technical plan: Launch (assigned to cto)" in briefs[1]
    tasks = store.subtree(root.id)
    assert sorted(t.assignee for t in tasks) == sorted(
        ["ceo", "cto", "cmo", "gabriel", "hana", "maya", "omar"]
    )
    completed = [e.task_id for e in store.events_after(0, 10_000) if e.kind == "completed"]
    assert len(completed) == len(set(completed)) == 7
    first.stop()


def chain_org(org_factory: Callable[[str], OrgChart], depth: int) -> OrgChart:
    lines = ["company: Chain", "agents:", "  - {id: a0, name: A0, title: Chief Executive Officer}"]
    lines += [
        f"  - {{id: a{i}, name: A{i}, title: Manager {i}, reports_to: a{i - 1}}}"
        for i in range(1, depth)
    ]
    return org_factory("\n".join(lines) + "\n")


def test_waiting_managers_hold_no_worker(
    store: SqlStore, org_factory: Callable[[str], OrgChart], tmp_path: Path
) -> None:
    org = chain_org(org_factory, 8)  # seven managers waiting at once above one leaf
    with Engine(store, max_concurrent=1, heartbeat=0.2) as engine:
        root = engine.submit(org, "Go deep", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    assert done.status == Status.DONE
    assert len(store.subtree(root.id)) == 8
    assert engine.peak_running == 1


def test_the_concurrency_limit_holds_under_load(
    store: SqlStore, org_factory: Callable[[str], OrgChart], tmp_path: Path
) -> None:
    agents = "\n".join(
        f"  - {{id: w{i}, name: W{i}, title: Engineer, reports_to: boss}}" for i in range(12)
    )
    org = org_factory(f"company: Wide\nagents:\n  - {{id: boss, name: B, title: CTO}}\n{agents}\n")
    counter = PeakCount()
    with Engine(store, max_concurrent=3, heartbeat=0.2, brain=counter.brain) as engine:
        roots = [engine.submit(org, f"Goal {i}", workspace=tmp_path / "ws") for i in range(3)]
        for r in roots:
            assert engine.run_until(r.id, timeout=60).status == Status.DONE
    assert counter.peak == 3  # the limit is reached under load ...
    assert engine.peak_running == 3  # ... and never exceeded
