"""The index on held_by_plan holds only the tasks that name a plan (schema 0007): the
questions asked of it, a plan's held tasks and the update that frees them, must still be
seeks on it, or approving a plan walks every task of the store."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import update

from firm.store import open_store, schema
from firm.tasks import Status

T = schema.tasks


def test_a_plans_held_tasks_are_a_seek_on_the_partial_index(tmp_path: Path) -> None:
    store = open_store(tmp_path / "firm.db")
    try:
        held = T.c.held_by_plan == "A-1"
        todo = T.c.status == str(Status.TODO)  # bound, as store/plans.py asks it
        asked = [
            T.select().where(held, todo),
            update(T).where(held, todo).values(held_by_plan=None, updated_at=1.0),
        ]
        with store.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            for stmt in asked:
                compiled = stmt.compile(dialect=conn.dialect)
                args = ["x"] * len(compiled.positiontup or [])
                plan = [r[3] for r in raw.execute(f"EXPLAIN QUERY PLAN {compiled}", args)]
                assert any("USING INDEX ix_tasks_held_by_plan" in step for step in plan), plan
    finally:
        store.close()
