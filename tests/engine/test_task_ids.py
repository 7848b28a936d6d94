"""Root task ids: 64 random bits; ids made with 32 before stay valid."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from firm.store import NewTask, RunSpec, SqlStore, open_store

RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlStore]:
    s = open_store(tmp_path / "firm.db")
    yield s
    s.close()


def test_root_ids_have_64_bits_and_old_ids_still_resolve(sqlite_store: SqlStore) -> None:
    new = sqlite_store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    assert len(new.id) == 2 + 16 and int(new.id[2:], 16) >= 0
    old = sqlite_store.create_run(RUN, NewTask("Old", "", "ceo", "user"), task_id="T-1a2b3c4d")
    assert sqlite_store.get_task(old.id).title == "Old"
    assert sqlite_store.task_ids_with_prefix("T-1a2b") == ["T-1a2b3c4d"]
