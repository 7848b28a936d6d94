"""The engine across processes: a cancel made elsewhere stops a running session at once, and a
session whose lease was taken over stops instead of finishing someone else's task."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import update

from firm.engine import Engine
from firm.org import parse_org
from firm.store import schema
from firm.tasks import Status

pytestmark = pytest.mark.timeout(120)

SOLO = """\
company: Solo
agents:
  - {id: ceo, name: Ava, title: Chief Executive Officer}
"""


def _wait_for(predicate, what: str, limit: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def _long_session(store, tmp_path, lease: float) -> tuple[Engine, str]:  # type: ignore[no-untyped-def]
    """An engine running one session that would take a minute unless stopped."""
    org = parse_org(SOLO, "<solo>")
    engine = Engine(store, max_concurrent=1, lease_seconds=lease, heartbeat=0.2)
    root = engine.submit(
        org, "Think hard", brain_options={"latency": 60}, workspace=tmp_path / "ws"
    )
    engine.start()
    _wait_for(lambda: engine.running == [root.id], "the session started")
    return engine, root.id


def test_a_cancel_from_another_process_stops_the_running_session(store, open_any, tmp_path):
    # On PostgreSQL only the NOTIFY can stop it in time (the lease heartbeat is 20 s away);
    # on SQLite the heartbeat finds the cancelled state.
    lease = 60.0 if store.dialect == "postgresql" else 3.0
    engine, root_id = _long_session(store, tmp_path, lease)
    try:
        elsewhere = open_any()
        elsewhere.cancel(root_id, "not needed any more", by="someone else")
        _wait_for(lambda: engine.running == [], "the session stopped")
        task = store.get_task(root_id)
        assert task.status == Status.CANCELLED and task.error == "not needed any more"
    finally:
        engine.stop()


def test_a_session_that_lost_its_lease_stops_and_leaves_the_task_to_its_new_worker(
    store, open_any, tmp_path
):
    engine, root_id = _long_session(store, tmp_path, lease=3.0)
    try:
        other = open_any()
        # The lease ran out, as if the worker had hung, and another worker took the task over.
        # One statement, so the engine cannot claim the task back in between: a requeue (its
        # NOTIFY wakes the engine at once) followed by a separate claim left it that window.
        with other.engine.begin() as conn:
            taken = conn.execute(
                update(schema.tasks)
                .where(schema.tasks.c.id == root_id)
                .values(
                    worker_id="the-new-worker",
                    attempts=schema.tasks.c.attempts + 1,
                    lease_expires_at=time.time() + 600,
                )
                .returning(schema.tasks.c.attempts)
            ).scalar_one()
        assert taken == 2
        _wait_for(lambda: engine.running == [], "the cut-off session stopped")
        task = other.get_task(root_id)
        assert task.status == Status.IN_PROGRESS and task.worker_id == "the-new-worker"
    finally:
        engine.stop()
    # Stopping did not hand back a task that is no longer this engine's.
    assert other.get_task(root_id).worker_id == "the-new-worker"


def test_deliverables_are_flushed_to_disk_when_the_store_fsyncs_its_commits(store, tmp_path):
    """PostgreSQL fsyncs each commit, so a task's files must outlive a power cut as its row
    does; SQLite (synchronous=NORMAL) does not, and neither do its files by default."""
    engine = Engine(store, max_concurrent=1)
    root = engine.submit(parse_org(SOLO, "<solo>"), "Write it down", workspace=tmp_path / "ws")
    try:
        assert engine.company(root.root_id).workspace.sync is (store.dialect == "postgresql")
    finally:
        engine.stop()
