"""A new SQLite store written whole, from an image of the schema at head.

Creating the schema in a new file is some fifty DDL statements, each re-reading SQLite's
schema as it grows, with SQLAlchemy checking for every table first, then a schema check
that reflects the tables again: 20–30 ms on each open of a new store, which a program that
starts a run in a new store each time (every `Team.start()` with a new db, every test)
pays every time. The schema is built once per process in memory, by the same
`migrate.create_at_head` as before, and each new store is that image written to disk.

The file appears whole or not at all: the image is written beside it and hard-linked into
place, which fails if another process created the file first (that process's store is
then opened as any existing one is). Where that cannot be done (no hard links, no
serialize), nothing is written and the store is created the old way.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.pool import StaticPool

from firm.store import migrate

_lock = threading.Lock()
_image: list[bytes] = []


def schema_image() -> bytes:
    """The bytes of an SQLite database holding the head schema and its first rows."""
    with _lock:
        if not _image:
            engine = create_engine("sqlite://", poolclass=StaticPool)
            try:
                with engine.begin() as conn:
                    migrate.create_at_head(conn)
                    driver = conn.connection.dbapi_connection
                    assert isinstance(driver, sqlite3.Connection)
                    image = bytearray(driver.serialize())
            finally:
                engine.dispose()
            # The file format's read and write versions (bytes 18 and 19): 2 is WAL. A file
            # written so opens in WAL mode, as SQLite leaves one it converted itself; the
            # conversion at the first connection would cost a rollback journal and its
            # fsyncs (four on this disk).
            image[18:20] = b"\x02\x02"
            _image.append(bytes(image))
        return _image[0]


def write_new(path: Path) -> bool:
    """Write a new store at `path` from the image; False (and nothing written) when the file
    exists already or the image cannot be placed atomically."""
    if path.exists() or not hasattr(sqlite3.Connection, "serialize"):
        return False
    image = schema_image()
    part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        part.write_bytes(image)
        os.link(part, path)
    except OSError:  # the file appeared meanwhile (FileExistsError), or no hard links here
        return False
    finally:
        with contextlib.suppress(OSError):
            part.unlink()
    return True
