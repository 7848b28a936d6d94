"""The statements that ask about open tasks stay seeks on the open-only indexes (schema 0006).

A partial index is used only when the query says the index's predicate in its own terms
(store/schema.py: is_open, claimable, status_is). Said another way — `status IN (...)`, a
bound status — the query still answers right but walks every sibling or every task, and the
store slows as it grows; nothing else would notice, so the plans are checked here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.sql import ClauseElement

from firm.store import NewTask, RunSpec, SqlStore, open_store
from firm.store import queries as Q
from firm.store.cancel import CANCEL, CANCEL_RANGE, CANCEL_ROWS
from firm.store.delegation import SETTLE_ENDED_HELD, SETTLE_ENDED_HELD_QUEUED_AT_HEAD
from firm.store.handover import AHEAD_OF_ONE
from firm.store.yielding import YIELD_COUNTS

RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)


@pytest.fixture(params=["as created", "plain indexes last"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SqlStore]:
    s = open_store(tmp_path / "firm.db")
    if request.param == "plain indexes last":
        # SQLite's planner breaks a tie between two usable indexes by the one made last, and
        # the order create_all makes a table's indexes in follows a set's: the open indexes
        # must win on their own merits, whichever came first.
        with s.engine.begin() as conn:
            for name, column in (
                ("ix_tasks_parent_id", "parent_id"),
                ("ix_tasks_root_id", "root_id"),
            ):
                conn.exec_driver_sql(f"DROP INDEX {name}")
                conn.exec_driver_sql(f"CREATE INDEX {name} ON tasks ({column})")
    root = s.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    s.claim("w", 1, 60)
    s.delegate_many(
        root.id, 0, [([], NewTask(f"Part {i}", "", "eng", "ceo")) for i in range(3)], "w"
    )
    yield s
    s.close()


def plan(store: SqlStore, stmt: ClauseElement) -> list[str]:
    with store.engine.connect() as conn:
        compiled = stmt.compile(dialect=conn.dialect)
        args = [
            5 if "limit" in name else "x" for name in compiled.positiontup or []
        ]  # the plan does not depend on the values
        raw = conn.connection.driver_connection
        assert raw is not None
        return [r[3] for r in raw.execute(f"EXPLAIN QUERY PLAN {compiled}", args)]


@pytest.mark.parametrize(
    ("stmt", "index"),
    [
        (Q.CLAIM_PICK, "ix_tasks_claim"),
        (Q.CLAIM_TOP, "ix_tasks_claim"),
        (Q.CLAIM_TOP_CAPPED, "ix_tasks_claim"),
        (Q.CLAIM_TOP_CAPPED, "ix_tasks_open"),  # the running sessions, under a cap
        (AHEAD_OF_ONE, "ix_tasks_claim"),
        (Q.WAKE, "ix_tasks_open"),
        (Q.OPEN_CHILDREN, "ix_tasks_open"),
        (YIELD_COUNTS, "ix_tasks_open"),
        (SETTLE_ENDED_HELD, "ix_tasks_open"),
        (SETTLE_ENDED_HELD_QUEUED_AT_HEAD, "ix_tasks_open"),
        (SETTLE_ENDED_HELD_QUEUED_AT_HEAD, "ix_tasks_claim"),  # is anything queued
        (Q.OPEN_WORK, "ix_tasks_open"),
        (Q.RUNNING_COUNT, "ix_tasks_open"),
        (CANCEL, "ix_tasks_open"),  # a run's root: its run's open tasks
        (CANCEL, "ix_tasks_parent_id"),  # any other task: the walk down its subtree
    ],
)
def test_a_question_about_open_tasks_is_a_seek_on_an_open_index(
    store: SqlStore, stmt: ClauseElement, index: str
) -> None:
    steps = plan(store, stmt)
    assert any(index in s for s in steps), steps
    # a scan of no table (a SELECT of scalar subqueries), of the cancel walk's own levels,
    # of the ids of one level (json_each over them, each a seek on the parent index) or of
    # the chain head's one row (SQLite's head is a view of the last entry) is fine
    allowed = (
        "SCAN CONSTANT ROW",
        "SCAN level",
        "SCAN p VIRTUAL TABLE INDEX 1:",
        "SCAN chain_head",
    )
    scans = [s for s in steps if s.startswith("SCAN") and s not in allowed]
    assert not scans, steps
    assert not any("TEMP B-TREE" in s for s in steps), steps


def test_a_cancel_changes_the_rows_it_found_by_their_rowid(store: SqlStore) -> None:
    # CANCEL finds the open subtree; the UPDATE after it is handed the rowids, not the search
    steps = plan(store, CANCEL_ROWS)
    assert "SEARCH tasks USING INTEGER PRIMARY KEY (rowid=?)" in steps, steps
    assert not any(s.startswith("SCAN tasks") for s in steps), steps


def test_a_cancel_of_consecutive_rows_changes_a_range_of_them(store: SqlStore) -> None:
    steps = plan(store, CANCEL_RANGE)
    assert "SEARCH tasks USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in steps, steps
    assert not any(s.startswith("SCAN tasks") for s in steps), steps
