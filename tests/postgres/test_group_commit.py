"""Group commit (store/group.py) on SQLite and a real PostgreSQL server: writers that overlap in
time share one transaction and one commit, a member that fails fails alone, and the chain stays
gap-free and in commit order under many writing threads."""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pg_helpers import claim_task, done, kinds_for, new_root, started_manager
from sqlalchemy import text

from firm.chain import entry_hash
from firm.errors import TaskNotHeld
from firm.events import EventKind, InvalidEvent
from firm.store import SqlStore, open_store
from firm.store.base import NewTask
from firm.tasks import Outcome, Status

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def store(store: SqlStore) -> SqlStore:
    """Grouping on, on both backends (by default only PostgreSQL groups: the code is the same)."""
    store.group_commit = True
    return store


def assert_chain(store: SqlStore) -> list[Any]:
    """Every entry follows the one before it: seq without a gap, each hash over its own entry
    and linked to the previous one, and the head at the last entry."""
    events = store.events_after(0, 1_000_000)
    for before, e in itertools.pairwise(events):
        assert e.seq == before.seq + 1, f"gap between seq {before.seq} and {e.seq}"
        assert e.prev_hash == before.hash, f"seq {e.seq} does not follow seq {before.seq}"
    for e in events:
        assert entry_hash(e.prev_hash, e.seq, e.ts, e.kind, e.task_id, e.agent, e.data) == e.hash
    assert store.last_seq() == events[-1].seq
    return events


