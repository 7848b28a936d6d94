"""Reads and writes of one process side by side: a read sees committed data only, whoever
holds the write lock and whichever connection it runs on (on SQLite a read between writes
runs on the writer's own connection, store/connection.py), and no read waits for a write."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from firm.events import EventKind
from firm.store import NewTask, RunSpec, SqlStore
from firm.store import queries as Q
from firm.tasks import Status

RUN = RunSpec(
    org_yaml="company: X\nagents: []\n",
    org_source="<test>",
    brain="simulation",
    brain_options={},
    workspace="/tmp/ws",
)


@contextmanager
def write_held_open(store: SqlStore, task_id: str, title: str) -> Iterator[None]:
    """Another thread retitles the task and logs it, then keeps its transaction open until
    the block ends; it commits then."""
    written = threading.Event()
    finish = threading.Event()
    failed: list[BaseException] = []

    def writer() -> None:
        try:
            with store._write() as tx:
                tx.conn.execute(Q.T.update().where(Q.T.c.id == task_id).values(title=title))
                tx.emit(EventKind.THOUGHT, task_id, "ceo", text=title)
                written.set()
                finish.wait()
        except BaseException as exc:
            failed.append(exc)
            written.set()

    thread = threading.Thread(target=writer)
    thread.start()
    written.wait()
    try:
        yield
    finally:
        finish.set()
        thread.join()
    assert not failed, failed


def every_read(store: SqlStore, task_id: str) -> tuple[str, int, int]:
    """The task's title and its log head as each read path tells them, one answer each."""
    task = store.get_task(task_id)
    state = store.state_at_head(task_id)
    head, lineage = store.lineage(task_id)
    assert lineage[0].title == task.title
    assert store.session_state(task_id) == (task.status, task.revoked, task.worker_id)
    assert store.children(task_id) == []
    assert store.has_open_work(task.root_id) is (task.status == Status.TODO)
    assert store.notes(task_id) == []
    assert store.max_running() is None
    assert state.head_seq == head
    return task.title, state.head_seq, store.last_seq()


def test_reads_while_another_thread_writes_see_only_what_was_committed(
    store: SqlStore,
) -> None:
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    before = every_read(store, root.id)
    assert before[0] == "Goal"
    with write_held_open(store, root.id, "Renamed"):
        # The write holds the lock: every read runs beside it, and none sees its rows.
        assert every_read(store, root.id) == before
    title, head, last = every_read(store, root.id)
    assert (title, head, last) == ("Renamed", before[1] + 1, before[1] + 1)


def test_a_read_inside_a_write_body_sees_the_committed_state(store: SqlStore) -> None:
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    before = every_read(store, root.id)
    with store._write() as tx:
        tx.conn.execute(Q.T.update().where(Q.T.c.id == root.id).values(title="Renamed"))
        tx.emit(EventKind.THOUGHT, root.id, "ceo", text="renamed")
        # The body's thread holds the write lock: its reads neither wait for it nor see
        # the rows it has not committed yet.
        assert every_read(store, root.id) == before
    assert every_read(store, root.id)[:2] == ("Renamed", before[1] + 1)


def test_a_write_that_failed_leaves_nothing_for_the_next_read(store: SqlStore) -> None:
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    before = every_read(store, root.id)
    try:
        with store._write() as tx:
            tx.conn.execute(Q.T.update().where(Q.T.c.id == root.id).values(title="Lost"))
            tx.emit(EventKind.THOUGHT, root.id, "ceo", text="lost")
            raise RuntimeError("the body fails")
    except RuntimeError:
        pass
    assert every_read(store, root.id) == before


def test_every_commit_is_seen_by_the_next_read_of_any_thread_or_store(
    open_any: Callable[[], SqlStore],
) -> None:
    """Readers on several threads, while this store and another on the same database (another
    process, as far as the database knows) append: a read started after a commit returned sees
    it, and no reader ever sees the log go back."""
    store, other = open_any(), open_any()
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    done = threading.Event()
    backwards: list[tuple[int, int]] = []

    def reader() -> None:
        last = 0
        while not done.is_set():
            head = store.state_at_head(root.id).head_seq
            if head < last:
                backwards.append((last, head))
            last = head

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        for i in range(40):
            writer = store if i % 2 else other
            (event,) = writer.append_events([(EventKind.THOUGHT, root.id, "ceo", {"text": str(i)})])
            assert store.state_at_head(root.id).head_seq >= event.seq
            assert other.state_at_head(root.id).head_seq >= event.seq
    finally:
        done.set()
        for t in readers:
            t.join()
    assert backwards == []
    assert store.state_at_head(root.id).head_seq == store.last_seq() == other.last_seq()
