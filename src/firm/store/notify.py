"""LISTEN/NOTIFY on PostgreSQL: how a commit on one machine reaches every other one at once.

A notification is only a hint. Every write transaction that appends events also sends one
NOTIFY on CHANNEL, which PostgreSQL delivers when (and only if) the transaction commits, in
commit order. The payload says the last sequence number written, whether a task became todo
(a nudge for idle workers) and which tasks were cancelled (so their sessions stop now). The
stored rows stay the truth: a reader always re-reads the log from its own last seq, so a
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

from firm.events import TO_TODO

log = logging.getLogger("firm.store")

CHANNEL = "firm_events"
_PAYLOAD_LIMIT = 7000  # PostgreSQL allows just under 8000 bytes


@dataclass(frozen=True)
class StoreSignal:
    """What another process committed, as far as a worker or a watcher needs to know.

    cancelled is None when the list was too long to send (or after a reconnect): the
    receiver then checks the state of the tasks it cares about itself.
    """

    seq: int
    todo: bool
    cancelled: tuple[str, ...] | None
    reconnected: bool = False


SignalListener = Callable[[StoreSignal], None]


def payload(seq: int, kinds: Iterable[str], cancelled: list[str]) -> str:
    kinds = set(kinds)
    body: dict[str, object] = {"seq": seq}
    if kinds & TO_TODO:  # new work: a nudge for idle workers
        body["todo"] = 1
    if cancelled:
        body["cancelled"] = cancelled
    text = json.dumps(body, separators=(",", ":"))
    if len(text) > _PAYLOAD_LIMIT:
        body["cancelled"] = "*"
        text = json.dumps(body, separators=(",", ":"))
    return text


def parse(text: str) -> StoreSignal:
    body = json.loads(text)
    cancelled = body.get("cancelled", [])
    return StoreSignal(
        seq=int(body.get("seq", 0)),
        todo=bool(body.get("todo")),
        cancelled=None if cancelled == "*" else tuple(cancelled),
    )


def application_name(role: str) -> str:
    """How this process's connections show in pg_stat_activity: role, host and pid."""
    return f"firm-{role}:{socket.gethostname()}:{os.getpid()}"[:63]


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
