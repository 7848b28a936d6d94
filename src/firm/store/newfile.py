"""A new SQLite store written whole, from an image of the schema at head.

Creating the schema in a new file is some fifty DDL statements, each re-reading SQLite's
schema as it grows, with SQLAlchemy checking for every table first, then a schema check
that reflects the tables again: 20–30 ms on each open of a new store, which a program that
starts a run in a new store each time (every `Team.start()` with a new db, every test)
pays every time. The schema is built once per process in memory, by the same
`migrate.create_at_head` as before, and each new store is that image written to disk.

The file appears whole or not at all: the image is written beside it, synced, and
hard-linked into place, which fails if another process created the file first (that
process's store is then opened as any existing one is). Where that cannot be done (no hard
links, no serialize), nothing is written and the store is created the old way.

The sync (2.5-6 ms on this disk, the longest wait of a team's start) runs on one of the
process's idle threads while the opener builds what needs no file: the SQLAlchemy engine
and the store's writers (`Placing.wait`, before the first connection). The order on disk is
the same: the name is linked only once the pages are synced.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import create_engine
from sqlalchemy.pool import StaticPool

from firm import idlethreads
from firm.store import migrate
from firm.store.prepared import sqlite_driver

log = logging.getLogger("firm.store")

_lock = threading.Lock()
_creating = threading.Lock()
_image: list[bytes] = []


def schema_image() -> bytes:
    """The bytes of an SQLite database holding the head schema and its first rows."""
    with _lock:
        if not _image:
            engine = create_engine("sqlite://", poolclass=StaticPool)
            try:
                with engine.begin() as conn:
                    migrate.create_at_head(conn)
                    image = bytearray(sqlite_driver(conn).serialize())
            finally:
                engine.dispose()
            # The file format's read and write versions (bytes 18 and 19): 2 is WAL. A file
            # written so opens in WAL mode, as SQLite leaves one it converted itself; the
            # conversion at the first connection would cost a rollback journal and its
            # fsyncs (four on this disk).
            image[18:20] = b"\x02\x02"
            _image.append(bytes(image))
        return _image[0]


def write_new(path: Path) -> Placing | None:
    """Start writing a new store at `path` from the image. None (and nothing written) when
    the file exists already or the image cannot be placed atomically; else the placing under
    way, whose `wait()` says whether the store got its name."""
    # One at a time in a process, from the look at `path` to its name: another thread's look
    # then finds the store this one made, never a moment where it looks gone while its WAL
    # is already there (which _drop_orphans would take as left over). Released by the
    # placing's thread once the name is linked, or could not be.
    _creating.acquire()
    handed = False
    try:
        if path.exists() or not hasattr(sqlite3.Connection, "serialize"):
            return None
        _drop_orphans(path)
        part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
        try:
            file = open(part, "wb")  # noqa: SIM115 - closed by the placing's thread
        except OSError:
            return None
        try:
            file.write(schema_image())
            file.flush()
            placing = Placing(path, part, file)
            handed = True
        except BaseException as exc:
            file.close()
            with contextlib.suppress(OSError):
                part.unlink()
            if isinstance(exc, OSError):
                return None
            raise
        placing.entered()
        return placing
    finally:
        if not handed:
            _creating.release()


class Placing:
    """A new store's image, written beside its name, being synced and linked into place on
    one of the process's idle threads (starting one waited for the interpreter lock)."""

    def __init__(self, path: Path, part: Path, file: BinaryIO):
        self._path = path
        self._part = part
        self._named = False
        self._syncing = threading.Event()  # the thread is in its sync, or done
        self._settled = threading.Event()  # linked, or given up
        self.job = idlethreads.run(lambda: self._place(file), "firm-store-name")

    def entered(self) -> None:
        """Wait until the thread is in its sync. It takes the interpreter lock only to
        enter it, and lets it go there; not waited for, the caller's work would keep it
        out for up to a switch interval (5 ms)."""
        self._syncing.wait()

    def wait(self) -> idlethreads.Job | None:
        """Wait for the name. The thread that syncs the folder the name is in (joined before
        the store closes) if the store has it; None (nothing of it on disk) if it could
        not be placed: the file appeared meanwhile, or no hard links here."""
        self._settled.wait()
        return self.job if self._named else None

    def _place(self, file: BinaryIO) -> None:
        try:
            self._named = self._link(file)
        finally:
            self._syncing.set()
            _creating.release()
            self._settled.set()
        if self._named:
            # The name on disk takes one more fsync (~4 ms here, as the file's), of the
            # folder. It runs beside the store's first work instead of before it: nothing
            # committed until then is on disk either (WAL with synchronous=NORMAL syncs at
            # checkpoints, the first of which is the close's, after this is joined), and a
            # crash before it leaves no store at all.
            _sync_folder(self._path.parent)

    def _link(self, file: BinaryIO) -> bool:
        """Sync the image, then give it its name; False if the name could not be given
        (the file appeared meanwhile, FileExistsError, or no hard links here)."""
        try:
            with file:
                self._syncing.set()
                # On disk before it has a name: after a crash the name is of a whole
                # store or there is none, never a name for pages that were not written.
                os.fsync(file.fileno())
            os.link(self._part, self._path)
            return True
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                self._part.unlink()


def start_wal(driver: sqlite3.Connection) -> None:
    """Start a new store's WAL with one frame written without a sync, on its writer's
    connection (held by the caller, outside any transaction).

    SQLite syncs a WAL's header whenever a write starts it at frame 0, and a WAL file's
    first sync in a connection syncs its folder too: two fsyncs (8-22 ms on this disk) in
    the first commit of every new store, on the critical path of every team run in a new
    store. A WAL with nothing before it has nothing for that sync to keep safe: with
    synchronous=NORMAL no commit is on disk before a checkpoint syncs the WAL (the
    close's, at the latest, which syncs the folder then), and a header lost in a crash
    loses only frames that were not on disk either; the store's pages are (`Placing`).
    So page 1 is written once here with syncs off, and the run's commits append to a
    WAL already started. A WAL restarted after a checkpoint syncs its header as ever."""
    try:
        driver.execute("PRAGMA synchronous=OFF")
        try:
            driver.execute("BEGIN IMMEDIATE")
            driver.execute("PRAGMA user_version=0")  # writes page 1, changes nothing
            driver.execute("COMMIT")
        finally:
            driver.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as exc:  # the first commit starts the WAL, synced, as before
        log.debug("could not start the new store's WAL early: %s", exc)
        with contextlib.suppress(sqlite3.Error):
            driver.rollback()


def _drop_orphans(path: Path) -> None:
    """Remove a WAL and its index left beside a store that is gone (a kill -9 leaves them, and
    a store removed afterwards leaves them behind). SQLite would take them as the new file's
    and replay their pages into it: the removed store's runs back in the new one, or pages
    of another schema. Only a connection to the store writes them, and none can while the
    store does not exist, so with no store at `path` they are left over. (Across processes a
    narrow race is left: another process making the same new store could put its name and
    open it between this one's look and its removal; two processes creating one store at
    the same instant beside a left-over WAL.)"""
    for suffix in ("-wal", "-shm"):
        orphan = path.with_name(path.name + suffix)
        with contextlib.suppress(FileNotFoundError):
            orphan.unlink()
            log.warning("removed %s, left over from a store no longer there", orphan)


def _sync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # a folder that cannot be opened (Windows): nothing to sync there
        return
    try:
        os.fsync(fd)
    except OSError as exc:  # a file system that cannot sync a folder has nothing to do
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            log.warning("could not sync %s, which holds a new store: %s", folder, exc)
    finally:
        os.close(fd)
