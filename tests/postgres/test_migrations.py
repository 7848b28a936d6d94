"""Schema migrations on both backends: `firm db upgrade`, what they build, old and new stores."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, insert, text
from sqlalchemy import inspect as sa_inspect
from tests.support import firm_cli
from tests.support.brains import TEAM

from firm.api import Firm
from firm.errors import StoreError
from firm.store import SqlStore, open_store, schema
from firm.store.migrate import head_revision


def test_the_head_revision_is_the_one_the_code_expects():
    assert head_revision() == schema.HEAD_REVISION


def _differences(conn) -> list:  # type: ignore[no-untyped-def]
    """Where the database differs from store/schema.py. On SQLite the chain head is a view of
    the last entry (revision 0009), compared by its columns."""
    sqlite = conn.dialect.name == "sqlite"

    def include(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
        return not (sqlite and type_ == "table" and name == "chain_head")

    context = MigrationContext.configure(conn, opts={"include_object": include})
    diff = compare_metadata(context, schema.metadata)
    if sqlite:
        columns = [c["name"] for c in sa_inspect(conn).get_columns("chain_head")]
        if "chain_head" not in sa_inspect(conn).get_view_names() or columns != [
            "id",
            "seq",
            "hash",
        ]:
            diff.append(("chain_head view", columns))
    return diff


def test_migrations_build_exactly_the_tables_the_code_uses(store):
    with store.engine.connect() as conn:
        assert _differences(conn) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_db_upgrade_creates_the_schema_and_is_idempotent(backend, tmp_path, request):
    if backend == "sqlite":
        db = str(tmp_path / "new.db")
    else:
        db = request.getfixturevalue("pg_server").create_database(migrated=False)
    first = firm_cli("db", "upgrade", "--db", db, "--json", cwd=tmp_path, check=True)
    again = firm_cli("db", "upgrade", "--db", db, "--json", cwd=tmp_path, check=True)
    assert json.loads(first.stdout)["from"] is None
    assert json.loads(first.stdout)["to"] == schema.HEAD_REVISION
    assert json.loads(again.stdout)["from"] == json.loads(again.stdout)["to"]
    listed = firm_cli("tasks", "--db", db, "--json", cwd=tmp_path, check=True)
    assert json.loads(listed.stdout) == []
    human = firm_cli("db", "upgrade", "--db", db, cwd=tmp_path, check=True)
    assert "already at schema revision" in human.stdout


def test_a_postgres_store_that_was_never_upgraded_says_what_to_run(pg_server, tmp_path):
    url = pg_server.create_database(migrated=False)
    with pytest.raises(StoreError, match="firm db upgrade"):
        open_store(url)
    out = firm_cli("tasks", "--db", url, cwd=tmp_path)
    assert out.returncode == 2
    assert "firm db upgrade" in out.stderr and "Traceback" not in out.stderr


def test_upgrades_started_at_once_take_turns(pg_server):
    url = pg_server.create_database(migrated=False)
    stores = [open_store(url, check_schema=False) for _ in range(3)]
    results: list = []
    barrier = threading.Barrier(3)

    def go(store: SqlStore) -> None:
        barrier.wait()
        results.append(store.upgrade_schema())

    threads = [threading.Thread(target=go, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert sorted(results, key=str) == sorted(
        [(None, schema.HEAD_REVISION)] + [(schema.HEAD_REVISION,) * 2] * 2, key=str
    )
    store = open_store(url)
    assert store.last_seq() == 0
    store.close()


def test_a_sqlite_store_from_before_migrations_is_adopted_with_its_data(tmp_path: Path):
    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # what firm wrote before it had migrations
        before = [t for t in schema.metadata.sorted_tables if t.name != "approvals"]
        schema.metadata.create_all(conn, tables=before)
        # 0006's (and 0008's) partial indexes on open tasks (the claim index's names a later
        # column).
        for index in ("ix_tasks_claim", "ix_tasks_open"):
            conn.execute(text(f"DROP INDEX {index}"))
        # Nor the columns later revisions add (0003: a subtask's plan).
        conn.execute(text("DROP INDEX ix_tasks_held_by_plan"))
        conn.execute(text("ALTER TABLE tasks DROP COLUMN held_by_plan"))
        # 0005: the seq of the cancel entry that ended a task.
        conn.execute(text("ALTER TABLE tasks DROP COLUMN cancelled_by_seq"))
        # And the single-column indexes 0004 reshaped (0006 brought back the same two on
        # parent_id and root_id).
        conn.execute(text("DROP INDEX ix_events_task_kind"))
        conn.execute(text("CREATE INDEX ix_tasks_claim ON tasks (status, priority, created_at)"))
        conn.execute(text("CREATE INDEX ix_events_task_id ON events (task_id)"))
        conn.execute(insert(schema.meta).values(key="schema_version", value="1"))
        conn.execute(insert(schema.chain_head).values(id=1, seq=0, hash="0" * 64))
    engine.dispose()
    store = open_store(path)
    from pg_helpers import new_root

    root = new_root(store)
    assert store.get_task(root.id).title == "goal"
    with store.engine.connect() as conn:
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    assert version == schema.HEAD_REVISION  # adopted at 0001, then migrated to the head
    store.close()


def test_a_sqlite_stores_head_row_becomes_a_view_of_its_last_entry(tmp_path: Path):
    from alembic import command
    from sqlalchemy.exc import OperationalError

    from firm.store import migrate

    def note(text: str) -> list:
        return [("thought", None, "ceo", {"text": text})]

    path = tmp_path / "firm.db"
    store = open_store(path)
    store.append_events(note("before") * 3)
    with store.engine.begin() as conn:  # back to 0008: the head a row again, at the last entry
        command.downgrade(migrate._config(conn), "0008")
        row = conn.execute(text("SELECT id, seq, hash FROM chain_head")).all()
    last = store.events_after(0)[-1]
    assert row == [(1, last.seq, last.hash)]
    store.close()

    store = open_store(path)  # migrated again: the head is the last entry
    store.append_events(note("after") * 2)
    events = store.events_after(0)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert all(e.prev_hash == before.hash for before, e in itertools.pairwise(events))
    with store.engine.begin() as conn:
        assert conn.execute(text("SELECT seq, hash FROM chain_head")).one() == (5, events[-1].hash)
        # A firm from before 0009 that still had the store open writes nothing: its commit
        # moves the head row, which is a view now.
        with pytest.raises(OperationalError, match="view"):
            conn.execute(text("UPDATE chain_head SET seq = 6, hash = 'x' WHERE id = 1"))
    store.close()


def test_a_store_migrated_by_a_newer_firm_refuses_to_open(store):
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(StoreError, match="newer firm"):
        SqlStore(store.url)


def _schema_dump(engine) -> dict:
    """Everything a schema is made of, as the database itself reports it, and the rows the
    schema starts with."""
    with engine.connect() as conn:
        insp = sa_inspect(conn)
        dump: dict = {}
        for table in sorted(insp.get_table_names()):
            dump[table] = {
                "columns": [
                    (c["name"], str(c["type"]), c["nullable"], c.get("autoincrement"))
                    for c in insp.get_columns(table)
                ],
                "pk": insp.get_pk_constraint(table)["constrained_columns"],
                "indexes": sorted(
                    (
                        i["name"],
                        tuple(i["column_names"]),
                        bool(i["unique"]),
                        # a partial index's predicate (sqlite_where, postgresql_where)
                        tuple(sorted((k, str(v)) for k, v in i["dialect_options"].items())),
                    )
                    for i in insp.get_indexes(table)
                ),
                "unique": sorted(
                    tuple(u["column_names"]) for u in insp.get_unique_constraints(table)
                ),
            }
        for table in ("alembic_version", "chain_head", "meta"):
            dump[f"rows:{table}"] = [tuple(r) for r in conn.execute(text(f"SELECT * FROM {table}"))]
    return dump


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_new_store_is_created_at_head_with_the_schema_the_migrations_build(
    backend, tmp_path, request
):
    from firm.store import migrate

    if backend == "sqlite":
        urls = [f"sqlite:///{tmp_path / 'stepwise.db'}", f"sqlite:///{tmp_path / 'fresh.db'}"]
    else:
        server = request.getfixturevalue("pg_server")
        urls = [server.create_database(migrated=False) for _ in range(2)]
    stepwise, fresh = (open_store(url, check_schema=False) for url in urls)
    try:
        assert migrate.upgrade(stepwise.engine, stepwise=True) == (None, schema.HEAD_REVISION)
        assert migrate.upgrade(fresh.engine) == (None, schema.HEAD_REVISION)
        assert _schema_dump(fresh.engine) == _schema_dump(stepwise.engine)
        with fresh.engine.connect() as conn:
            assert _differences(conn) == []
        # Both are ordinary stores from here on: a second upgrade finds nothing to do.
        assert migrate.upgrade(fresh.engine) == (schema.HEAD_REVISION, schema.HEAD_REVISION)
        assert migrate.upgrade(stepwise.engine) == (schema.HEAD_REVISION, schema.HEAD_REVISION)
    finally:
        stepwise.close()
        fresh.close()


def test_a_new_sqlite_store_is_written_with_the_schema_the_migrations_build(tmp_path):
    from firm.store import migrate

    stepwise = open_store(tmp_path / "stepwise.db", check_schema=False)
    fresh = open_store(tmp_path / "fresh.db")  # written whole from the schema's image
    try:
        assert migrate.upgrade(stepwise.engine, stepwise=True) == (None, schema.HEAD_REVISION)
        assert _schema_dump(fresh.engine) == _schema_dump(stepwise.engine)
        assert migrate.upgrade(fresh.engine) == (schema.HEAD_REVISION, schema.HEAD_REVISION)
        with fresh.engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        again = open_store(tmp_path / "fresh.db")
        assert fresh.created and not again.created  # made by the first open only
        again.close()
    finally:
        stepwise.close()
        fresh.close()


def test_stores_opened_at_once_on_one_new_file_share_it(tmp_path):
    path = tmp_path / "new.db"
    barrier = threading.Barrier(4)
    opened: list = []

    def open_one() -> None:
        barrier.wait()
        opened.append(open_store(path))

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(opened) == 4
        with Firm(path) as firm:
            root = firm.submit(TEAM, "One store for all")
        assert {store.get_task(root.id).title for store in opened} == {"One store for all"}
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("new.db")) == []
    finally:
        for store in opened:
            store.close()


def test_a_new_store_does_not_take_the_wal_a_removed_store_left(tmp_path, caplog):
    path = tmp_path / "firm.db"
    with Firm(path) as firm:
        firm.submit(TEAM, "A goal of the removed store")
        # What a kill -9 leaves beside the file: its WAL, with the run in it.
        kept = (tmp_path / "firm.db-wal").read_bytes()
    path.unlink()  # the store removed to start afresh, its WAL left behind
    (tmp_path / "firm.db-wal").write_bytes(kept)

    fresh = open_store(path)
    try:
        assert fresh.created
        assert fresh.events_after(0) == []  # nothing of the removed store came back
        with Firm(path) as firm:
            root = firm.submit(TEAM, "A new goal")
        assert fresh.get_task(root.id).title == "A new goal"
        with fresh.engine.connect() as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
    finally:
        fresh.close()
    assert "left over from a store no longer there" in caplog.text
