"""Persistence: the Store protocol and its SQL implementation (SQLite or PostgreSQL)."""

from __future__ import annotations

import os
from pathlib import Path

from firm.store.base import DelegateResult, Event, NewTask, RunSpec, SettleResult, Store
from firm.store.sql import SqlStore, sqlite_url

DEFAULT_STATE_DIR = Path(".firm")
DEFAULT_DB = DEFAULT_STATE_DIR / "firm.db"


def resolve_db(db: str | Path | None) -> str:
    """A URL for --db / FIRM_DB / the default: a path means an SQLite file."""
    value = str(db) if db is not None else os.environ.get("FIRM_DB") or str(DEFAULT_DB)
    if "://" in value:
        return value
    return sqlite_url(value)


def open_store(
    db: str | Path | None = None, *, migrate: bool | None = None, check_schema: bool = True
) -> SqlStore:
    """Open the store at a path or URL (default: FIRM_DB, ./.firm/firm.db).

    An SQLite file is created and migrated as needed. A PostgreSQL database must have been
    migrated with `firm db upgrade` (or pass migrate=True to do it here).
    """
    return SqlStore(resolve_db(db), migrate=migrate, check_schema=check_schema)


def state_dir_for(url: str) -> Path:
    """Where keys and other local state live: beside an SQLite file, else ./.firm."""
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///") :]).parent
    return DEFAULT_STATE_DIR


__all__ = [
    "DEFAULT_DB",
    "DelegateResult",
    "Event",
    "NewTask",
    "RunSpec",
    "SettleResult",
    "SqlStore",
    "Store",
    "open_store",
    "resolve_db",
    "state_dir_for",
]
