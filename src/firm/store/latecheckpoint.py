"""The WAL's checkpoints, run on a thread beside the writes instead of inside a commit (SQLite).

SQLite checkpoints in the commit that takes the WAL past `wal_autocheckpoint` pages (1,000):
that commit copies the WAL into the database file and syncs both before it returns, holding
the write lock — every other writer of the process waits behind it. On this machine's disk
the two syncs are most of a checkpoint (the engine's 1,111-task run: ~19 checkpoints, ~110 ms
of syncs, 0.1 ms a task, more when other processes use the disk), and a 10,001-task cancel
(~700 pages) that crossed the threshold copied ~1,500 pages before returning.

So a thread copies the WAL after every `EVERY` commits of the process (`committed`) and after
a write of `BIG_WRITE` rows or more (`big_write`), and the writer's connection checkpoints in
its commits only past `BACKSTOP` pages (`prepare`), which the thread keeps the WAL below unless
commits are unusually big (a delegation of dozens of tasks writes ~100 pages) or the thread
falls behind. The thread's checkpoint has two steps:

1. Passive checkpoints on a reader's connection, beside the writes: each waits for nobody and
   syncs and copies what the WAL held when it began — another while the writes added more
   than `FEW` frames during the last, `PASSES` at most. (SQLite syncs the store's file only
   in a checkpoint that copied the whole WAL, so that sync is left to the next step. It is
   not synced here through a descriptor of this module's own: closing any descriptor of the
   file drops every POSIX lock the process holds on it, SQLite's included, and another
   process then takes this one's WAL for nobody's — a test of processes sharing a file saw
   its log lose entries.)
2. Another, under the writer lock, on the writer's own connection: it copies the frames the
   writes added meanwhile (a few dozen pages) with two small syncs. Now every frame is in the
   file, and the next write starts the WAL over (SQLite does that in a write that begins with
   the WAL all copied and no reader inside it), so the WAL stays near EVERY commits' pages.
   Without this step the writes go on while the thread copies, the WAL is never all copied
   when one begins and it never starts over (a run's checkpoints on a thread alone were
   measured slower for that).

Durability is as before: with WAL and synchronous=NORMAL no commit waits for a sync, and a
checkpoint syncs the WAL before it copies it (SQLite's own order, in either step); what
moves is which thread pays for the syncs and whether the writers wait for them. The WAL is
synced about as often as before in a busy process (every ~900 pages); one that writes
little leaves it to the backstop (2,000 pages rather than 1,000) or to its close. Other
processes' connections keep SQLite's automatic checkpoint; theirs and ours exclude each
other by SQLite's own checkpoint lock. The store's close joins the thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from sqlalchemy import Connection

from firm import idlethreads
from firm.store.prepared import sqlite_driver

log = logging.getLogger("firm.store")

# Commits between checkpoints: ~900 pages at the engine's ~7 a commit, about SQLite's own
# threshold (1,000 pages), so the WAL stays the size it was.
EVERY = 128
# The writer's own automatic checkpoint, for a WAL the thread did not keep short: twice
# SQLite's default, so in the engine's runs it is not reached.
BACKSTOP = 2000
# Passes beside the writes at most, and the frames added during one below which the next is
# left to the pass under the writer lock.
PASSES = 3
FEW = 64
# Commits a writer may run ahead of the copies beside it before it waits for them: the WAL
# then stays under ~(EVERY + BEHIND) commits' pages however slow the disk.
BEHIND = 256
# Rows a write changes from which its commit starts a checkpoint at once: a cancel of 1,000
# tasks writes some 70 pages; a 10,001-task one ~700, most of a WAL's worth.
BIG_WRITE = 1000


class LateCheckpoints:
    """A store's WAL checkpoints, on a thread (see the module doc); `join` waits for it."""

    def __init__(
        self,
        writer: threading.Lock,
        read: Callable[[], AbstractContextManager[Connection]],
        kept: Callable[[], Connection | None],
    ):
        self._writer = writer  # held around every write of the store's
        self._read = read  # a connection for one statement outside any transaction
        self._kept = kept  # the writer's connection (the caller holds the writer lock)
        self._commits = 0
        self._lock = threading.Lock()
        self._job: idlethreads.Job | None = None
        self._running = False  # a job copies, or is about to
        self._behind = 0  # commits since the copies beside the writes began
        self._copied = threading.Event()  # set once they are done (or failed)
        self._again = False  # asked for while one runs: it runs once more
        self._held: Connection | None = None  # a big write's, its automatic checkpoint off

    @staticmethod
    def prepare(conn: Connection) -> None:
        """A fresh writer's connection: its commits checkpoint only past BACKSTOP pages. On
        the driver, unseen by statement listeners: a setting of the connection's, not a
        statement of a write's."""
        sqlite_driver(conn).execute(f"PRAGMA wal_autocheckpoint={BACKSTOP}")

    def committed(self) -> None:
        """After each commit of the writer's (under the writer lock). A writer that ran
        `BEHIND` commits ahead of the copies beside it waits for them, holding the writer lock
        (they do not take it), as a commit that checkpointed waited for its own: without
        that a writer faster than the disk grows the WAL without bound."""
        self._commits += 1
        if self._held is not None:
            self._restore()
        if self._running:
            self._behind += 1
            if self._behind >= BEHIND:
                self._behind = 0
                self._copied.wait()
        if self._commits >= EVERY:
            self.start()

    def hold(self, conn: Connection) -> None:
        """Inside a big write (the caller holds the writer lock): its commit checkpoints
        nothing, whatever the WAL's size; the thread started after it copies instead. The
        backstop is SQLite's check after each commit, so a big commit that took the WAL past it
        copied the whole WAL and synced it before returning: a 10,001-task cancel's ~700
        pages crossed it in about one cancel of ten in cancel_subtree.py, 15-25 ms more. The WAL
        may so pass BACKSTOP by one write's pages before the thread copies them."""
        sqlite_driver(conn).execute("PRAGMA wal_autocheckpoint=0")
        self._held = conn

    def release(self) -> None:
        """After a big write: the backstop back on, had the write ended without a commit."""
        if self._held is not None:
            with self._writer:
                if self._held is not None:
                    self._restore()

    def _restore(self) -> None:
        conn, self._held = self._held, None
        if conn is not None and not conn.closed and not conn.invalidated:
            self.prepare(conn)

    def start(self) -> None:
        """A checkpoint now, or once more after the one running."""
        with self._lock:
            self._commits = 0
            if self._running:
                self._again = True
                return
            self._running = True
            self._behind = 0
            self._copied.clear()
            try:
                self._job = idlethreads.run(self._run, "firm-checkpoint")
            except RuntimeError:  # no thread to be had: the writer's backstop checkpoints
                self._running = False
                self._copied.set()

    def join(self) -> None:
        while True:
            with self._lock:
                job = self._job
            if job is None:
                return
            job.join()
            with self._lock:
                if self._job is job:
                    return

    def _run(self) -> None:
        try:
            self._cycles()
        except BaseException:  # no writer waits for it, and the next start runs one
            self._copied.set()
            with self._lock:
                self._running = False
            raise

    def _cycles(self) -> None:
        while True:
            try:
                # Beside the writes, again while they added more than a few frames meanwhile:
                # what is left for the writer lock is then a few frames and their syncs.
                before = None
                for _ in range(PASSES):
                    frames = copy_wal(self._read)
                    if before is not None and frames - before <= FEW:
                        break
                    before = frames
            except Exception:  # the next one, or the close's, copies what this did not
                log.exception("store: a WAL checkpoint failed")
            self._copied.set()
            try:
                with self._writer:
                    conn = self._kept()
                    if conn is not None:
                        sqlite_driver(conn).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except Exception:  # the next one, or the close's, copies what this did not
                log.exception("store: a WAL checkpoint failed")
            with self._lock:
                if not self._again:
                    self._running = False
                    return
                self._again = False
                self._behind = 0
                self._copied.clear()


