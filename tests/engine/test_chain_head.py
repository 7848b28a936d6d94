"""The chain stays whole when several stores write one database: each store appends from where
it last left the head, and when someone else moved it meanwhile, it builds on the head it reads."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select

from firm.chain import entry_hash
from firm.events import EventKind
from firm.store import SqlStore, open_store, schema
from firm.store.base import Event

pytestmark = pytest.mark.timeout(120)


def thought(text: str) -> list[tuple[str, str | None, str | None, dict[str, Any]]]:
    return [(EventKind.THOUGHT, None, "ceo", {"text": text})]


def assert_whole(store: SqlStore) -> list[Event]:
    """seq without a gap, each hash over its own entry and linked to the one before, and the
    head at the last entry."""
    events = store.events_after(0, 1_000_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    for before, e in itertools.pairwise(events):
        assert e.prev_hash == before.hash, f"seq {e.seq} does not follow seq {before.seq}"
    for e in events:
        assert entry_hash(e.prev_hash, e.seq, e.ts, e.kind, e.task_id, e.agent, e.data) == e.hash
    with store.engine.connect() as conn:
        head = conn.execute(select(schema.chain_head.c.seq, schema.chain_head.c.hash)).one()
    assert tuple(head) == (events[-1].seq, events[-1].hash)
    return events


def test_stores_taking_turns_on_one_database_keep_one_chain(
    open_any: Callable[[], SqlStore],
) -> None:
    a, b = open_any(), open_any()
    told: list[Event] = []
    for i, writer in enumerate([a, b, a, a, b, b, a, b, a]):
        told += writer.append_events(thought(f"entry {i}") * (1 + i % 3))
    stored = assert_whole(a)
    # What each writer was told it appended is what was stored, even when it rebuilt its
    # entries on a head another store had moved.
    assert told == stored


def test_stores_writing_at_once_keep_one_chain(open_any: Callable[[], SqlStore]) -> None:
    stores = [open_any() for _ in range(3)]
    told: list[Event] = []
    lock = threading.Lock()

    def write(store: SqlStore, n: int) -> None:
        for i in range(40):
            appended = store.append_events(thought(f"{n}:{i}") * (1 + i % 2))
            with lock:
                told.extend(appended)

    threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stored = assert_whole(stores[0])
    assert len(stored) == 3 * 60
    assert sorted(told, key=lambda e: e.seq) == stored


@pytest.fixture
def held() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()


def test_a_write_paused_after_moving_the_head_holds_back_another_stores_write(
    open_any: Callable[[], SqlStore], held: threading.Event
) -> None:
    a, b = open_any(), open_any()
    b.append_events(thought("b knows the head"))
    a.append_events(thought("a moves it: what b knows is stale"))
    inside = threading.Event()

    def pause_after_head(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        # The head row's move on PostgreSQL; on SQLite, where the head is the last entry, the
        # entries' insert.
        moved = statement.lstrip().upper().startswith(("UPDATE CHAIN_HEAD", "INSERT INTO EVENTS"))
        if moved and not inside.is_set():
            inside.set()
            assert held.wait(10)

    event.listen(a.engine, "after_cursor_execute", pause_after_head)
    paused = threading.Thread(target=a.append_events, args=(thought("a, paused"),))
    paused.start()
    assert inside.wait(10)
    waiting = threading.Thread(target=b.append_events, args=(thought("b, behind a"),))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive()  # the head is a's until a commits
    held.set()
    paused.join(10)
    waiting.join(10)
    texts = [e.data["text"] for e in assert_whole(a)]
    assert texts[-2:] == ["a, paused", "b, behind a"]


WRITER = """
import sys
from firm.store import open_store
store = open_store(sys.argv[1])
for i in range(int(sys.argv[3])):
    store.append_events([("thought", None, sys.argv[2], {"text": str(i)})] * (1 + i % 3))
store.close()
"""


def test_processes_writing_one_sqlite_file_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "firm.db"
    store = open_store(path)
    store.append_events(thought("created"))
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{n}", "60"]) for n in range(2)
    ]
    mine = 0
    while any(w.poll() is None for w in writers):  # this process writes between theirs
        store.append_events(thought(str(mine)))
        mine += 1
    assert [w.wait(90) for w in writers] == [0, 0]
    stored = assert_whole(store)
    assert len(stored) == 1 + mine + 2 * (20 * (1 + 2 + 3))
    store.close()


def test_sqlite_refuses_an_entry_that_does_not_continue_the_log(tmp_path: Path) -> None:
    """On SQLite the head is the last entry: a commit that built its entries on a head that is
    not the last entry (a seq already taken, a gap, another hash) adds none of them."""
    from sqlalchemy.exc import IntegrityError

    from firm.store.transaction import LINKED_INSERT

    store = open_store(tmp_path / "firm.db")
    first, second = store.append_events(thought("one") + thought("two"))

    def entry(seq: int, prev: str) -> tuple[Any, ...]:  # a commit's first entry
        return (seq, 1.0, "thought", None, "ceo", '{"text":"x"}', prev, "f" * 64, prev)

    for refused in (entry(2, first.hash), entry(4, second.hash), entry(3, first.hash)):
        with store.engine.begin() as conn, pytest.raises(IntegrityError):
            conn.exec_driver_sql(LINKED_INSERT, refused)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(LINKED_INSERT, entry(3, second.hash))
    assert [e.seq for e in store.events_after(0)] == [1, 2, 3]
    store.close()
