"""The hot statements, run on SQLite's own cursor: compiled once, then one driver call each.

SQLAlchemy's execute costs about 50 µs of Python per statement on this machine (its cache
lookup, execution context, result object and events) against about 10 µs for sqlite3's own
cursor, and the engine runs some thirty statements per task. The statements in queries.py
are built once, so each is compiled once (store/compiled.py: to the SQL string, the order of
its parameters, their defaults and type conversions) and then run directly here, its rows
returned as store/preparedrows.py's. What stays the same: the connection and its transaction
(the cursor belongs to the connection SQLAlchemy checked out, inside its BEGIN), errors
(wrapped as SQLAlchemy's, so the retry layer sees a locked database or a constraint as
before), and `before_cursor_execute` and `after_cursor_execute` listeners, which still see
every statement (store/cursorlisteners.py finds them; the benchmarks count statements with
one; tests pause a transaction at a chosen statement with the other).

A write transaction (begin_immediate to end) is kept here beside the statements it runs: they
share its one cursor and the listeners looked up as it began.

PostgreSQL keeps SQLAlchemy's path: there a broken connection must be invalidated by the
pool, which only its own execute does. Statements whose SQL depends on the parameters
(expanding IN lists) also take SQLAlchemy's path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.sql import ClauseElement

from firm.store.compiled import Compiled, Params, compiled_once
from firm.store.cursorlisteners import Listener, Listeners, cursor_listeners
from firm.store.preparedrows import Row, Rows, row_class


def run(conn: Connection, stmt: ClauseElement, params: Params | None = None) -> Any:
    """Execute a prebuilt statement: on SQLite straight on the driver's cursor."""
    if conn.dialect.name != "sqlite":
        return conn.execute(stmt, params)  # type: ignore[call-overload]
    compiled = compiled_once(stmt, conn)
    if compiled is None:
        return conn.execute(stmt, params)  # type: ignore[call-overload]
    writing = _writing
    if writing is not None and writing[0] is conn:
        return _rows(conn, compiled, compiled.args(params), writing[2], writing[1], True)
    return _rows(conn, compiled, compiled.args(params), _cursor(conn), cursor_listeners(conn))


def _rows(
    conn: Connection,
    compiled: Compiled,
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
                cls = compiled.row_class = row_class(tuple(d[0] for d in cursor.description))
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
    compiled = compiled_once(stmt, conn)
    if compiled is None or not compiled.select:
        return None
    driver = conn.connection.dbapi_connection
    if driver is None or driver.in_transaction:  # type: ignore[attr-defined]
        return None
    return _rows(conn, compiled, compiled.args(params), driver.cursor(), cursor_listeners(conn))


def sqlite_driver(conn: Connection) -> sqlite3.Connection:
    """The sqlite3 connection under a SQLAlchemy one (SQLite stores only)."""
    driver = conn.connection.dbapi_connection
    assert isinstance(driver, sqlite3.Connection)
    return driver


def each_row(conn: Connection, stmt: ClauseElement, params: Params | None = None) -> Iterator[Any]:
    """Execute a prebuilt statement and yield its rows one at a time, as the driver's tuples:
    for results of thousands of rows read once (a big cancel's ids). Held all at once, each a
    live container, they set off the garbage collector's full passes (10-30 ms here)."""
    if conn.dialect.name != "sqlite" or (compiled := compiled_once(stmt, conn)) is None:
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
    compiled = compiled_once(stmt, conn)
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
        compiled = compiled_once(stmt, conn)
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
    pair = cursor_listeners(conn)
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
    return cursor_listeners(conn)


def _cursor(conn: Connection) -> sqlite3.Cursor:
    # dbapi_connection: a plain attribute; driver_connection is two properties to the same
    # sqlite3 connection (they differ only for asyncio drivers).
    return conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr,return-value]


def _wrapped(exc: sqlite3.Error, sql: str, args: Any, conn: Connection) -> StatementError:
    """The driver's error as SQLAlchemy would raise it (OperationalError, IntegrityError…)."""
    return DBAPIError.instance(sql, args, exc, sqlite3.Error, dialect=conn.dialect)