class Group:
    """Force a group: a leader whose body waits until the writers under test have joined."""

    def __init__(self, store: SqlStore, joiners: int):
        self.store = store
        self.joiners = joiners
        self.release = threading.Event()
        self.errors: dict[str, BaseException] = {}
        self.results: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []
        self.leader = threading.Thread(target=self._lead)

    def _lead(self) -> None:
        with self.store._write():
            self.release.wait(30)

    def add(self, name: str, call: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                self.results[name] = call()
            except BaseException as exc:  # the test looks at what each member got
                self.errors[name] = exc

        self.threads.append(threading.Thread(target=run))

    def run(self) -> tuple[int, int]:
        """Run the group; how many writes and commits the store counted for it."""
        writes, commits = self.store._group.writes, self.store._group.commits
        self.leader.start()
        deadline = time.monotonic() + 30
        while self.store._group._open is None:  # open once the leader is in its body
            assert time.monotonic() < deadline
            time.sleep(0.005)
        for t in self.threads:
            t.start()
        while self.store._group.queued() < self.joiners:
            assert time.monotonic() < deadline, "the writers never joined the open group"
            time.sleep(0.005)
        self.release.set()
        for t in [self.leader, *self.threads]:
            t.join(60)
        return self.store._group.writes - writes, self.store._group.commits - commits


def test_a_failing_member_fails_alone_and_the_others_commit_together(store):
    """One group: a settle that wakes its manager, a delegation and a log entry succeed; a
    delegation by a session that lost its task, an invalid entry, a duplicate key and a body that
    raises after writing each fail their own caller, and leave nothing behind."""
    root, kids = started_manager(store, 2)
    store.settle(root.id, "w", Outcome.yielded())
    claim_task(store, kids[0].id)
    store.settle(kids[0].id, "w", done())
    last = claim_task(store, kids[1].id)
    other = new_root(store, "other goal")
    other = claim_task(store, other.id, "w2")
    before = store.last_seq()

    def duplicate_key() -> None:
        with store._write() as tx:
            tx.conn.execute(
                text("UPDATE tasks SET title = 'renamed' WHERE id = :id"), {"id": other.id}
            )
            tx.conn.execute(text("INSERT INTO meta (key, value) VALUES ('schema_version', 'x')"))

    def raises_after_writing() -> None:
        with store._write() as tx:
            tx.conn.execute(
                text("UPDATE tasks SET title = 'lost' WHERE id = :id"), {"id": other.id}
            )
            tx.emit(EventKind.THOUGHT, other, text="never written")
            raise RuntimeError("the body changed its mind")

    group = Group(store, 7)
    group.add("settle", lambda: store.settle(last.id, "w", done()))
    group.add(
        "delegate",
        lambda: store.delegate(
            other.id, other.turn, NewTask("sub", "sub", "r9", "ceo"), worker_id="w2"
        ),
    )
    group.add(
        "thought",
        lambda: store.append_events([(EventKind.THOUGHT, other.id, "ceo", {"text": "kept"})]),
    )
    group.add(
        "not held",
        lambda: store.delegate(
            other.id, other.turn, NewTask("x", "x", "r8", "ceo"), worker_id="w-lost"
        ),
    )
    group.add(
        "invalid",
        lambda: store.append_events([("mood", other.id, "ceo", {"text": "cheerful"})]),
    )
    group.add("integrity", duplicate_key)
    group.add("raises", raises_after_writing)
    writes, commits = group.run()

    assert sorted(group.errors) == ["integrity", "invalid", "not held", "raises"], group.errors
    assert isinstance(group.errors["not held"], TaskNotHeld)
    assert isinstance(group.errors["invalid"], InvalidEvent)
    assert "IntegrityError" in type(group.errors["integrity"]).__name__
    assert str(group.errors["raises"]) == "the body changed its mind"
    # The leader and the three that succeeded: four writes, one commit.
    assert (writes, commits) == (4, 1)
    # Settle and wake together: the last report's settle woke its manager.
    assert group.results["settle"].woke == [root.id]
    assert store.get_task(root.id).status == Status.TODO
    assert group.results["delegate"].created
    assert store.get_task(other.id).title == "other goal"  # both failed renames undone
    assert [d["text"] for d in kinds_for(store, other.id, "thought")] == ["kept"]
    events = assert_chain(store)
    new = [e for e in events if e.seq > before]
    # What each member was told it wrote is what the log holds, at those places.
    told = [*group.results["thought"]]
    assert all(e in new for e in told)
    assert {e.kind for e in new} >= {"completed", "woken", "delegated", "thought"}


def test_the_leader_failing_does_not_take_its_joiners_down(store):
    root = new_root(store)
    before = store.last_seq()
    release = threading.Event()
    failed: list[BaseException] = []

    def lead() -> None:
        try:
            with store._write() as tx:
                tx.conn.execute(
                    text("UPDATE tasks SET title = 'lost' WHERE id = :id"), {"id": root.id}
                )
                tx.emit(EventKind.THOUGHT, root.id, "ceo", text="never written")
                release.wait(30)
                raise RuntimeError("leader failed")
        except RuntimeError as exc:
            failed.append(exc)

    leader = threading.Thread(target=lead)
    leader.start()
    while store._group._open is None:
        time.sleep(0.005)
    got: list[Any] = []
    joiners = [
        threading.Thread(
            target=lambda i=i: got.extend(
                store.append_events([(EventKind.THOUGHT, root.id, "ceo", {"text": f"j{i}"})])
            )
        )
        for i in range(3)
    ]
    for t in joiners:
        t.start()
    while store._group.queued() < 3:
        time.sleep(0.005)
    release.set()
    for t in [leader, *joiners]:
        t.join(60)
    assert [str(e) for e in failed] == ["leader failed"]
    assert store.get_task(root.id).title == "goal"
    texts = [e.data["text"] for e in store.events_after(before) if e.kind == "thought"]
    assert sorted(texts) == ["j0", "j1", "j2"]
    assert sorted(e.seq for e in got) == list(range(before + 1, before + 4))
    assert_chain(store)


def test_the_delegations_of_one_reply_are_one_write(store):
    root = claim_task(store, new_root(store).id)
    writes, commits = store._group.writes, store._group.commits
    items = [((), NewTask(f"part {i}", "", f"r{i}", "ceo")) for i in range(3)]
    results = store.delegate_many(root.id, root.turn, items, "w")
    assert all(r.created for r in results)
    assert (store._group.writes - writes, store._group.commits - commits) == (1, 1)


@pytest.mark.parametrize("grouped", [True, False])
def test_many_writing_threads_keep_the_chain_whole_and_in_commit_order(store, grouped):
    """Eight threads settle, delegate and log at once while a reader follows the log: the
    reader never sees a seq before the ones below it are there (commit order), every caller's
    entries are stored where it was told, and the chain ends whole."""
    store.group_commit = grouped
    roots = [claim_task(store, new_root(store, f"goal {i}").id, f"w{i}") for i in range(8)]
    stop = threading.Event()
    seen_problems: list[str] = []

    def follow() -> None:
        last = store.last_seq()
        while not stop.is_set() or store.last_seq() > last:
            for e in store.events_after(last, 10_000):
                if e.seq != last + 1:
                    seen_problems.append(f"saw seq {e.seq} right after {last}")
                last = e.seq

    told: list[Any] = []
    errors: list[BaseException] = []

    def work(i: int) -> None:
        rng = random.Random(i)
        root = roots[i]
        try:
            for n in range(25):
                if rng.random() < 0.3:
                    r = store.delegate(
                        root.id, root.turn, NewTask(f"t{n}", "", "r", "ceo"), worker_id=f"w{i}"
                    )
                    assert r.created
                else:
                    told.extend(
                        store.append_events(
                            [(EventKind.THOUGHT, root.id, "ceo", {"text": f"{i}.{n}"})] * 2
                        )
                    )
            store.settle(root.id, f"w{i}", Outcome.yielded())
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=follow)
    reader.start()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    stop.set()
    reader.join(30)
    assert errors == [] and seen_problems == []
    events = {e.seq: e for e in assert_chain(store)}
    assert all(events[e.seq] == e for e in told)
    for i in range(8):  # each thread's own entries in the order it wrote them
        mine = [e.data["text"] for e in events.values() if e.kind == "thought"]
        mine = [t for t in mine if t.startswith(f"{i}.")]
        assert mine == sorted(mine, key=lambda t: int(t.split(".")[1]))
    assert all(store.get_task(r.id).status == Status.WAITING for r in roots)


