"""A prebuilt statement compiled once for SQLite's own cursor (store/prepared.py runs it).

Compiled here: the SQL string, the order of its parameters, their defaults and type
conversions, and whether it writes. Statements are cached by identity, for the fixed
statements of queries.py; the SQL of each is also kept, in the order first compiled, for a new
SQLite store's writer connection to compile ahead (store/readied.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from firm.store.preparedrows import Row

Params = Mapping[str, Any]


class Compiled:
    __slots__ = (
        "_converts",
        "_pick",
        "defaults",
        "names",
        "processors",
        "row_class",
        "select",
        "sql",
        "usable",
    )

    def __init__(self, stmt: ClauseElement, dialect: Any):
        compiled = cast(SQLCompiler, stmt.compile(dialect=dialect))
        self.sql: str = compiled.string
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.defaults: dict[str, Any] = {
            name: bind.value for name, bind in compiled.binds.items() if not bind.required
        }
        procs: Mapping[str, Any] = compiled._bind_processors
        self.processors: tuple[Callable[[Any], Any] | None, ...] = tuple(
            procs.get(name) for name in self.names
        )
        self.row_class: type[Row] | None = None
        # One SELECT (a CTE's too: SQLAlchemy builds those as selects), which writes nothing.
        self.select: bool = bool(getattr(stmt, "is_select", False))
        # Tuple-valued binds convert per element: those statements take SQLAlchemy's path.
        self.usable = "POSTCOMPILE" not in self.sql and all(
            p is None or callable(p) for p in self.processors
        )
        # The parameters are picked out of the caller's dict by one C call (itemgetter), over
        # the statement's own values (literals such as `id = 1`) where it has some; then the
        # few that convert (floats: SQLAlchemy's to_float) are converted in place.
        self._converts: tuple[tuple[int, Callable[[Any], Any]], ...] = tuple(
            (i, p) for i, p in enumerate(self.processors) if p is not None
        )
        getter = itemgetter(*self.names) if self.names else None
        if len(self.names) == 1:
            self._pick: Callable[[Params], tuple[Any, ...]] | None = lambda given: (
                getter(given),  # type: ignore[misc]
            )
        else:
            self._pick = getter

    def args(self, params: Params | None) -> tuple[Any, ...] | list[Any]:
        pick = self._pick
        if pick is None:
            return ()
        defaults = self.defaults
        if defaults:
            values = pick({**defaults, **params} if params else defaults)
        else:
            values = pick(params if params is not None else {})
        if not self._converts:
            return values
        out = list(values)
        for i, proc in self._converts:
            value = out[i]
            if value is not None:
                out[i] = proc(value)
        return out


MAX_PREPARED = 128
_cache: dict[int, tuple[ClauseElement, Compiled | None]] = {}
_cache_lock = threading.Lock()
# The SQL of each statement run here so far, in the order first compiled: what a new SQLite
# store's writer connection is given compiled as an engine starts on it (store/readied.py).
_texts: dict[str, None] = {}


def remember(sql: str) -> None:
    """Count a fixed SQL text the store runs on its own among those known (see _texts)."""
    with _cache_lock:
        _texts.setdefault(sql)


def known_texts() -> list[str]:
    """The SQL texts this process has run through here."""
    with _cache_lock:
        return list(_texts)


def compiled_once(stmt: ClauseElement, conn: Connection) -> Compiled | None:
    """The statement compiled for the driver's cursor, or None where it takes SQLAlchemy's
    path (its SQL depends on the parameters, or it is not one of the fixed statements)."""
    hit = _cache.get(id(stmt))
    if hit is not None and hit[0] is stmt:
        return hit[1]
    if len(_cache) >= MAX_PREPARED:
        return None  # meant for the fixed statements of queries.py, not ones built per call
    compiled: Compiled | None = Compiled(stmt, conn.dialect)
    if compiled is not None and not compiled.usable:
        compiled = None  # its SQL depends on the parameters: SQLAlchemy's path
    with _cache_lock:
        _cache[id(stmt)] = (stmt, compiled)  # the statement is kept, so its id stays its own
        if compiled is not None:
            _texts.setdefault(compiled.sql)
    return compiled
