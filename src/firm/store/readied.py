"""A new SQLite connection given the process's statements compiled, off the run's path.

SQLite compiles a statement the first time a connection runs it (the driver keeps what it
compiled per connection), so in a store opened anew every statement of the engine's is
compiled once more inside the write or read that first runs it: in the makespan's run
(benchmarks/makespan.py, a new store each run) the CEO's delegation commit took 1.5-1.6 ms
of CPU against 0.9-1.0 for the managers' after it, and the first leaf's settle 0.65-0.75
against 0.25-0.3, both on the run's critical path. A process that opens stores one after
another — the Team API opens its store at every start(), tests and benchmarks a new one
each time — paid that at every run.

So as an engine starts on a SQLite store, a thread compiles on the writer's connection
(which serves every write, and the reads between writes) the SQL this process has run on a
store before (compiled.known_texts: every statement that passed through store/prepared.py,
and the log's linked insert), while the first session's model thinks: each statement under
the writer lock on its own, between writes, so a write waits for one compile at most. A
statement is compiled by an `executemany` with no rows, which runs nothing (the driver
compiles, then refuses a SELECT: compiled all the same). The first store of a process has
nothing to compile ahead, and a long-lived store's connections compile each statement once
in their life anyway: there nothing changes. Nothing here changes what any statement does.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable

# How long a compile waits for a write to let the writer's connection go before it gives the
# rest up (the writes then compile what they run, as before).
WAIT_FOR_WRITER = 0.1


def compile_all(driver: sqlite3.Connection, texts: Iterable[str]) -> None:
    """Compile each SQL text on the connection, running none."""
    cursor = driver.cursor()
    try:
        for sql in texts:
            compile_one(cursor, sql)
    finally:
        cursor.close()


def compile_one(cursor: sqlite3.Cursor, sql: str) -> None:
    # A SELECT is refused here after it was compiled; any other error is the first run's to
    # meet and report.
    with contextlib.suppress(sqlite3.Error):
        cursor.executemany(sql, ())
