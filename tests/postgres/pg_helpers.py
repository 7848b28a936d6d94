"""Small builders shared by the store tests: runs, subtasks, and holding a row lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

from firm.store import SqlStore
from firm.store.base import NewTask, RunSpec
from firm.tasks import Outcome, Priority, Status, Task

RUN = RunSpec(
    org_yaml="company: T\nagents:\n  - {id: ceo, name: A, title: CEO}\n",
    org_source="<test>",
    brain="simulation",
    brain_options={},
    workspace="/tmp/firm-test-ws",
)


def new_root(store: SqlStore, title: str = "goal", priority: Priority = Priority.NORMAL) -> Task:
    return store.create_run(RUN, NewTask(title, title, "ceo", "user", priority=priority))


def claim_task(store: SqlStore, task_id: str, worker: str = "w", lease: float = 30.0) -> Task:
    """Claim exactly this task (the tests keep one todo task at a time where they use this)."""
    claimed = store.claim(worker, 1, lease)
    assert [t.id for t in claimed] == [task_id], f"expected to claim {task_id}, got {claimed}"
    return claimed[0]


def delegate(store: SqlStore, parent: Task, assignee: str, title: str) -> Task:
    return store.delegate(
        parent.id, parent.turn, NewTask(title, title, assignee, parent.assignee)
    ).task


def started_manager(store: SqlStore, children: int, worker: str = "w") -> tuple[Task, list[Task]]:
    """A root claimed by worker with `children` subtasks delegated (all todo)."""
    root = new_root(store)
    root = claim_task(store, root.id, worker)
    kids = [delegate(store, root, f"r{i}", f"part {i}") for i in range(children)]
    return root, kids


def kinds_for(store: SqlStore, task_id: str, kind: str) -> list[dict]:
    return [
        e.data for e in store.events_after(0, 100_000) if e.task_id == task_id and e.kind == kind
    ]


def done(text_: str = "ok") -> Outcome:
    return Outcome.done(text_)


@contextmanager
def holding_lock(store: SqlStore, task_id: str) -> Iterator[None]:
    """Hold what a writer of this task must wait for: its row lock on PostgreSQL, the single
    writer lock on SQLite. Other writers queue behind it until the block ends."""
    with store.engine.connect() as conn:
        conn = conn.execution_options(firm_write=True)
        with conn.begin():
            if store.dialect == "postgresql":
                conn.execute(
                    text("SELECT id FROM tasks WHERE id = :id FOR UPDATE"), {"id": task_id}
                )
            else:
                conn.execute(text("UPDATE meta SET value = value WHERE key = 'schema_version'"))
            yield


def wait_until_queued(pg_server, store: SqlStore, n: int, threads: list[threading.Thread]) -> None:  # type: ignore[no-untyped-def]
    """Wait until n writers are blocked behind a held lock (PostgreSQL shows it; on SQLite we can
    only give the threads a moment to reach the lock). Writers of this store that joined the
    open group commit (store/group.py) queue in this process, behind its first writer: they
    count as queued too, in the order they arrived."""
    if pg_server is None:
        time.sleep(0.3)
        return
    deadline = time.monotonic() + 30
    while pg_server.waiting_for_locks(store.url) + store._group.queued() < n:
        assert all(t.is_alive() for t in threads), "a writer finished while the lock was held"
        assert time.monotonic() < deadline, f"{n} writers never queued for the lock"
        time.sleep(0.02)


def open_statuses(store: SqlStore, root_id: str) -> dict[str, int]:
    return {s: n for s, n in store.counts(root_id).items() if not Status(s).terminal}
