"""LISTEN/NOTIFY on PostgreSQL: how a commit on one machine reaches every other one at once.

A notification is only a hint. Every write transaction that appends events also sends one
NOTIFY on CHANNEL, which PostgreSQL delivers when (and only if) the transaction commits, in
commit order. The payload says the last sequence number written, how many tasks became todo
(work for idle workers; store/wakeup.py wakes one worker for it, not all), which process
committed, and which tasks were cancelled (so their sessions stop now, wherever they run;
a subtree's cancel, one entry that does not list its tasks, is sent as "check yours").
The stored rows stay the truth: a reader always re-reads the log from its own last seq, so a
lost or late notification costs latency, never an event, and after a reconnect every waiter
is woken to look again.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from firm.endings import ends_many
from firm.events import TO_TODO, EventKind
from firm.store.base import Event

log = logging.getLogger("firm.store")

CHANNEL = "firm_events"
_PAYLOAD_LIMIT = 7000  # PostgreSQL allows just under 8000 bytes


@dataclass(frozen=True)
class StoreSignal:
    """What another process committed, as far as a worker or a watcher needs to know.

    todo is how many tasks became todo (0: none). origin is the listening name of the process
    that committed (None if it does not listen); `to` and hop are set on a wake-up one worker
    passed on to the next (store/wakeup.py). cancelled is None when the list was too long to
    send (or after a reconnect): the receiver then checks the state of the tasks it cares
    about itself.
    """

    seq: int
    todo: int
    cancelled: tuple[str, ...] | None
    reconnected: bool = False
    origin: str | None = None
    to: str | None = None
    hop: int = 0


SignalListener = Callable[[StoreSignal], None]


def payload(seq: int, events: Iterable[Event]) -> str:
    """What a commit that appended `events` (its last seq) tells every other process."""
    todo: set[str | None] = set()
    cancelled: list[str] = []
    subtree = False
    for e in events:
        if e.kind in TO_TODO:
            todo.add(e.task_id)
        elif e.kind == EventKind.STARTED:
            # Woken and claimed in the same commit (a hand-over): no work for anyone else.
            todo.discard(e.task_id)
        elif ends_many(e.kind, e.data):
            subtree = True  # its entry does not list the tasks it ended
        elif e.kind == EventKind.CANCELLED and e.task_id:
            cancelled.append(e.task_id)
    body: dict[str, object] = {"seq": seq}
    if todo:  # new work: how many tasks, and who made it (the worker it wakes first)
        body["todo"] = len(todo)
        body["from"] = listen_name()
    if cancelled:
        body["cancelled"] = cancelled
    text = json.dumps(body, separators=(",", ":"))
    if subtree or len(text) > _PAYLOAD_LIMIT:
        body["cancelled"] = "*"
        text = json.dumps(body, separators=(",", ":"))
    return text


def handoff(seq: int, todo: int, to: str, hop: int) -> str:
    """A wake-up passed on: `to` (a listening name) is to claim up to `todo` tasks."""
    return json.dumps({"seq": seq, "todo": todo, "to": to, "hop": hop}, separators=(",", ":"))


def parse(text: str) -> StoreSignal:
    body = json.loads(text)
    cancelled = body.get("cancelled", [])
    origin, to = body.get("from"), body.get("to")
    return StoreSignal(
        seq=int(body.get("seq", 0)),
        todo=max(0, int(body.get("todo", 0))),
        cancelled=None if cancelled == "*" else tuple(cancelled),
        origin=origin if isinstance(origin, str) else None,
        to=to if isinstance(to, str) else None,
        hop=max(0, int(body.get("hop", 0))),
    )


def application_name(role: str) -> str:
    """How this process's connections show in pg_stat_activity: role, host and pid."""
    return f"firm-{role}:{socket.gethostname()}:{os.getpid()}"[:63]


def listen_name() -> str:
    """This process's listening connection's name: how other processes address it."""
    return application_name("listen")


class PgListener:
    """A thread holding one connection that LISTENs, reconnecting with backoff when it drops."""

    ping_every = 10.0  # seconds of silence after which the connection is checked

    def __init__(self, conninfo: str, deliver: SignalListener):
        self._conninfo = conninfo
        self._deliver = deliver
        self._stop = threading.Event()
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="firm-listen", daemon=True)
        self._conn: object | None = None

    def start(self) -> PgListener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        import psycopg

        backoff = 0.1
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self._conninfo,
                    autocommit=True,
                    application_name=application_name("listen"),
                    connect_timeout=10,
                    keepalives=1,
                    keepalives_idle=10,
                    keepalives_interval=5,
                    keepalives_count=3,
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.connected.set()
                    backoff = 0.1
                    # Anything committed while we were not listening is in the table: wake
                    # every waiter to re-read from its own last seq.
                    self._deliver(StoreSignal(0, todo=True, cancelled=None, reconnected=True))
                    self._listen(conn)
            except Exception as exc:  # the listener must outlive any database trouble
                if self._stop.is_set():
                    break
                log.warning("store: LISTEN connection lost (%s); reconnecting", exc)
            self.connected.clear()
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def _listen(self, conn: object) -> None:
        quiet = 0.0
        while not self._stop.is_set():
            got = False
            for note in conn.notifies(timeout=0.5):  # type: ignore[attr-defined]
                got = True
                try:
                    signal = parse(note.payload)
                except (ValueError, TypeError, AttributeError):
                    continue
                self._deliver(signal)
            if got:
                quiet = 0.0
                continue
            quiet += 0.5
            if quiet >= self.ping_every:  # a silent network failure shows only when we talk
                conn.execute("SELECT 1")  # type: ignore[attr-defined]
                quiet = 0.0
