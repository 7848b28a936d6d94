"""An engine starting on a store this process has just made looks for nothing left over in
it (sessions of dead workers, calls waiting past their timeout): there is nothing to find.
On a store opened again it still looks, as it always has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event

from firm.engine import Engine
from firm.store import open_store


def _statements_at_start(path: Path) -> list[str]:
    store = open_store(path)
    sent: list[str] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(" ".join(statement.split()))

    engine = Engine(store, max_concurrent=2, heartbeat=30).start()
    engine.stop()
    store.close()
    return sent


def test_an_engine_on_a_store_it_just_made_looks_for_nothing_left_over(tmp_path: Path) -> None:
    path = tmp_path / "firm.db"
    made = _statements_at_start(path)
    again = _statements_at_start(path)
    assert not any("approvals" in s for s in made)
    assert any("approvals" in s for s in again)  # an older store: calls past their timeout
    assert len(made) < len(again)
