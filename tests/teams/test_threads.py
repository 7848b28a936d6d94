"""A team's run starts no thread of firm's once a run has gone before it in the process: its
engine's scheduler, its sessions, its model calls and its audit key's loading run on threads
an earlier run left idle (firm/idlethreads.py), not on threads started for them."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from firm import idlethreads
from firm.store import open_store
from firm.testing import ModelServer, ScriptedModel, text
from tests.teams.conftest import two_task_team


@pytest.fixture
def started_threads() -> Iterator[list[str]]:
    """The names of the threads started while the test runs, as each begins."""
    names: list[str] = []

    def first_call(frame: FrameType, event: str, arg: Any) -> None:
        names.append(threading.current_thread().name)
        sys.setprofile(None)  # one look per thread is all this needs

    threading.setprofile(first_call)
    try:
        yield names
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]


def test_a_second_team_run_starts_no_thread_of_firms(
    server: ModelServer, model: ScriptedModel, tmp_path: Path, started_threads: list[str]
) -> None:
    model.when().always(text("done"))
    first = two_task_team(tmp_path / "a" / "firm.db", tmp_path, process="sequential")
    assert first.start() == "done"
    # As many idle as the run has jobs at once, so a thread of the first run still ending
    # its last job (a model call's, after its reply is in) is not taken for a new one.
    idlethreads.keep_ready(8)
    del started_threads[:]
    # A new store, so a new key too.
    second = two_task_team(tmp_path / "b" / "firm.db", tmp_path, process="sequential")
    assert second.start() == "done"
    assert len(server.requests) == 2 * 2  # a model call per task, each run
    assert [n for n in started_threads if n.startswith("firm")] == []
    store = open_store(tmp_path / "b" / "firm.db")
    try:  # the run's end is signed, by the key loaded on an idle thread
        assert [e.kind for e in store.events_after(0, 1_000_000)][-1] == "checkpoint"
    finally:
        store.close()
