"""What the scheduler spends on a run: claim rounds (`firm worker` prints them when it stops),
and the session threads an engine leaves behind when it stops."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from firm.engine import Engine
from firm.store import SqlStore, open_store
from firm.tasks import Status
from tests.support.brains import TEAM, slow_reports


def test_reports_that_end_cost_the_scheduler_no_claim_round(tmp_path: Path) -> None:
    # SQLite: a settle hands its freed slot to the head of the queue itself, so one that found
    # the queue empty leaves the scheduler asleep, and a claim that took fewer tasks than it
    # had room for took all there were.
    store = open_store(tmp_path / "firm.db")
    engine = Engine(store, max_concurrent=8, heartbeat=30)  # only nudges move the scheduler
    try:
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    finally:
        engine.stop()
        store.close()
    assert done.status == Status.DONE
    # One round claims the goal; the CEO's delegation claims the four reports in its own
    # commit (engine/delegated.py), and the reports' settles and the CEO's last one call for
    # none.
    assert engine.claims == 1
    assert engine.empty_claims == 0


def session_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("firm-session")]


def test_stop_hands_running_sessions_back_and_ends_every_session_thread(
    store: SqlStore, tmp_path: Path
) -> None:
    before = set(session_threads())
    engine = Engine(store, max_concurrent=6, heartbeat=30, brain=slow_reports())
    try:
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        engine.start()
        deadline = time.monotonic() + 60
        while True:
            running = [t for t in store.subtree(root.id) if t.status == Status.IN_PROGRESS]
            if sum(t.assignee.startswith("e") for t in running) == 4:
                break
            assert time.monotonic() < deadline, "the reports never all started"
            time.sleep(0.02)
    finally:
        engine.stop()
    reports = [t for t in store.subtree(root.id) if t.assignee.startswith("e")]
    assert {t.status for t in reports} == {Status.TODO}  # handed back, to be re-run
    assert all(t.worker_id is None for t in reports)
    assert set(session_threads()) <= before  # none of this engine's is left running