def test_a_write_inside_a_write_of_the_same_thread_is_refused_not_hung(store):
    root = new_root(store)
    with store._write() as tx, pytest.raises(RuntimeError, match="inside another write"):
        tx.emit(EventKind.THOUGHT, root.id, "ceo", text="outer")
        with store._write():
            pass
    store.append_events([(EventKind.THOUGHT, root.id, "ceo", {"text": "after"})])
    assert [d["text"] for d in kinds_for(store, root.id, "thought")] == ["outer", "after"]


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[SqlStore]:
    """PostgreSQL only (its server's connections can be cut), grouping on as by default."""
    store = open_store(pg_url)
    assert store.group_commit
    yield store
    store.close()


def test_a_connection_cut_under_a_group_is_retried_by_every_member_not_crashed(
    pg_store: SqlStore, pg_server: Any
) -> None:
    """The server drops the group's connection while a member's body runs (an administrator's
    kill, a failover). Every member of that transaction is re-run by the retry layer and lands
    exactly once; none sees SQLAlchemy's "rollback first" error, which a worker would take for
    a crashed session."""
    store = pg_store
    root = new_root(store)
    before = store.last_seq()
    release = threading.Event()
    leader_saw: list[BaseException] = []

    def lead() -> None:
        try:
            with store._write() as tx:
                tx.emit(EventKind.THOUGHT, root.id, "ceo", text="leader")
                release.wait(30)
        except BaseException as exc:  # not retried: the test looks at what it got
            leader_saw.append(exc)

    def cut() -> None:
        with store._write() as tx:
            pg_server.terminate(f"firm-store:%:{os.getpid()}")
            tx.conn.execute(text("SELECT 1"))

    leader = threading.Thread(target=lead)
    leader.start()
    while store._group._open is None:
        time.sleep(0.005)
    group = Group(store, 0)
    for i in range(3):
        group.add(
            f"writer {i}",
            lambda i=i: store.append_events(
                [(EventKind.THOUGHT, root.id, "ceo", {"text": f"w{i}"})]
            ),
        )
    group.add("cut", cut)
    for t in group.threads:
        t.start()
    deadline = time.monotonic() + 30
    while store._group.queued() < 4:
        assert time.monotonic() < deadline, "the writers never joined the open group"
        time.sleep(0.005)
    release.set()
    for t in [leader, *group.threads]:
        t.join(60)

    assert sorted(group.errors) == ["cut"], group.errors
    assert all(exc.connection_invalidated for exc in [group.errors["cut"], *leader_saw])
    texts = [e.data["text"] for e in store.events_after(before) if e.kind == "thought"]
    assert sorted(texts) == ["w0", "w1", "w2"]  # each once; the unretried leader's is gone
    assert_chain(store)
