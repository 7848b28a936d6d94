"""Which tasks may have notes, or calls and questions put to a person, known without a read:
most sessions' brief needs none of them.

A note is only an entry of the log (store/notes.py), so learning that a task has none costs a
read per session. But every entry this process commits reaches the engine (Store.subscribe):
while every seq since the engine began watching has reached it, a task whose creation it saw
has a note only if a note entry for it reached it too. Likewise a call waiting for a person or
a question: each is made in the commit that logs its `approval_requested` or
`question_asked` on the task (store/approvals.py, store/questions.py, store/plans.py), so a
task with neither among the entries seen has asked nothing, and a woken manager's session (on
the makespan's critical path) starts without reading its requests. An entry committed by
another process (a note left from the CLI, a second worker) leaves a hole in the seqs this
process saw; every session that starts after the hole reads its notes and requests, as before,
since the hole may be one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from firm.events import ENDINGS, EventKind
from firm.store.base import Event

BORN = frozenset({EventKind.CREATED, EventKind.DELEGATED})
ASKED = frozenset({EventKind.APPROVAL_REQUESTED, EventKind.QUESTION_ASKED})

# Seqs seen above a hole before the watch gives up: entries of this process still on their
# way are a handful; more means the hole is another process's, and will not fill.
AHEAD_LIMIT = 10_000
# Open tasks watched; beyond, new ones read their notes (a subtree cancelled by one entry
# leaves its tasks here).
BORN_LIMIT = 200_000


class NoteWatch:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: int | None = None  # every seq from the first seen up to here was seen
        self._ahead: set[int] = set()  # seen, beyond a seq not (yet) seen
        self._born: set[str] = set()  # open tasks whose creation this process committed
        self._noted: set[str] = set()
        self._asked: set[str] = set()
        self._started: dict[str, int] = {}  # the seq of each born task's latest claim
        self._blind = False

    def saw(self, events: Iterable[Event]) -> None:
        """Every transaction's entries, as this process commits them."""
        with self._lock:
            if self._blind:
                return
            for e in events:
                counted = self._count(e.seq)
                tid = e.task_id
                if tid is None:
                    continue
                if e.kind in BORN:
                    # Born below the first seq seen (entries arriving out of order at the
                    # start): an entry of another process between the two would go unseen.
                    if counted and len(self._born) < BORN_LIMIT:
                        self._born.add(tid)
                elif e.kind == EventKind.NOTE:
                    self._noted.add(tid)
                elif e.kind in ASKED:
                    self._asked.add(tid)
                elif e.kind == EventKind.STARTED and tid in self._born:
                    self._started[tid] = e.seq
                elif e.kind in ENDINGS:
                    # A note on a finished task changes nothing; its next session, should it
                    # be re-opened, reads them.
                    self._born.discard(tid)
                    self._noted.discard(tid)
                    self._asked.discard(tid)
                    self._started.pop(tid, None)

    def _count(self, seq: int) -> bool:
        if seq == self._next and not self._ahead:  # the usual case: the next seq, in order
            self._next = seq + 1
            return True
        if self._next is None:
            self._next = seq
        if seq < self._next:
            return False  # arrived after a later one, when the watch had just begun
        self._ahead.add(seq)
        while self._next in self._ahead:
            self._ahead.discard(self._next)
            self._next += 1
        if len(self._ahead) > AHEAD_LIMIT:
            self._blind = True
            self._born.clear()
            self._noted.clear()
            self._asked.clear()
            self._started.clear()
        return True

    def none_for(self, task_id: str) -> bool:
        """True only when the task surely has no notes: this process saw it made, saw every
        entry up to its latest claim, and no note for it among them."""
        return self._seen_whole(task_id, self._noted)

    def none_asked(self, task_id: str) -> bool:
        """True only when the task surely put no call or question to a person: seen whole up
        to its latest claim, as for notes, with no such entry for it."""
        return self._seen_whole(task_id, self._asked)

    def _seen_whole(self, task_id: str, marked: set[str]) -> bool:
        with self._lock:
            started = self._started.get(task_id)
            return (
                started is not None
                and self._next is not None
                and self._next > started
                and task_id not in marked
            )
