"""Group commit: the writes of concurrent sessions in this process share one transaction.

The first writer to arrive leads: it opens the transaction and runs its own body. Writers that
arrive while that group is open join it and run their bodies on the same connection, one at a
time, each in the caller's own thread. The leader then appends every member's log entries to
the chain (one move of the head, one insert: store/transaction.py) and commits once; every
member returns only after that commit, so nobody hears "done" before the write is durable.

A member that fails — a conflict, a refused settle, an IntegrityError, an invalid event — fails
alone: its body ran inside its own SAVEPOINT, which is rolled back, and it raises at once. The
first body of a transaction needs no savepoint (there is nothing of anyone else's to keep): if
it fails, the whole transaction is rolled back and the next member begins a fresh one. If the
commit itself fails, every member whose body succeeded gets that error, and the retry layer
re-runs each of them (nothing of theirs was written).

Why the invariants hold: each member sees every earlier member's writes (one transaction), so
checks such as "is this session still the task's holder" see the state the commit will carry;
a settle and the wake it causes are one member, never split; the chain is built once per
commit, in the order the members ran, so sequence numbers have no gap and follow commit order.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, RootTransaction
from sqlalchemy.exc import DBAPIError

from firm.store.prepared import begin_immediate, end
from firm.store.transaction import ChainHead, DbClock, Tx, append_chain

# Members per group at most: a steady stream of joiners must not keep a commit waiting.
MAX_MEMBERS = 64


class _Group:
    __slots__ = ("broken", "conn", "done", "error", "members", "ran", "turn", "txn", "waiting")

    def __init__(self) -> None:
        self.turn = threading.Lock()  # who runs a body on the connection now
        self.conn: Connection | None = None
        self.txn: RootTransaction | None = None  # None: no transaction begun (or rolled back)
        self.members: list[Tx] = []  # the bodies that succeeded, in the order they ran
        self.waiting = 0  # joiners that have not run their body yet
        self.ran = 0  # members admitted so far, the leader included
        self.broken: BaseException | None = None  # the connection could not be had
        self.error: BaseException | None = None  # the commit failed
        self.done = threading.Event()


class GroupWriter:
    """Runs write transactions, grouping those that overlap in time (see the module doc)."""

    def __init__(
        self,
        engine: Engine,
        writer: Any,
        locking: bool,
        clock: DbClock,
        enabled: bool = True,
        keep: bool = False,
        prepare: Callable[[Connection], None] | None = None,
        committed: Callable[[], None] | None = None,
    ):
        self.engine = engine
        self.writer = writer  # SQLite: one open transaction at a time in this process
        self.locking = locking
        self.keep = keep  # one connection kept for every write (writes are serialized)
        self._kept: Connection | None = None
        self._prepare = prepare  # run on each connection newly kept for the writes
        self._committed = committed  # called after each commit, under the writer lock
        self.head = ChainHead()
        self.clock = clock
        self.enabled = enabled
        self._gate = threading.Condition()
        self._open: _Group | None = None
        self._local = threading.local()
        # Figures for benchmarks: write transactions that succeeded, and commits that carried them.
        self.writes = 0
        self.commits = 0

    def write(self) -> AbstractContextManager[Tx]:
        if self.enabled:
            return self._grouped()
        return self._alone_kept() if self.keep else self._alone()

    def _enter(self) -> None:
        if getattr(self._local, "busy", False):
            # The thread's own group waits for this body to finish: it would never run.
            raise RuntimeError("a store write was started inside another write of this thread")
        self._local.busy = True

    @contextmanager
    def _grouped(self) -> Iterator[Tx]:
        self._enter()
        try:
            with self._gate:
                group = self._open
                lead = group is None
                if group is None:
                    group = self._open = _Group()
                    group.turn.acquire()  # the leader's body runs first
                else:
                    group.waiting += 1
                group.ran += 1
                if group.ran >= MAX_MEMBERS:
                    self._open = None  # closed to newcomers; they start the next group
            with self._lead(group) if lead else self._join(group) as tx:
                yield tx
        finally:
            self._local.busy = False

    def queued(self) -> int:
        """Writers that joined the open group and wait for their turn (for tests that force a
        group to form)."""
        with self._gate:
            return self._open.waiting if self._open is not None else 0

    def close(self) -> None:
        with self.writer:
            conn, self._kept = self._kept, None
            if conn is not None:
                conn.close()

    def idle(self) -> Connection | None:
        """The kept connection, for a read between writes (the caller holds the writer lock,
        so no write is using it); None where no connection is kept (PostgreSQL)."""
        return self._kept_connection() if self.keep else None

    def _kept_connection(self) -> Connection:
        """The connection kept for SQLite's writes, opened again if a failed write closed it
        (the caller holds the writer lock)."""
        conn = self._kept
        if conn is None or conn.closed or conn.invalidated:
            conn = self._kept = self.engine.connect().execution_options(firm_write=True)
            if self._prepare is not None:
                self._prepare(conn)
        return conn

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A connection for one write transaction. SQLite writes are serialized by the writer
        lock, so one connection serves them all, kept open between them: a pool checkout, a
        connection object and a return to the pool per write cost more than the write's own
        statements. A write that fails closes it, and the next write opens another."""
        if not self.keep:
            with self.engine.connect() as fresh:
                yield fresh.execution_options(firm_write=True)
            return
        conn = self._kept_connection()
        try:
            yield conn
        except BaseException:
            # Whatever state a failed write left it in goes with it; failures are rare.
            self._kept = None
            conn.close()
            raise

    @contextmanager
    def _alone(self) -> Iterator[Tx]:
        """One transaction, one commit, no grouping."""
        self._enter()
        try:
            with self.writer, self._connection() as conn:
                try:
                    with conn.begin():
                        tx = Tx(conn, self.locking, self.clock.now(conn))
                        yield tx
                        head = tx.flush(self.head)
                except BaseException:
                    self.head.known = None  # whether the head moved is not known
                    raise
            if head is not None:
                self.head.known = head
        finally:
            self._local.busy = False
        self._count(1)

    @contextmanager
    def _alone_kept(self) -> Iterator[Tx]:
        """SQLite's write alone, on the kept connection (see _connection), with BEGIN IMMEDIATE
        and COMMIT on the driver (prepared.py), in one frame: every write passes here, several
        per task, and each context manager or generator stacked on it costs about a
        microsecond."""
        self._enter()
        try:
            with self.writer:
                conn = self._kept_connection()
                try:
                    begin_immediate(conn)
                    tx = Tx(conn, self.locking, self.clock.now(conn))
                    yield tx
                    head = tx.flush(self.head)
                    end(conn, commit=True)
                except BaseException:
                    self.head.known = None  # whether the head moved is not known
                    # Whatever state a failed write left the connection in goes with it;
                    # failures are rare.
                    self._kept = None
                    with contextlib.suppress(Exception):  # the failure is the error to report
                        end(conn, commit=False)
                    conn.close()
                    raise
                if head is not None:
                    self.head.known = head
                # Counted under the writer lock, which every write on SQLite holds (the
                # gate's Condition would be one more lock a write).
                self.writes += 1
                self.commits += 1
                if self._committed is not None:
                    self._committed()
        finally:
            self._local.busy = False

    @contextmanager
    def _lead(self, group: _Group) -> Iterator[Tx]:
        failure: BaseException | None = None
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self.writer)
                group.conn = stack.enter_context(self._connection())
            except BaseException as exc:
                group.broken = failure = exc
            if failure is None:
                try:
                    with self._member(group) as tx:
                        yield tx
                except BaseException as exc:
                    failure = exc
            group.turn.release()
            with self._gate:  # the joiners run their bodies
                while group.waiting:
                    self._gate.wait()
                if self._open is group:
                    self._open = None
            try:
                self._commit(group)
            except BaseException as exc:
                group.error = exc
            finally:
                group.done.set()
        if failure is not None:
            raise failure
        if group.error is not None:
            raise group.error

    @contextmanager
    def _join(self, group: _Group) -> Iterator[Tx]:
        try:
            with group.turn:
                if group.broken is not None:
                    raise group.broken
                with self._member(group) as tx:
                    yield tx
        finally:
            with self._gate:
                group.waiting -= 1
                self._gate.notify_all()
        group.done.wait()
        if group.error is not None:
            raise group.error

    @contextmanager
    def _member(self, group: _Group) -> Iterator[Tx]:
        """One member's body: alone in a fresh transaction, or in a savepoint after others."""
        conn = group.conn
        assert conn is not None
        if group.txn is None:
            group.txn = conn.begin()
        if not group.members:
            try:
                tx = Tx(conn, self.locking, self.clock.now(conn))
                yield tx
                tx.check()
            except BaseException:
                txn, group.txn = group.txn, None
                txn.rollback()
                raise
        else:
            try:
                with conn.begin_nested():
                    ahead = sum(len(m.checked) for m in group.members)
                    tx = Tx(conn, self.locking, self.clock.now(conn), ahead)
                    yield tx
                    tx.check()
            except BaseException as exc:
                if conn.invalidated:
                    # The connection died under this body: the transaction, and every earlier
                    # member's body in it, is gone. All of them (and every joiner still to
                    # come) get the driver's error, which the retry layer re-runs, never the
                    # PendingRollbackError a dead transaction answers with.
                    group.broken = _lost_connection(exc)
                    raise group.broken from None
                raise
        group.members.append(tx)

    def _commit(self, group: _Group) -> None:
        txn = group.txn
        if txn is None:
            return
        if group.broken is not None:
            with contextlib.suppress(Exception):  # the connection is gone; release it
                txn.rollback()
            raise group.broken
        if not group.members:
            txn.rollback()
            return
        try:
            head = append_chain(txn.connection, self.locking, group.members, self.head)
            txn.commit()
        except BaseException:
            self.head.known = None  # whether the head moved is not known
            with contextlib.suppress(Exception):
                txn.rollback()
            if self.keep:  # as after a failed write alone: the kept connection goes
                self._kept = None
                with contextlib.suppress(Exception):
                    txn.connection.close()
            raise
        if head is not None:
            self.head.known = head
        self._count(len(group.members))
        if self._committed is not None:  # the leader still holds the writer lock
            self._committed()

    def _count(self, writes: int) -> None:
        with self._gate:
            self.writes += writes
            self.commits += 1


def _lost_connection(exc: BaseException) -> BaseException:
    """The driver's error that broke the connection, found in what the failed body raised (the
    savepoint's rollback on a dead connection raises an error of its own over it)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DBAPIError) and seen.connection_invalidated:
            return seen
        seen = seen.__cause__ or seen.__context__
    return exc
