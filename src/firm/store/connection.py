"""Opening the store: the SQLAlchemy engine for SQLite or PostgreSQL, the schema check, and the
read and write transactions every other part of the store runs in.

A write commits its log entries (store/transaction.py) and then tells this process's
listeners; on PostgreSQL other processes hear of it through LISTEN/NOTIFY (store/notify.py).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, event, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql import ClauseElement

from firm import idlethreads
from firm.errors import StoreError
from firm.store import closing, migrate, newfile, notify, readied, schema
from firm.store.base import EventListener
from firm.store.compiled import Params, known_texts
from firm.store.group import GroupWriter
from firm.store.latecheckpoint import LateCheckpoints, copy_wal
from firm.store.notify import PgListener, SignalListener, StoreSignal
from firm.store.prepared import read, run, run_sql, sqlite_driver
from firm.store.preparedrows import Rows
from firm.store.retry import RetryPolicy, retrying
from firm.store.transaction import DbClock, Tx
from firm.store.usage import OwedUsage, pay
from firm.store.wakeup import FreeSlots, WakeRouter

# Opening a new SQLite file that another process is still creating: tries, 50 ms apart and
# growing (about 2 s in all), before "database is locked" is the answer.
OPEN_TRIES = 10

# SQLite connections kept open for reads between them: enough for the engine's workers and
# its scheduler to read at once without one being opened; more readers open and close their own.
IDLE_READERS = 8

log = logging.getLogger("firm.store")


def sqlite_url(path: str | Path) -> str:
    p = Path(path).expanduser().resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{p}"


class SqlBase:
    """The connection half of SqlStore: engine, schema, transactions and listeners."""

    poll_interval = 0.2  # seconds between looks for other processes' commits
    listen_poll_interval = 5.0  # the safety net while LISTEN is connected (PostgreSQL)

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 16,
        migrate: bool | None = None,
        check_schema: bool = True,
        retry_window: float = 60.0,
        group_commit: bool | None = None,
    ):
        """Open the store at url. migrate: bring the schema up to date on open (default: on
        SQLite, yes; on PostgreSQL, no — `firm db upgrade` does it, once, for every worker).
        check_schema=False opens without looking at the schema (for upgrade_schema alone).
        group_commit: let concurrent writes of this process share one transaction (default: on
        PostgreSQL, yes; on SQLite, no — see store/group.py)."""
        self.url = url
        self.retry_policy = RetryPolicy(window=retry_window)
        self._listeners: list[EventListener] = []
        self._signal_listeners: list[SignalListener] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._generation = 0  # bumped on every commit or signal, so no wake-up is lost
        self._pg_listener: PgListener | None = None
        self._router: WakeRouter | None = None
        placing: newfile.Placing | None = None  # a new file on its way to its name
        try:
            if url.startswith("sqlite"):
                self.dialect = "sqlite"
                plain = url.startswith("sqlite:///") and "?" not in url
                if check_schema and migrate is not False and plain:
                    # A new file is written whole, at head: nothing to check or migrate.
                    # Its sync goes on while what follows, up to the first connection, is
                    # built (newfile.py).
                    placing = newfile.write_new(Path(url[len("sqlite:///") :]))
                self.engine = create_engine(
                    url,
                    pool_size=pool_size,
                    max_overflow=64,
                    pool_timeout=60,
                    connect_args={"timeout": 60, "check_same_thread": False},
                )
                self._setup_sqlite()
            else:
                self.dialect = "postgresql"
                if url.startswith("postgresql://") or url.startswith("postgres://"):
                    url = "postgresql+psycopg://" + url.split("://", 1)[1]
                self.engine = create_engine(
                    url,
                    pool_size=pool_size,
                    max_overflow=64,
                    # No ping per checkout (a round trip per transaction): a connection that
                    # died while idle fails its first statement, and the retry layer reconnects.
                    connect_args={
                        "application_name": notify.application_name("store"),
                        "connect_timeout": 10,
                    },
                )
        except ModuleNotFoundError as exc:
            raise StoreError(
                f"cannot open {url}: {exc.name} is not installed (pip install 'firm[postgres]')"
            ) from None
        self._locking = self.dialect == "postgresql"
        self._readers: list[Connection] = []  # idle SQLite connections kept for reads
        self._closed = False
        self._sqlite_writer = threading.Lock() if self.dialect == "sqlite" else None
        self._writer: threading.Lock | contextlib.nullcontext[None] = (
            self._sqlite_writer or contextlib.nullcontext()
        )
        self._clock = DbClock(self.dialect == "postgresql")
        # Group commit pays where a commit is dear: on PostgreSQL each one waits for an fsync,
        # and sharing it halves the engine's time per task. SQLite (WAL, synchronous=NORMAL)
        # commits without an fsync, and grouping measured even there: it stays one commit per
        # write (docs/architecture.md, "Group commit", has the figures).
        # SQLite's WAL checkpoints, on a thread beside the writes (latecheckpoint.py).
        self._late = (
            LateCheckpoints(self._sqlite_writer, self._read, lambda: self._group.idle())
            if self._sqlite_writer
            else None
        )
        self._group = GroupWriter(
            self.engine,
            self._writer,
            self._locking,
            self._clock,
            enabled=self.dialect == "postgresql" if group_commit is None else group_commit,
            keep=self.dialect == "sqlite",
            prepare=self._late.prepare if self._late else None,
            committed=self._late.committed if self._late else None,
        )
        # The first connection opens below: the new file has its name by then, or not at all.
        named = placing.wait() if placing is not None else None
        self._named = named  # a new file's name being synced (newfile.py)
        self._copying: idlethreads.Job | None = None  # the WAL copied ahead of the close
        self._closing: idlethreads.Job | None = None  # the close itself, on a thread
        self._readying: idlethreads.Job | None = None  # statements compiled ahead (readied.py)
        # Seconds the start-up's background work waits (these statements compiled ahead, an
        # engine's early load of the audit key: audit/checkpoint.py), for a caller whose run
        # begins with a model's wait (Team.start): done then, not beside the run's own start.
        self.background_delay = 0.0
        self._unready = threading.Event()  # set by close: a compile still waiting gives up
        self._usage = OwedUsage()  # model calls' usage owed by each thread (store/usage.py)
        self.created = named is not None  # a file made by this open: it holds no run yet
        if check_schema and not self.created:
            self._check_schema(self.dialect == "sqlite" if migrate is None else migrate)
        if self.created:
            self._start_wal()

    def _start_wal(self) -> None:
        """A new store's WAL started unsynced, before its first commit (newfile.start_wal)."""
        assert self._sqlite_writer is not None
        with self._sqlite_writer:
            writer = self._group.idle()
            assert writer is not None
            newfile.start_wal(sqlite_driver(writer))

    @property
    def safe_url(self) -> str:
        """The URL without its password, for messages and logs."""
        return migrate.safe_url(self.engine)

    # --- connection set-up ---------------------------------------------------------------

    def _setup_sqlite(self) -> None:
        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy's begin event emit BEGIN itself, so writes can say IMMEDIATE.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=60000")
            # The log only grows; a bigger page cache keeps its indexes' upper levels in
            # memory as it does (the default is 2 MB).
            cur.execute("PRAGMA cache_size=-65536")
            cur.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Writes take the write lock up front. Reads are single statements, each its own
            # snapshot in autocommit mode: no BEGIN/COMMIT round for them. The store's own
            # writes begin on the driver (prepared.begin_immediate): SQLAlchemy beginning
            # inside one of them has nothing to send.
            driver = conn.connection.driver_connection
            if conn.get_execution_options().get("firm_write", False) and not getattr(
                driver, "in_transaction", False
            ):
                run_sql(conn, "BEGIN IMMEDIATE")

    @retrying
    def _check_schema(self, auto_migrate: bool, attempt: int = 1) -> None:
        try:
            with self._read() as conn:
                revision = migrate.current_revision(conn)
                version = None
                if revision is not None:
                    version = conn.execute(
                        select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
                    ).scalar()
            if revision != schema.HEAD_REVISION:
                if revision is not None and revision not in migrate.known_revisions():
                    raise migrate.newer_schema(self.engine, revision)
                if not auto_migrate:
                    where = "is empty" if revision is None else f"is at revision {revision}"
                    raise StoreError(
                        f"the database at {self.safe_url} {where}; this firm needs schema "
                        f"revision {schema.HEAD_REVISION}: run `firm db upgrade --db URL` once"
                    )
                migrate.upgrade(self.engine)
            elif version is not None and int(version) > schema.SCHEMA_VERSION:
                raise StoreError(
                    f"{self.safe_url} was written by a newer firm (schema {version}, this firm "
                    f"knows up to {schema.SCHEMA_VERSION}); upgrade firm to open it"
                )
        except OperationalError as exc:
            if self.dialect == "postgresql" and exc.connection_invalidated:
                raise  # the retry layer waits for the server to come back
            if self.dialect == "sqlite" and "locked" in str(exc.orig) and attempt < OPEN_TRIES:
                # Another process is creating or migrating the same new file: wait for it.
                time.sleep(0.05 * attempt)
                return self._check_schema(auto_migrate, attempt + 1)
            raise StoreError(f"cannot open the store at {self.safe_url}: {exc.orig}") from None

    def upgrade_schema(self) -> tuple[str | None, str | None]:
        """Run the migrations up to head (what `firm db upgrade` does); idempotent."""
        return migrate.upgrade(self.engine)

    def copy_wal_soon(self) -> None:
        """Start the close's WAL checkpoint now, on an idle thread, for a caller that will
        write nothing more but reads a little before it closes (a team's run, collecting its
        outcome). The last connection's close copies the WAL into the file and syncs both
        (three fsyncs with the folder's, 4-13 ms on this disk) while the caller waits; copied
        here beside its reads, it leaves that close nothing to copy or sync. A write after it
        is copied by the close, as before."""
        if self._sqlite_writer is None or self._closed or self._copying is not None:
            return
        self._copying = idlethreads.run(self._copy_wal, "firm-store-copy")

    def _copy_wal(self) -> None:
        try:
            copy_wal(self._read)
        except Exception as exc:  # the close checkpoints what this did not
            log.debug("could not copy the WAL ahead of the close: %s", exc)

    def close_soon(self) -> None:
        """close() on a thread, for a caller that is done with the store and need not wait
        for the WAL's copy and syncs (store/closing.py); the process waits for it at exit."""
        if not self._closed and self._closing is None:
            self._closing = closing.close_soon(self.close)

    def close(self) -> None:
        if self._copying is not None:  # before _closed: its connection goes back to the readers
            self._copying.join()
            self._copying = None
        self._closed = True
        self._unready.set()
        if self._readying is not None:  # it stops at its next statement, seeing _closed
            self._readying.join()
            self._readying = None
        if self._named is not None:  # the new file's name is on disk before the store closes
            self._named.join()
            self._named = None
        if self._late is not None:
            self._late.join()
        self._group.close()
        while self._readers:
            self._readers.pop().close()
        if self._pg_listener is not None:
            self._pg_listener.stop()
            self._pg_listener = None
        self.engine.dispose()

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call listener with the events of every transaction this process commits.

        In-process only, by design: another process's commits reach this one through
        listen() (PostgreSQL) and through the log itself (events_after + wait_for_change).
        """
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def listen(
        self, listener: SignalListener, free_slots: FreeSlots | None = None
    ) -> Callable[[], None]:
        """Call listener with a StoreSignal whenever any process commits to the store.

        On PostgreSQL this is LISTEN/NOTIFY (a hint: the stored state is the truth). On SQLite
        there is no cross-process channel and nothing is called; sessions still see a cancel
        at their next step by reading the store, and workers see new work at their heartbeat.
        A listener that claims work passes free_slots (how many more sessions it can run):
        new tasks then wake one such process, not all of them (store/wakeup.py).
        """
        with self._lock:
            self._signal_listeners.append(listener)
        self._ensure_listening()
        remove = None
        if free_slots is not None and self._router is not None:
            remove = self._router.add_capacity(free_slots)

        def unlisten() -> None:
            with self._lock:
                if listener in self._signal_listeners:
                    self._signal_listeners.remove(listener)
            if remove is not None:
                remove()

        return unlisten

    def _ensure_listening(self) -> None:
        if self.dialect != "postgresql":
            return
        with self._lock:
            if self._pg_listener is None:
                self._router = WakeRouter(self.engine)
                conninfo = self.engine.url.set(drivername="postgresql").render_as_string(
                    hide_password=False
                )
                self._pg_listener = PgListener(conninfo, self._on_signal).start()

    def _on_signal(self, signal: StoreSignal) -> None:
        if self._router is not None:
            if signal.reconnected:
                self._router.forget_members()
            signal = self._router.route(signal)
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
        with self._lock:
            listeners = list(self._signal_listeners)
        for listener in listeners:
            try:
                listener(signal)
            except Exception:  # one bad listener must not deafen the others
                log.exception("store: a signal listener failed")

    @property
    def group_commit(self) -> bool:
        """Whether concurrent writes of this process share one transaction (store/group.py)."""
        return self._group.enabled

    @group_commit.setter
    def group_commit(self, enabled: bool) -> None:
        self._group.enabled = enabled

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        # SQLite has one writer. Queue this process's writers on a Python lock, which hands
        # over in microseconds, instead of SQLite's busy handler, which sleeps in steps of
        # milliseconds; the busy timeout is then left for writers in other processes. Writers
        # that arrive while a transaction is open join it (group commit, store/group.py).
        taken = self._usage.take() if self._usage.owed else None
        try:
            with self._group.write() as tx:
                if taken:  # this thread's usage rides the write (store/usage.py)
                    pay(tx.conn, taken)
                yield tx
        except BaseException:
            if taken:
                self._usage.put_back(taken)
            raise
        if tx.appended:
            for listener in list(self._listeners):
                try:
                    listener(tx.appended)
                except Exception:  # committed is committed: a listener cannot undo or redo it
                    log.exception("store: an event listener failed")
            with self._changed:
                self._generation += 1
                self._changed.notify_all()

    def _select(self, stmt: ClauseElement, params: Params | None = None) -> Rows:
        """Run one prebuilt SELECT and return its rows.

        On SQLite, on the writer's kept connection when no write holds it. This process's
        commits go through that connection, so its page cache stays valid across them, where
        a pooled reader's is dropped after every commit and its pages read again from the
        file (the engine's 1,111-task run: ~26,000 preads against ~3,400). The statement runs
        outside any transaction, so it sees committed data only, as a pooled read does. The
        writer lock is only tried, never waited for: while a write holds it (a write body's
        own thread included: its reads never see its uncommitted rows, as before) the read
        takes a pooled connection."""
        writer = self._sqlite_writer
        if writer is not None and not self._closed and writer.acquire(blocking=False):
            try:
                conn = self._group.idle()
                rows = read(conn, stmt, params) if conn is not None else None
            finally:
                writer.release()
            if rows is not None:
                return rows
        with self._read() as conn:
            result = run(conn, stmt, params)
            if isinstance(result, Rows):
                return result
            return Rows(result.all(), result.rowcount)  # read before the connection goes back

    def warm(self, sessions: int) -> None:
        """Open now the SQLite connections that `sessions` sessions reading at once will
        want (up to IDLE_READERS), each with its schema read: an engine calls it as it starts.
        Otherwise a new store's first busy moment opens them in its session threads, each
        ~0.4 ms of CPU (the driver's connect, four PRAGMAs, the schema parsed at its first
        statement) on the run's critical path. PostgreSQL keeps its pool as it is."""
        if self.dialect != "sqlite" or self._closed:
            return
        fresh: list[Connection] = []
        try:
            while len(self._readers) + len(fresh) < min(sessions, IDLE_READERS):
                conn = self.engine.connect()
                fresh.append(conn)
                run_sql(conn, "SELECT seq FROM chain_head WHERE id = 1")
        finally:
            self._readers.extend(fresh)
        if self._readying is None and known_texts():
            self._readying = idlethreads.run(self._compile_known, "firm-store-ready")

    def _compile_known(self) -> None:
        """Compile the process's known statements on the writer's connection, one at a time
        between writes (store/readied.py)."""
        assert self._sqlite_writer is not None
        writer = self._sqlite_writer
        if self.background_delay and self._unready.wait(self.background_delay):
            return  # closed meanwhile
        try:
            for sql in known_texts():
                if self._closed or not writer.acquire(timeout=readied.WAIT_FOR_WRITER):
                    return
                try:
                    conn = self._group.idle()
                    if conn is None:
                        return
                    readied.compile_all(sqlite_driver(conn), [sql])
                finally:
                    writer.release()
        except Exception as exc:  # an optimisation only: the first runs compile as before
            log.debug("could not compile the store's statements ahead: %s", exc)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        if self.dialect != "sqlite":
            with self.engine.connect() as conn, conn.begin():
                yield conn
            return
        # SQLite reads are single statements, each its own snapshot (autocommit: no BEGIN is
        # sent for them), so nothing needs undoing between one read and the next: a few
        # connections stay checked out for reads and are reused, and a read costs its
        # statement, not a pool checkout, a begin, a commit and a reset besides (together
        # several times a prepared statement's own cost).
        try:
            conn = self._readers.pop()
        except IndexError:
            conn = self.engine.connect()
        try:
            yield conn
        except BaseException:
            conn.close()  # whatever state an error left it in goes with it
            raise
        if len(self._readers) < IDLE_READERS and not self._closed:
            self._readers.append(conn)
        else:
            conn.close()
