"""A new store's writer connection is given the process's statements compiled as an engine
starts on it (store/readied.py): compiling runs nothing, and runs, closes and stops go on as
before around it."""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.engine import Engine
from firm.org import parse_org
from firm.store import open_store, readied
from firm.store.compiled import known_texts
from firm.store.prepared import sqlite_driver
from firm.tasks import Status

CHART = """\
company: Ahead Co
agents:
  - {id: ceo, name: C, title: CEO}
  - {id: a, name: A, title: Engineer, reports_to: ceo}
  - {id: b, name: B, title: Engineer, reports_to: ceo}
"""


def run_once(db: Path, ws: Path) -> None:
    with Firm(db) as firm:
        root = firm.submit(parse_org(CHART, "<ahead>"), "Ship it", workspace=ws)
        done = firm.run_until(root.id, timeout=60)
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert done.status == Status.DONE
    assert report.verified, [c.line() for c in report.checks]


def test_compiling_every_known_statement_writes_nothing(tmp_path: Path) -> None:
    run_once(tmp_path / "first.db", tmp_path / "ws1")  # the process now knows the statements
    assert any(sql.startswith("INSERT INTO events") for sql in known_texts())
    store = open_store(tmp_path / "second.db")
    try:
        driver = sqlite_driver(store._group.idle())
        before = driver.total_changes
        readied.compile_all(driver, known_texts())
        assert driver.total_changes == before
        assert not driver.in_transaction
        assert store.last_seq() == 0
        assert store.counts() == {}
    finally:
        store.close()
    run_once(tmp_path / "second.db", tmp_path / "ws2")  # and the store works as ever


def test_runs_one_new_store_after_another(tmp_path: Path) -> None:
    for i in range(3):
        run_once(tmp_path / f"run{i}.db", tmp_path / f"ws{i}")


def test_a_store_closes_while_its_statements_are_compiled(tmp_path: Path) -> None:
    run_once(tmp_path / "first.db", tmp_path / "ws")
    store = open_store(tmp_path / "second.db")
    engine = Engine(store, max_concurrent=2, heartbeat=0.2).start()  # starts the compiling
    engine.stop()
    store.close()  # waits for it to stop at its next statement
    assert store._readying is None


def test_a_store_closes_at_once_while_its_compiling_waits_to_start(tmp_path: Path) -> None:
    # What Team.start asks: the statements compiled once the run's first model call is out.
    # A close meanwhile ends the wait (else the pytest timeout fails this test).
    run_once(tmp_path / "first.db", tmp_path / "ws")
    store = open_store(tmp_path / "second.db")
    store.background_delay = 3600.0
    engine = Engine(store, max_concurrent=2, heartbeat=0.2).start()
    engine.stop()
    store.close()
    assert store._readying is None


def test_a_run_ends_signed_when_the_start_ups_background_work_waits(tmp_path: Path) -> None:
    # The audit key's early load waits as the compiling does; the run's end signs with the
    # key loaded when it is needed, and the engine stops without waiting out the delay.
    store = open_store(tmp_path / "firm.db")
    store.background_delay = 3600.0
    engine = Engine(store, max_concurrent=2, heartbeat=0.2).start()
    try:
        root = engine.submit(parse_org(CHART, "<ahead>"), "Ship it", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    finally:
        engine.stop()
    try:
        assert done.status == Status.DONE
        assert store.events_after(0, 100_000)[-1].kind == "checkpoint"
    finally:
        store.close()
    with Firm(tmp_path / "firm.db") as firm:
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]
