"""A write transaction, the log entries it appends when it commits, and the clock it stamps."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from sqlalchemy import Connection, bindparam, func, text

from firm.chain import GENESIS, canonical_json, chained
from firm.events import EventKind, InvalidEvent, validate
from firm.eventshapes import shape, validate_shaped
from firm.store import notify
from firm.store import queries as Q
from firm.store.base import Event
from firm.store.compiled import remember
from firm.store.prepared import insert_linked, insert_values, run
from firm.tasks import Task

# An entry as the store takes it: (kind, task, agent, data). The store owns the data dict from
# then on: when it is plain JSON it becomes the entry's data as stored, not a copy read back.
Pending = tuple[str, str | None, str | None, Any]
# An entry checked: (kind, task, agent, data as stored, its canonical text, the text's digest).
Checked = tuple[str, str | None, str | None, dict[str, Any], str, str]

_new = object.__new__


class Tx:
    """A write transaction plus the events it will append when it commits."""

    __slots__ = ("ahead", "appended", "checked", "conn", "locking", "now", "pending")

    def __init__(self, conn: Connection, locking: bool, now: float, ahead: int = 0):
        self.conn = conn
        self.locking = locking  # explicit row locks (PostgreSQL); SQLite holds the db lock
        self.now = now
        # Entries that the same commit appends before this transaction's (earlier members of
        # its group): a write that stamps rows with its own entry's seq counts them.
        self.ahead = ahead
        self.pending: list[Pending] = []
        self.checked: list[Checked] = []
        self.appended: list[Event] = []

    def emit(
        self, kind: EventKind, task: Task | str | None, agent: str | None = None, **data: Any
    ) -> None:
        task_id: str | None
        if isinstance(task, Task):
            task_id, agent = task.id, agent or task.assignee
        else:
            task_id = task
        self.pending.append((kind, task_id, agent, data))

    def check(self) -> None:
        """Make pending events canonical and check them against the catalogue: InvalidEvent
        fails this transaction (or this member of a group) alone, before the head is touched.
        Entries saying the same thing (a cancel's 10,000 entries share one reason) are
        checked once. Every entry passes here, several per task: one loop, no call per entry
        but for what is new to this transaction."""
        seen: dict[tuple[str, str], tuple[str, dict[str, Any], str]] = {}
        texts: dict[int, str] = {}  # by the data's identity: entries sharing one dict
        checked = []
        for kind, task_id, agent, data in self.pending:
            text = texts.get(id(data))
            if text is None:
                try:  # what is stored, so what is checked and hashed is exactly what is stored
                    text = texts[id(data)] = canonical_json(data)
                except (TypeError, ValueError) as exc:
                    raise _not_json(kind, task_id, exc) from None
            known = seen.get((kind, text))
            if known is None:
                known = seen[(kind, text)] = _as_stored(kind, task_id, data, text)
            checked.append((known[0], task_id, agent, known[1], text, known[2]))
        self.checked = checked
        self.pending.clear()

    def flush(self, head: ChainHead | None = None) -> tuple[int, str] | None:
        """Append pending events to the chain; called last, so the head lock is held briefly.
        Returns the new head (ChainHead)."""
        self.check()
        return append_chain(self.conn, self.locking, [self], head)


class ChainHead:
    """Where this process last left the chain: (seq, hash) after its last commit, or None.

    A commit then builds its entries on it without reading the head first, and lets the
    database check the guess in a statement it runs anyway: on PostgreSQL the head row's move,
    `UPDATE chain_head SET seq, hash WHERE seq = known AND hash = known`; on SQLite the
    entries' insert, which adds an entry only where it continues the last one. When another
    process (or another store object) appended since, nothing changes, and the commit reads
    the head as it always did — under the write lock on SQLite, FOR UPDATE on PostgreSQL —
    and rebuilds its entries' sequence numbers and hashes on it. Either way the entries are
    built on the head the transaction moves, so there is no gap and the chain holds; what is
    known here is a guess that saves a statement when it is right. Where it keeps being wrong
    (other workers commit between this one's commits), a miss costs a statement: after each
    miss the next few commits read the head instead, more of them after every further miss.
    """

    __slots__ = ("_backoff", "_skip", "known")

    MAX_SKIP = 16

    def __init__(self) -> None:
        self.known: tuple[int, str] | None = None
        self._skip = 0  # commits left that read the head instead of guessing
        self._backoff = 0

    def guess(self) -> tuple[int, str] | None:
        if self._skip > 0:
            self._skip -= 1
            return None
        return self.known

    def missed(self) -> None:
        self._backoff = min(2 * self._backoff or 1, self.MAX_SKIP)
        self._skip = self._backoff

    def hit(self) -> None:
        self._backoff = 0


def append_chain(
    conn: Connection, locking: bool, txs: list[Tx], head: ChainHead | None = None
) -> tuple[int, str] | None:
    """Append the checked entries of these transactions to the chain, in this order: the writes
    of one commit (a group of members, or one transaction alone). On PostgreSQL the head row is
    moved first — from the head this process knows, else from the one read under its lock —
    then the entries are inserted in one batch. On SQLite the head is the last entry (the
    `chain_head` view, revision 0009): the entries are inserted on the head this process
    knows by a statement that adds each only right after the entry it links to, else on the
    head read. Fills each Tx's `appended`; returns the new head, for the caller to remember
    once the transaction has committed (None: nothing was appended)."""
    for tx in txs:  # a loop, not any() over a generator: most commits are one transaction
        if tx.checked:
            break
    else:
        return None
    if not locking:
        return _append_linked(conn, txs, head)
    known = head.guess() if head is not None else None
    if known is not None and head is not None:
        rows, events, last = _entries(txs, *known)
        if _move_head(conn, last, events, expected=known):
            head.hit()
        else:
            head.missed()
            known = None  # someone else moved it: read it, as without a guess
    if known is None:
        seq, prev = run(conn, Q.CHAIN_HEAD_FOR_UPDATE).one()
        rows, events, last = _entries(txs, seq, prev)
        _move_head(conn, last, events)
    insert_values(conn, Q.INSERT_EVENTS, COLUMNS, rows)
    _appended(txs, events)
    return last


def _append_linked(
    conn: Connection, txs: list[Tx], head: ChainHead | None
) -> tuple[int, str] | None:
    """SQLite's append: no head row to move (the write transaction holds the whole file, so
    the last entry is the head). Entries built on the head this process knows are inserted
    by LINKED_INSERT, which the database refuses unless they continue the last entry: when
    another process (or store object) appended since, none is added, and the entries are
    rebuilt on the head read, as without a guess. A statement less per commit than moving a
    head row (callgrind: ~37 k instructions), and a page less in the WAL, for one seek
    (~5 k)."""
    known = head.guess() if head is not None else None
    if known is not None and head is not None:
        rows, events, last = _entries(txs, *known)
        # The first entry's prev_hash is checked (the one the guess gave); the rest follow it.
        linked = [(*rows[0], rows[0][6])]
        linked += [(*row, 0) for row in rows[1:]]
        if insert_linked(conn, LINKED_INSERT, linked):
            head.hit()
            _appended(txs, events)
            return last
        head.missed()
    seq, prev = run(conn, Q.CHAIN_HEAD).one()
    rows, events, last = _entries(txs, seq, prev)
    insert_values(conn, Q.INSERT_EVENTS, COLUMNS, rows)
    _appended(txs, events)
    return last


def _appended(txs: list[Tx], events: list[list[Event]]) -> None:
    for tx, appended in zip(txs, events, strict=True):
        tx.appended.extend(appended)
        tx.checked = []


# SQLite: entries (values in COLUMNS order, then the prev_hash to check, on the first entry
# only) the database adds only where they continue the log: an entry whose seq is taken
# breaks the primary key, and a first entry whose prev_hash is not the hash of the entry
# before its seq (none there: a gap) gets none, which breaks NOT NULL. The entries after the
# first are linked to it as they are built: the lookup is skipped for them (~4 k
# instructions an entry); they carry 0 where the first has its prev_hash (a text, never
# equal to an integer), not None, which sqlite3 binds through an adapter lookup (~3 k).
# Not INSERT … SELECT … WHERE: SQLite runs that through a temporary table when the SELECT
# reads the table written (~33 k instructions an entry more).
LINKED_INSERT = (
    "INSERT INTO events (seq, ts, kind, task_id, agent, data, prev_hash, hash)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, CASE WHEN ?9 = 0 THEN ?7 WHEN coalesce("
    "(SELECT prior.hash FROM events AS prior WHERE prior.seq = ?1 - 1),"
    f" '{GENESIS}') = ?9 THEN ?7 END, ?8)"
)
remember(LINKED_INSERT)  # compiled on a new connection ahead of its first commit


# An entry's columns, in the order _entries gives their values.
COLUMNS = ("seq", "ts", "kind", "task_id", "agent", "data", "prev_hash", "hash")


def _entries(
    txs: list[Tx], seq: int, prev: str
) -> tuple[list[tuple[Any, ...]], list[list[Event]], tuple[int, str]]:
    """The rows to insert (values in COLUMNS order) and the events each transaction appends,
    chained on (seq, prev)."""
    rows = []
    events: list[list[Event]] = []
    for tx in txs:
        now = tx.now
        checked = tx.checked
        hashes = chained(prev, seq, now, [(c[0], c[1], c[2], c[5]) for c in checked])
        mine = []
        for (kind, task_id, agent, data, canonical, _digest), h in zip(
            checked, hashes, strict=True
        ):
            seq += 1
            rows.append((seq, now, kind, task_id, agent, canonical, prev, h))
            # The event is the row with its data as stored: built straight into its __dict__,
            # since a frozen dataclass's __init__ sets each field through object.__setattr__
            # (as much again as the rest of the entry's row).
            event = _new(Event)
            event.__dict__.update(
                seq=seq,
                ts=now,
                kind=kind,
                task_id=task_id,
                agent=agent,
                data=data,
                prev_hash=prev,
                hash=h,
            )
            mine.append(event)
            prev = h
        events.append(mine)
    return rows, events, (seq, prev)


def _move_head(
    conn: Connection,
    head: tuple[int, str],
    events: list[list[Event]],
    expected: tuple[int, str] | None = None,
) -> bool:
    """PostgreSQL: move the chain head row to `head` (only from `expected`, when given), with
    the NOTIFY of these entries, delivered at commit, in commit order, and only if it
    commits (one trip); True if it moved."""
    if expected is None:
        stmt, params = Q.MOVE_HEAD, {"p_seq": head[0], "p_hash": head[1]}
    else:
        stmt = MOVE_HEAD_FROM
        params = {
            "p_seq": head[0],
            "p_hash": head[1],
            "p_from_seq": expected[0],
            "p_from_hash": expected[1],
        }
    note = notify.payload(head[0], [e for mine in events for e in mine])
    move = stmt.returning(func.pg_notify(notify.CHANNEL, note))
    return len(conn.execute(move, params).all()) == 1


# The head moved only from where this process left it (ChainHead).
MOVE_HEAD_FROM = Q.MOVE_HEAD.where(
    Q.HEAD.c.seq == bindparam("p_from_seq"), Q.HEAD.c.hash == bindparam("p_from_hash")
)


def _as_stored(
    kind: str, task_id: str | None, data: Any, text: str
) -> tuple[str, dict[str, Any], str]:
    """The entry's kind, its data as stored (what reading its canonical text back gives), if
    the event catalogue allows it, and the text's digest, what is hashed. Data of plain JSON
    types only (exact str, int, float, bool, None, lists, dicts with text keys: what nearly
    every entry holds) reads back as itself, so it is checked as it is, by its shape
    (firm/eventshapes.py); anything else (a tuple, an enum member, a subclass) is read back
    from the text first."""
    data_shape = shape(data) if type(data) is dict else None
    try:
        if data_shape is None:
            stored = json.loads(text)
            data_shape = shape(stored) if type(stored) is dict else None
        else:
            stored = data
        checked = (
            validate(kind, stored)
            if data_shape is None
            else validate_shaped(kind, stored, data_shape)
        )
        kind_value = _TEXT[checked]
    except InvalidEvent as exc:
        raise InvalidEvent(f"the store refuses an event of task {task_id}: {exc}") from None
    return kind_value, stored, hashlib.sha256(text.encode()).hexdigest()


# A kind's text, by its member: the member's `value` is a property of Enum's, ~1 µs a call.
_TEXT = {kind: kind.value for kind in EventKind}


def _not_json(kind: str, task_id: str | None, exc: Exception) -> InvalidEvent:
    return InvalidEvent(f"{kind} event of task {task_id}: its data is not JSON ({exc})")


class DbClock:
    """Timestamps for writes. On PostgreSQL, the database server's clock: leases are written by
    one machine and judged by another, so they must not depend on each machine's clock. The
    offset to the server's clock is measured now and then, not asked for in every transaction."""

    refresh_every = 30.0

    def __init__(self, use_server: bool):
        self.use_server = use_server
        self.offset = 0.0
        self.measured_at = -self.refresh_every

    def now(self, conn: Connection) -> float:
        if not self.use_server:
            # Whole microseconds, as round(time(), 6) gives them, without the decimal
            # conversion rounding to digits runs (as much as the rest of this call).
            return time.time_ns() // 1000 / 1e6
        if time.monotonic() - self.measured_at > self.refresh_every:
            server = conn.execute(text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one()
            self.offset = float(server) - time.time()
            self.measured_at = time.monotonic()
        return round(time.time() + self.offset, 6)
