"""Watching a store another process writes: wait, within the subprocess guard, until a
condition holds in it (a kill test's moment to strike)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from firm.store import SqlStore, open_store
from tests.support.cli import SUBPROCESS_GUARD


def wait_in_store(db: Path, ready: Callable[[SqlStore], bool], never: str) -> None:
    """Wait until the store file exists and `ready(store)` holds; fail with `never` if that
    does not happen within SUBPROCESS_GUARD."""
    deadline = time.monotonic() + SUBPROCESS_GUARD
    while not db.exists():
        assert time.monotonic() < deadline, never
        time.sleep(0.02)
    store = open_store(db)
    try:
        while not ready(store):
            assert time.monotonic() < deadline, never
            time.sleep(0.01)
    finally:
        store.close()
