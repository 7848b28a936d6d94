"""The hot statements, run on SQLite's own cursor: compiled once, then one driver call each.

SQLAlchemy's execute costs about 50 µs of Python per statement on this machine (its cache
lookup, execution context, result object and events) against about 10 µs for sqlite3's own
cursor, and the engine runs some thirty statements per task. The statements in queries.py
are built once, so each is compiled once here (to the SQL string, the order of its
parameters, their defaults and type conversions) and then run directly. What stays the
same: the connection and its transaction (the cursor belongs to the connection SQLAlchemy
checked out, inside its BEGIN), errors (wrapped as SQLAlchemy's, so the retry layer sees
a locked database or a constraint as before), and `before_cursor_execute` and
`after_cursor_execute` listeners, which still see every statement (the benchmarks count
statements with one; tests pause a transaction at a chosen statement with the other).

PostgreSQL keeps SQLAlchemy's path: there a broken connection must be invalidated by the
pool, which only its own execute does. Statements whose SQL depends on the parameters
(expanding IN lists) also take SQLAlchemy's path.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.event import attr as event_attr
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

Params = Mapping[str, Any]


class _Compiled:
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
_cache: dict[int, tuple[ClauseElement, _Compiled | None]] = {}
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


def _compiled(stmt: ClauseElement, conn: Connection) -> _Compiled | None:
    hit = _cache.get(id(stmt))
    if hit is not None and hit[0] is stmt:
        return hit[1]
    if len(_cache) >= MAX_PREPARED:
        return None  # meant for the fixed statements of queries.py, not ones built per call
    compiled: _Compiled | None = _Compiled(stmt, conn.dialect)
    if compiled is not None and not compiled.usable:
        compiled = None  # its SQL depends on the parameters: SQLAlchemy's path
    with _cache_lock:
        _cache[id(stmt)] = (stmt, compiled)  # the statement is kept, so its id stays its own
        if compiled is not None:
            _texts.setdefault(compiled.sql)
    return compiled


class Row(tuple):  # type: ignore[type-arg]
    """A result row: by position, and by column name through _mapping, like SQLAlchemy's."""

    __slots__ = ()
    keys: tuple[str, ...] = ()
    _fields: tuple[str, ...] = ()  # as SQLAlchemy's rows name them

    @property
    def _mapping(self) -> dict[str, Any]:
        return dict(zip(self.keys, self, strict=True))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self.keys.index(name)]
        except ValueError:
            raise AttributeError(name) from None


