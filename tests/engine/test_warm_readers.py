"""An engine opens its store's read connections as it starts, so a run's sessions, reading
side by side while a write holds the writer's connection, open none of their own."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy import event

from firm.engine import Engine
from firm.org import parse_org
from firm.store import open_store

CHART = """\
company: Warm Co
agents:
  - {id: ceo, name: C, title: CEO}
  - {id: a, name: A, title: Engineer, reports_to: ceo}
  - {id: b, name: B, title: Engineer, reports_to: ceo}
  - {id: c, name: C2, title: Engineer, reports_to: ceo}
"""


def test_a_run_on_a_new_store_opens_no_connection_in_its_sessions(tmp_path: Path) -> None:
    store = open_store(tmp_path / "firm.db")
    opened: list[str] = []

    @event.listens_for(store.engine, "connect")
    def _count(*_: Any) -> None:
        opened.append(threading.current_thread().name)

    engine = Engine(store, max_concurrent=4, heartbeat=0.2).start()
    try:
        at_start = len(opened)
        root = engine.submit(parse_org(CHART, "<warm>"), "Ship it", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    finally:
        engine.stop()
        store.close()
    assert str(done.status) == "done"
    assert at_start > 0  # opened as the engine started, with the store's first
    assert opened[at_start:] == []


def test_warming_twice_opens_nothing_more(tmp_path: Path) -> None:
    store = open_store(tmp_path / "firm.db")
    opened: list[int] = []
    event.listen(store.engine, "connect", lambda *_: opened.append(1))
    try:
        store.warm(3)
        first = len(opened)
        store.warm(3)
        assert len(opened) == first <= 3
        assert store.get_task  # the store still reads
    finally:
        store.close()


def test_an_engine_told_how_many_sessions_read_at_once_opens_that_many(tmp_path: Path) -> None:
    # A team's run starts at most two sessions at once (a manager's turn and the task it
    # starts), though its chart has a slot per background task: the hint spares the rest.
    opened: dict[int | None, int] = {}
    for hint in (None, 2):
        store = open_store(tmp_path / f"firm-{hint}.db")
        count: list[int] = []
        event.listen(store.engine, "connect", lambda *_, count=count: count.append(1))
        engine = Engine(store, max_concurrent=5, reading_at_once=hint).start()
        try:
            opened[hint] = len(count)
        finally:
            engine.stop()
            store.close()
    assert opened[None] - opened[2] == 3  # one a slot by default; two asked for
