"""The hot statements run on SQLite's own cursor (store/prepared.py) and read, fail and are
seen exactly as through SQLAlchemy."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError, OperationalError

from firm.events import EventKind
from firm.store import NewTask, RunSpec, SqlStore, open_store
from firm.store import queries as Q
from firm.store.prepared import run
from firm.tasks import Outcome, Priority, Status, Task

NO_SUCH_TABLE = text("SELECT * FROM no_such_table")
RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlStore]:
    s = open_store(tmp_path / "firm.db")
    yield s
    s.close()


def test_rows_read_the_same_as_through_sqlalchemy(sqlite_store: SqlStore) -> None:
    root = sqlite_store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    sqlite_store.claim("w", 1, 60)
    kid = sqlite_store.delegate(root.id, 0, NewTask("Part", "", "eng", "ceo")).task
    with sqlite_store.engine.connect() as conn:
        for stmt, params in [(Q.LINEAGE, {"task_id": kid.id}), (Q.CHILDREN, {"id": root.id})]:
            fast = run(conn, stmt, params).all()
            slow = conn.execute(stmt, params).all()
            assert [tuple(r) for r in fast] == [tuple(r) for r in slow]
            assert [dict(r._mapping) for r in fast] == [dict(r._mapping) for r in slow]
    head, lineage = sqlite_store.lineage(kid.id)
    assert [t.id for t in lineage] == [kid.id, root.id]
    assert head == sqlite_store.last_seq()
    assert lineage[1].revoked is False  # booleans come back as booleans


def test_errors_are_sqlalchemys(sqlite_store: SqlStore) -> None:
    """A constraint or a locked file fails as SQLAlchemy's error, so the store's retry and
    its delegation race handling see what they always saw."""
    root = sqlite_store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    values = {f"p_{c.name}": getattr(root, c.name, None) for c in Q.T.c}
    values.update(p_files="[]", p_revoked=False, p_priority=1, p_status="todo", p_grant=None)
    values.update(p_calls=0, p_prompt_tokens=0, p_completion_tokens=0, p_dedupe_key=None)
    with pytest.raises(IntegrityError), sqlite_store.engine.connect() as conn:
        run(conn, Q.INSERT_TASK, values)  # the root's id again
    with pytest.raises(OperationalError), sqlite_store.engine.connect() as conn:
        run(conn, NO_SUCH_TABLE)


def test_statement_listeners_see_every_statement(sqlite_store: SqlStore) -> None:
    """The benchmarks count statements with a listener; the fast path still reports them."""
    seen: list[str] = []
    event.listen(sqlite_store.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    root = sqlite_store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    sqlite_store.get_task(root.id)
    assert any(s.startswith("BEGIN IMMEDIATE") for s in seen)
    assert any("INSERT INTO events" in s for s in seen)
    assert any(s.startswith("SELECT tasks.id") for s in seen)


def test_a_write_through_both_paths_commits_or_rolls_back_as_one(sqlite_store: SqlStore) -> None:
    """Writes begin and commit on the driver; a statement that takes SQLAlchemy's path inside
    one joins that transaction: it commits with it, or is rolled back with it."""
    root = sqlite_store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    retitle = Q.T.update().where(Q.T.c.id == root.id)
    with pytest.raises(RuntimeError), sqlite_store._write() as tx:
        tx.conn.execute(retitle.values(title="rolled back"))  # SQLAlchemy's path
        tx.emit(EventKind.THOUGHT, root.id, "ceo", text="rolled back")
        raise RuntimeError("the body fails")
    assert sqlite_store.get_task(root.id).title == "Goal"
    with sqlite_store._write() as tx:
        tx.conn.execute(retitle.values(title="kept"))
        tx.emit(EventKind.THOUGHT, root.id, "ceo", text="kept")
    assert sqlite_store.get_task(root.id).title == "kept"
    assert [e.data.get("text") for e in sqlite_store.events_after(0)][-1] == "kept"
    sqlite_store.append_events([(EventKind.THOUGHT, root.id, "ceo", {"text": "after"})])
    assert sqlite_store.last_seq() == len(sqlite_store.events_after(0))


def test_a_task_read_back_has_every_field_a_task_has(sqlite_store: SqlStore) -> None:
    root = sqlite_store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    (claimed,) = sqlite_store.claim("w", 1, 60)
    sqlite_store.settle(root.id, "w", Outcome.done("shipped", ["a.md", "b.md"]))
    for task in (root, claimed, sqlite_store.get_task(root.id)):
        assert set(vars(task)) == {f.name for f in fields(Task)}
        assert task == Task(**vars(task))
    done = sqlite_store.get_task(root.id)
    assert (done.status, done.files, done.worker_id) == (Status.DONE, ("a.md", "b.md"), None)
    assert claimed.priority == Priority.NORMAL and claimed.grant is None


def test_a_statement_that_fails_inside_a_write_writes_nothing_and_the_next_write_works(
    sqlite_store: SqlStore,
) -> None:
    """A write's statements share its cursor: one that fails ends the write with nothing of it
    written, and the next write starts clean."""
    root = sqlite_store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    before = sqlite_store.last_seq()
    with pytest.raises(OperationalError), sqlite_store._write() as tx:
        tx.emit(EventKind.THOUGHT, root.id, "ceo", text="never written")
        run(tx.conn, NO_SUCH_TABLE)
    assert sqlite_store.last_seq() == before
    sqlite_store.append_events([(EventKind.THOUGHT, root.id, "ceo", {"text": "written"})])
    assert [e.data.get("text") for e in sqlite_store.events_after(before)] == ["written"]


def test_two_stores_writing_at_once_in_one_process_lose_nothing(tmp_path: Path) -> None:
    """Each write runs on its own connection's cursor even while another store of the same
    process writes at the same moment: every entry of both lands, each log gapless and
    chained."""
    stores = [open_store(tmp_path / f"{name}.db") for name in ("a", "b")]
    errors: list[BaseException] = []

    def write(store: SqlStore) -> None:
        try:
            for i in range(150):
                store.append_events([(EventKind.THOUGHT, None, "ceo", {"text": f"{i}"})])
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        for store in stores:
            log = store.events_after(0)
            assert [e.seq for e in log] == list(range(1, len(log) + 1))
            assert [e.data["text"] for e in log] == [f"{i}" for i in range(150)]
            assert all(e.prev_hash == p.hash for p, e in itertools.pairwise(log))
    finally:
        for store in stores:
            store.close()