class Rows:
    """The few parts of SQLAlchemy's Result the store uses."""

    def __init__(self, rows: list[Any], rowcount: int):
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def all(self) -> list[Row]:
        return self._rows

    def first(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def one(self) -> Row:
        if len(self._rows) != 1:
            raise LookupError(f"expected one row, got {len(self._rows)}")
        return self._rows[0]

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        return self.one()[0]

    def scalars(self) -> list[Any]:
        return [r[0] for r in self._rows]


_row_classes: dict[tuple[str, ...], type[Row]] = {}


def _row_class(keys: tuple[str, ...]) -> type[Row]:
    cls = _row_classes.get(keys)
    if cls is None:
        cls = type("Row", (Row,), {"__slots__": (), "keys": keys, "_fields": keys})
        _row_classes[keys] = cls
    return cls


def run(conn: Connection, stmt: ClauseElement, params: Params | None = None) -> Any:
    """Execute a prebuilt statement: on SQLite straight on the driver's cursor."""
    if conn.dialect.name != "sqlite":
        return conn.execute(stmt, params)  # type: ignore[call-overload]
    compiled = _compiled(stmt, conn)
    if compiled is None:
        return conn.execute(stmt, params)  # type: ignore[call-overload]
    writing = _writing
    if writing is not None and writing[0] is conn:
        return _rows(conn, compiled, compiled.args(params), writing[2], writing[1], True)
    return _rows(conn, compiled, compiled.args(params), _cursor(conn), _lookup(conn))


def _rows(
    conn: Connection,
    compiled: _Compiled,
    args: Sequence[Any],
    cursor: Any,
    listeners: Listeners,
    kept: bool = False,
) -> Rows:
    # Every statement of the store passes here: _execute's steps are written out in place.
    before, after = listeners
    try:
        if before is not None:
            before(conn, cursor, compiled.sql, args, None, False)
        cursor.execute(compiled.sql, args)
        if after is not None:
            after(conn, cursor, compiled.sql, args, None, False)
        rows: list[Row] = []
        if cursor.description is not None:
            cls = compiled.row_class
            if cls is None:  # a statement's columns are its own: named once
                cls = compiled.row_class = _row_class(tuple(d[0] for d in cursor.description))
            rows = [cls(r) for r in cursor.fetchall()]
        return Rows(rows, cursor.rowcount)
    except sqlite3.Error as exc:
        raise _wrapped(exc, compiled.sql, args, conn) from exc
    finally:
        if not kept:  # a write transaction's cursor serves its next statement
            cursor.close()


def read(conn: Connection, stmt: ClauseElement, params: Params | None = None) -> Rows | None:
    """Run a prebuilt SELECT on SQLite's cursor outside any transaction (its own snapshot, of
    committed data only), or None when it cannot be run so: a statement that is not one SELECT,
    one that takes SQLAlchemy's path (which would begin a transaction), or a connection inside
    a transaction. For reads on the writer's kept connection between writes (connection.py)."""
    compiled = _compiled(stmt, conn)
    if compiled is None or not compiled.select:
        return None
    driver = conn.connection.dbapi_connection
    if driver is None or driver.in_transaction:  # type: ignore[attr-defined]
        return None
    return _rows(conn, compiled, compiled.args(params), driver.cursor(), _lookup(conn))


def sqlite_driver(conn: Connection) -> sqlite3.Connection:
    """The sqlite3 connection under a SQLAlchemy one (SQLite stores only)."""
    driver = conn.connection.dbapi_connection
    assert isinstance(driver, sqlite3.Connection)
    return driver


def each_row(conn: Connection, stmt: ClauseElement, params: Params | None = None) -> Iterator[Any]:
    """Execute a prebuilt statement and yield its rows one at a time, as the driver's tuples:
    for results of thousands of rows read once (a big cancel's ids). Held all at once, each a
    live container, they set off the garbage collector's full passes (10-30 ms here)."""
    if conn.dialect.name != "sqlite" or (compiled := _compiled(stmt, conn)) is None:
        yield from conn.execute(stmt, params)  # type: ignore[call-overload]
        return
    args = compiled.args(params)
    cursor = _cursor(conn)
    try:
        _execute(conn, cursor, compiled.sql, args)
        yield from cursor
    except sqlite3.Error as exc:
        raise _wrapped(exc, compiled.sql, args, conn) from exc
    finally:
        cursor.close()


def run_many(conn: Connection, stmt: ClauseElement, rows: Sequence[Params]) -> None:
    """Execute a prebuilt statement once per parameter set (an executemany, no results)."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(stmt, list(rows))  # type: ignore[call-overload]
        return
    compiled = _compiled(stmt, conn)
    if compiled is None:
        conn.execute(stmt, list(rows))  # type: ignore[call-overload]
        return
    _executemany(conn, compiled.sql, [compiled.args(r) for r in rows])


def _executemany(conn: Connection, sql: str, args: list[Any]) -> None:
    writing = _writing
    if writing is not None and writing[0] is conn:
        cursor, kept = writing[2], True
    else:
        cursor, kept = _cursor(conn), False
    try:
        _execute(conn, cursor, sql, args, many=True)
    except sqlite3.Error as exc:
        raise _wrapped(exc, sql, args, conn) from exc
    finally:
        if not kept:
            cursor.close()


def insert_values(
    conn: Connection, stmt: ClauseElement, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> None:
    """An executemany of rows given as tuples in `columns` order, of values the driver takes as
    they are: on SQLite handed to the cursor with no dict per row to pick them from again (a
    log entry's insert, several per task)."""
    if not rows:
        return
    if conn.dialect.name == "sqlite":
        compiled = _compiled(stmt, conn)
        if compiled is not None and compiled.names == columns:
            _executemany(conn, compiled.sql, rows)
            return
    run_many(conn, stmt, [dict(zip(columns, row, strict=True)) for row in rows])


def insert_linked(conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> bool:
    """SQLite: an executemany of a fixed SQL text with positional rows, each of which the
    database may refuse by a constraint (a NOT NULL, the primary key): True if every row was
    added, False if the first was refused and so none was. A refusal after some rows were
    added raises (the caller's transaction is then rolled back)."""
    writing = _writing
    if writing is not None and writing[0] is conn:
        cursor, kept = writing[2], True
    else:
        cursor, kept = _cursor(conn), False
    driver = cursor.connection
    before = driver.total_changes
    try:
        _execute(conn, cursor, sql, rows, many=True)
        return True
    except sqlite3.IntegrityError as exc:
        if driver.total_changes != before:
            raise _wrapped(exc, sql, rows, conn) from exc
        return False
    except sqlite3.Error as exc:
        raise _wrapped(exc, sql, rows, conn) from exc
    finally:
        if not kept:
            cursor.close()


def _execute(conn: Connection, cursor: Any, sql: str, args: Any, many: bool = False) -> None:
    """The statement on the driver's cursor, between the listeners SQLAlchemy would call."""
    before, after = _listeners(conn)
    if before is not None:
        before(conn, cursor, sql, args, None, many)
    if many:
        cursor.executemany(sql, args)
    else:
        cursor.execute(sql, args)
    if after is not None:
        after(conn, cursor, sql, args, None, many)


def run_sql(conn: Connection, sql: str) -> None:
    """Execute a fixed SQL text without parameters on SQLite's cursor."""
    cursor = _cursor(conn)
    try:
        _sql(conn, cursor, sql, _listeners(conn)[0])
    finally:
        cursor.close()


def _sql(conn: Connection, cursor: sqlite3.Cursor, sql: str, before: Listener | None) -> None:
    try:
        if before is not None:
            before(conn, cursor, sql, (), None, False)
        cursor.execute(sql)
    except sqlite3.Error as exc:
        raise _wrapped(exc, sql, (), conn) from exc


def begin_immediate(conn: Connection) -> None:
    """Open a write transaction on SQLite's connection itself: no SQLAlchemy transaction object,
    begin event or reset (together several times the BEGIN's own cost). A statement that takes
    SQLAlchemy's path inside it makes SQLAlchemy begin too; its begin event then sees the
    driver already in a transaction and sends nothing (connection.py), and end() commits or
    rolls back through SQLAlchemy's transaction, which ends the driver's.

    The listeners are looked up here, once for the whole transaction (see _listeners), and
    one cursor serves all its statements (but a lazy each_row's)."""
    global _writing
    pair = _lookup(conn)
    cursor = _cursor(conn)
    try:
        _sql(conn, cursor, "BEGIN IMMEDIATE", pair[0])
    except BaseException:
        cursor.close()
        raise
    _writing = (conn, pair, cursor)


def end(conn: Connection, commit: bool) -> None:
    """Commit (or roll back) the transaction begin_immediate opened."""
    global _writing
    writing, _writing = _writing, None
    cursor = writing[2] if writing is not None and writing[0] is conn else None
    try:
        if conn.in_transaction():  # SQLAlchemy began too: let it end its transaction and ours
            if commit:
                conn.commit()
            else:
                conn.rollback()
            return
        try:
            if commit and cursor is not None:
                # On the transaction's cursor, whose connection keeps the statement prepared:
                # the driver's commit() prepares a COMMIT anew each time (Python 3.11), which
                # is most of the "statement compilations" a profile of the engine counts.
                cursor.execute("COMMIT")
            elif commit:
                sqlite_driver(conn).commit()
            else:
                sqlite_driver(conn).rollback()
        except sqlite3.Error as exc:
            raise _wrapped(exc, "COMMIT" if commit else "ROLLBACK", (), conn) from exc
    finally:
        if cursor is not None:
            cursor.close()


Listener = Callable[..., None]
Listeners = tuple[Listener | None, Listener | None]
# The write transaction begin_immediate opened last, with its listeners and its cursor. A
# store's writes on SQLite are one at a time (its writer lock), so one slot serves the usual
# process of one store; any connection that does not match it (a pooled read in another
# thread, a second store's write) looks its listeners up and opens a cursor itself, so a slot
# taken or cleared by another store costs a lookup, never a wrong answer (a cursor whose slot
# was taken is closed when it is collected).
_writing: tuple[Connection, Listeners, sqlite3.Cursor] | None = None


def _listeners(conn: Connection) -> Listeners:
    """The connection's before_ and after_cursor_execute listeners, None where it has none.
    Inside a write transaction, those it had when it began: a look through SQLAlchemy's
    dispatch costs a few µs, and a write runs several statements (a listener added meanwhile
    hears the next transaction's)."""
    writing = _writing
    if writing is not None and writing[0] is conn:
        return writing[1]
    return _lookup(conn)


def _lookup(conn: Connection) -> Listeners:
    """Not at all while neither the connection nor its engine has any listener (the flags
    SQLAlchemy's own execute checks first)."""
    if not (conn._has_events or conn.engine._has_events):
        return None, None
    dispatch = conn.dispatch
    return _one(dispatch.before_cursor_execute), _one(dispatch.after_cursor_execute)


def _one(listeners: Any) -> Listener | None:
    """The event's one listener itself, where it has one (a benchmark's statement count, a
    test's pause): SQLAlchemy's dispatch calls it through a frame that walks the engine's and
    the connection's lists, as much again as the listener. None where it has none; the
    dispatch itself where it has several, which calls them in their order."""
    if type(listeners) is _JOINED:
        # A connection's and its engine's, where neither has one (the store's engine has
        # only connect and begin listeners): said without the lists _flat builds, as the
        # store's reads and writes ask a few times a task (~0.2 µs a time).
        local = listeners.local
        parent = getattr(listeners.parent_dispatch, listeners.name)
        if (
            type(local) is _EMPTY
            and type(parent) is _EMPTY
            and not local.parent_listeners
            and not parent.parent_listeners
        ):
            return None
    fns = _flat(listeners)
    if not fns:
        return None
    if len(fns) == 1:
        return cast(Listener, fns[0])
    return cast(Listener, listeners)


# SQLAlchemy's private listener collections, looked up rather than imported: should a release
# rename one, _flat iterates that kind as SQLAlchemy does instead of the store failing to load.
_JOINED = getattr(event_attr, "_JoinedListener", None)
_COLLECTION = getattr(event_attr, "_ListenerCollection", None)
_EMPTY = getattr(event_attr, "_EmptyListener", None)


def _flat(listeners: Any) -> list[Listener]:
    """The functions an event's listener collection calls, in its order. The store's engine
    always has listeners (connect, begin), so every transaction (and every read outside one)
    looks here: iterating SQLAlchemy's collections runs their Python __iter__ and __len__ at
    each level (a connection's joined to its engine's), about a third of a BEGIN's cost; their
    lists are read here directly, as those methods read them. Any other kind is iterated."""
    kind = type(listeners)
    if kind is _JOINED:  # the connection's own, then its engine's (`listeners`)
        return [
            *_flat(listeners.local),
            *_flat(getattr(listeners.parent_dispatch, listeners.name)),
        ]
    if kind is _COLLECTION:
        return [*listeners.parent_listeners, *listeners.listeners]
    if kind is _EMPTY:
        return [*listeners.parent_listeners]
    return list(listeners)


def _cursor(conn: Connection) -> sqlite3.Cursor:
    # dbapi_connection: a plain attribute; driver_connection is two properties to the same
    # sqlite3 connection (they differ only for asyncio drivers).
    return conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr,return-value]


def _wrapped(exc: sqlite3.Error, sql: str, args: Any, conn: Connection) -> StatementError:
    """The driver's error as SQLAlchemy would raise it (OperationalError, IntegrityError…)."""
    return DBAPIError.instance(sql, args, exc, sqlite3.Error, dialect=conn.dialect)