def copy_wal(read: Callable[[], AbstractContextManager[Connection]]) -> int:
    """One passive checkpoint on a reader's connection: it waits for nobody and copies what
    it can. On the driver, so it is no statement of anyone's (listeners count those).
    Returns the WAL's frames as it began (-1 when there is no WAL)."""
    with read() as conn:
        row = sqlite_driver(conn).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(row[1]) if row is not None else -1


class BigWrite:
    """A write that may turn out big: `rows` says how many rows it changes, inside it."""

    def __init__(self, late: LateCheckpoints | None):
        self._late = late  # None on PostgreSQL
        self.big = False

    def rows(self, n: int, conn: Connection) -> None:
        """Inside the write (on its connection, `conn`): a big one's commit leaves its
        checkpoint to the thread, started once the write ends."""
        if self._late is not None and n >= BIG_WRITE and not self.big:
            self.big = True
            self._late.hold(conn)


@contextlib.contextmanager
def big_write(late: LateCheckpoints | None) -> Iterator[BigWrite]:
    """Around a write (`with big_write(...) as big, store._write() as tx:`): when it said it
    is big, a checkpoint starts once its transaction has ended, committed or not."""
    big = BigWrite(late)
    try:
        yield big
    finally:
        if big.big and late is not None:
            late.release()
            late.start()
