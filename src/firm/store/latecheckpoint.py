"""A big write's WAL checkpoint, run after its commit instead of inside it (SQLite).

SQLite checkpoints in the commit that takes the WAL past `wal_autocheckpoint` pages (1,000):
that commit copies every page of the WAL into the database file and syncs it before it
returns. A 10,001-task cancel writes ~700 pages, so when the WAL already held a few hundred
its commit paid for copying ~1,500 (the cancel's 44–47 ms became 52–64 ms). A write that
knows it is big (`BIG_WRITE` rows or more) turns the automatic checkpoint off on its own
connection for its commit (`defer`), and a thread copies the WAL once the commit is done
(`after`), then turns it back on.

The WAL stays bounded: the thread's checkpoint is a passive one, which waits for nobody and
copies what it can (all of it unless another process reads an older snapshot); SQLite
starts the WAL over at the next write that begins with every frame copied; and once the
automatic checkpoint is back, any commit past the threshold copies what the writes in
between added. Only the big write's connection goes without it, between its commit and the
thread's end. A whole run's checkpoints moved to a thread was measured slower (the writes
go on while it copies, so the WAL is never all copied when one begins and never restarts);
this is one checkpoint after one write.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from sqlalchemy import Connection

from firm.store.prepared import sqlite_driver

log = logging.getLogger("firm.store")

# Rows a write changes from which its commit leaves the checkpoint to a thread: a cancel of
# 1,000 tasks writes some 70 pages, a tenth of the WAL's threshold, and a thread costs about
# what a few small statements do.
BIG_WRITE = 1000
AUTOCHECKPOINT = 1000  # SQLite's default, which every connection of a store keeps


class LateCheckpoints:
    """The checkpoints a store's big writes left to threads; `join` waits for them (close)."""

    def __init__(
        self,
        writer: threading.Lock,
        read: Callable[[], AbstractContextManager[Connection]],
    ):
        self._writer = writer  # held around every write of the store's (SQLite)
        self._read = read  # a connection for one statement outside any transaction
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def defer(self, conn: Connection) -> sqlite3.Connection:
        """Inside a write transaction: its commit will not checkpoint. Returns the driver
        connection, for `after`, which must follow (in a `finally`)."""
        driver = sqlite_driver(conn)
        # On the driver, unseen by statement listeners: a setting of the connection's, not a
        # statement of the write's (a test counts those: the same for any subtree's size).
        driver.execute("PRAGMA wal_autocheckpoint=0")
        return driver

    def after(self, driver: sqlite3.Connection) -> None:
        """Once the write's transaction has ended (committed or not): the checkpoint, then
        the automatic checkpoint back on that connection, in a thread."""
        thread = threading.Thread(
            target=self._checkpoint, args=(driver,), name="firm-checkpoint", daemon=True
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def join(self) -> None:
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()

    def _checkpoint(self, driver: sqlite3.Connection) -> None:
        try:
            copy_wal(self._read)
        except Exception:  # the automatic checkpoint, back below, does it at a later commit
            log.exception("store: a checkpoint after a big write failed")
        finally:
            # Under the writer lock: no transaction of the store's is open on that connection
            # (whether it is still the writers' or went back to the pool after a failure).
            with self._writer, contextlib.suppress(sqlite3.Error):
                driver.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT}")


def copy_wal(read: Callable[[], AbstractContextManager[Connection]]) -> None:
    """One passive checkpoint on a reader's connection: it waits for nobody and copies what
    it can. On the driver, so it is no statement of anyone's (listeners count those)."""
    with read() as conn:
        sqlite_driver(conn).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


class BigWrite:
    """A write that may turn out big: `rows` says how many rows it changes, inside it."""

    def __init__(self, late: LateCheckpoints | None):
        self._late = late  # None on PostgreSQL
        self.deferred: sqlite3.Connection | None = None

    def rows(self, conn: Connection, n: int) -> None:
        if self._late is not None and n >= BIG_WRITE and self.deferred is None:
            self.deferred = self._late.defer(conn)


@contextlib.contextmanager
def big_write(late: LateCheckpoints | None) -> Iterator[BigWrite]:
    """Around a write (`with big_write(...) as big, store._write() as tx:`): when it said it
    is big, its checkpoint starts once its transaction has ended, committed or not."""
    big = BigWrite(late)
    try:
        yield big
    finally:
        if big.deferred is not None and late is not None:
            late.after(big.deferred)
